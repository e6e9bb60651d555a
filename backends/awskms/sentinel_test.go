//go:build !noawskms

package awskms

import (
	"errors"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/jose"
)

// TestProviderKeySentinels: a key disabled or deleted at KMS behind an open
// signer's back fails signing (and a new Open) with errors matching the
// shared sentinels backends.ErrKeyDisabled and backends.ErrKeyNotFound, at
// once (no retries) and not as unavailability, naming the key.
func TestProviderKeySentinels(t *testing.T) {
	tests := []struct {
		name   string
		change func(f *awskmsfake.Server, arn string) error
		want   error
	}{
		{"disabled", func(f *awskmsfake.Server, arn string) error { return f.DisableKey(arn) }, backends.ErrKeyDisabled},
		{"deleted", func(f *awskmsfake.Server, arn string) error { return f.DeleteKey(arn) }, backends.ErrKeyNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{}, awskmsfake.Options{})
			arn := e.createKey(t, "ECC_NIST_P256")
			h := e.open(t, "awskms:///"+arn)
			if err := tt.change(e.fake, arn); err != nil {
				t.Fatal(err)
			}
			before := e.b.Stats()
			_, err := jose.Sign(t.Context(), h.Signer, h.Alg, signingInput(10))
			if !errors.Is(err, tt.want) || errors.Is(err, backends.ErrUnavailable) {
				t.Fatalf("Sign: %v, want %v and not unavailability", err, tt.want)
			}
			if !strings.Contains(err.Error(), arn) {
				t.Errorf("Sign: %v does not name the key %s", err, arn)
			}
			if s := e.b.Stats(); s.Retries != before.Retries || s.Failures != before.Failures+1 {
				t.Errorf("stats %+v after %+v: want no retry and one failure", s, before)
			}
			if _, err := e.b.Open(t.Context(), "awskms:///"+arn); !errors.Is(err, tt.want) {
				t.Errorf("Open: %v, want %v", err, tt.want)
			}
		})
	}
}
