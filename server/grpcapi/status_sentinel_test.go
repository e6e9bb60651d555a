package grpcapi

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/registry"
)

// TestStatusProviderKey: a backend error matching backends.ErrKeyDisabled
// or backends.ErrKeyNotFound, wrapped as the key ring and the signer wrap
// it (with the kid), is FAILED_PRECONDITION or NOT_FOUND naming the key and
// saying what to do, not INTERNAL.
func TestStatusProviderKey(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
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
		wantStatus(t, log, tt.err, tt.code, tt.has...)
	}
}

// wantStatus checks err's status: its code, and that its message says has.
func wantStatus(t *testing.T, log *slog.Logger, err error, code codes.Code, has ...string) {
	t.Helper()
	st := status.Convert(Status(log, "req-1", err))
	if st.Code() != code {
		t.Errorf("%v: %v %q, want %v", err, st.Code(), st.Message(), code)
	}
	for _, s := range has {
		if !strings.Contains(st.Message(), s) {
			t.Errorf("%q does not mention %q", st.Message(), s)
		}
	}
}

// TestQuotaStatus: a registration over a registry quota is
// RESOURCE_EXHAUSTED naming the limit and the fix (raise it), whether the
// registry or the caller is full (server's TestRegistryQuotas makes them).
func TestQuotaStatus(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, err := range []error{
		&registry.QuotaError{Limit: "registry.max_agents", Max: 2},
		&registry.QuotaError{Limit: "registry.max_agents_per_caller", Max: 1, Caller: "token:a"},
	} {
		limit := err.(*registry.QuotaError).Limit
		wantStatus(t, log, fmt.Errorf("registering: %w", err), codes.ResourceExhausted, limit, "raise "+limit)
	}
}
