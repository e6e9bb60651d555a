package transparency

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

func TestOpenKeys(t *testing.T) {
	ed := testsupport.Key(t, jose.EdDSA)
	keys := map[string]crypto.Signer{"file:ed": ed, "file:ec": testsupport.Key(t, jose.ES256)}
	open := func(_ context.Context, uri string) (crypto.Signer, string, error) {
		if k, ok := keys[uri]; ok {
			return k, "redacted-" + uri, nil
		}
		return nil, "redacted-" + uri, errors.New("no such key")
	}
	quiet := slog.New(slog.DiscardHandler)
	const origin = "cardsign.example.com/log"

	t.Run("configured", func(t *testing.T) {
		lk, err := OpenKeys(t.Context(), KeyConfig{Origin: origin, URIs: []string{"file:ed"}}, open, quiet)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := VerifierKey(origin, ed.Public())
		if got := lk.Signer.VerifierKeys(); len(got) != 1 || got[0] != want {
			t.Errorf("verifier keys %q, want [%q]", got, want)
		}
		// Nothing was made: nothing to write.
		if err := lk.WriteMade(func(string, ed25519.PrivateKey) error { return errors.New("written") }, quiet); err != nil {
			t.Errorf("WriteMade of opened keys: %v", err)
		}
	})
	t.Run("made", func(t *testing.T) {
		lk, err := OpenKeys(t.Context(), KeyConfig{Origin: origin, MakeAt: "/keys/log.key"}, open, quiet)
		if err != nil {
			t.Fatal(err)
		}
		var path string
		var wrote ed25519.PrivateKey
		if err := lk.WriteMade(func(p string, k ed25519.PrivateKey) error { path, wrote = p, k; return nil }, quiet); err != nil {
			t.Fatal(err)
		}
		want, _ := VerifierKey(origin, wrote.Public())
		if path != "/keys/log.key" || lk.Signer.VerifierKeys()[0] != want {
			t.Errorf("wrote %s with key %s, signer has %q", path, want, lk.Signer.VerifierKeys())
		}
		if err := lk.WriteMade(func(string, ed25519.PrivateKey) error { return errors.New("disk full") }, quiet); err == nil || !strings.Contains(err.Error(), "/keys/log.key") {
			t.Errorf("failed write: %v, want an error naming the path", err)
		}
	})
	for _, tc := range []struct {
		name string
		cfg  KeyConfig
		want []string
	}{
		{"not Ed25519", KeyConfig{Origin: origin, URIs: []string{"file:ed", "file:ec"}}, []string{"log.keys[1]", "redacted-file:ec", "Ed25519"}},
		{"not there", KeyConfig{Origin: origin, URIs: []string{"file:gone"}}, []string{"log.keys[0]", "redacted-file:gone", "no such key"}},
		{"bad retired key", KeyConfig{Origin: origin, URIs: []string{"file:ed"}, Retired: []string{"nonsense"}}, []string{"log.retired_keys"}},
		{"bad origin", KeyConfig{Origin: "https://x", URIs: []string{"file:ed"}}, []string{"scheme"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := OpenKeys(t.Context(), tc.cfg, open, quiet)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to say %q", err, w)
				}
			}
		})
	}
}
