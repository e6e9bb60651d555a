package server

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cardsign/cardsign/backends"
)

// TestStatusProviderKey: a backend error matching backends.ErrKeyDisabled
// or backends.ErrKeyNotFound, wrapped as the key ring and the signer wrap
// it (with the kid), is FAILED_PRECONDITION or NOT_FOUND naming the key and
// saying what to do, not INTERNAL.
func TestStatusProviderKey(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		err  error
		code codes.Code
		has  []string
	}{
		{fmt.Errorf("signer: sign with kid-1: %w", fmt.Errorf("awskms: key arn:k is Disabled: %w", backends.ErrKeyDisabled)),
			codes.FailedPrecondition, []string{"kid-1", "arn:k", "disabled at its provider", "enable it at the provider, or rotate"}},
		{fmt.Errorf("open key kid-2 (gcpkms://v/1): %w", fmt.Errorf("gcpkms: key v/1 not found: %w", backends.ErrKeyNotFound)),
			codes.NotFound, []string{"kid-2", "not found at its provider", "restore it there, or rotate"}},
	}
	for _, tt := range tests {
		st := status.Convert(toStatus(log, "req-1", tt.err))
		if st.Code() != tt.code {
			t.Errorf("%v: %v %q, want %v", tt.err, st.Code(), st.Message(), tt.code)
		}
		for _, s := range tt.has {
			if !strings.Contains(st.Message(), s) {
				t.Errorf("%q does not mention %q", st.Message(), s)
			}
		}
	}
}
