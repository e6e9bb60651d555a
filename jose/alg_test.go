package jose

import (
	"crypto"
	"errors"
	"strings"
	"testing"
)

// TestParseAlg: each supported alg by its exact name; every other name,
// however close, is refused with the list of supported ones.
func TestParseAlg(t *testing.T) {
	for in, want := range map[string]Alg{"ES256": ES256, "ES384": ES384, "ES512": ES512, "RS256": RS256, "PS256": PS256, "EdDSA": EdDSA} {
		if got, err := ParseAlg(in); err != nil || got != want {
			t.Errorf("ParseAlg(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"es256", "EDDSA", "HS256", "none", "", " ES256"} {
		got, err := ParseAlg(in)
		if err == nil || got != "" {
			t.Errorf("ParseAlg(%q) = %q, %v; want an error", in, got, err)
			continue
		}
		if !errors.Is(err, ErrUnsupportedAlg) {
			t.Errorf("ParseAlg(%q) error %v does not wrap ErrUnsupportedAlg", in, err)
		}
		for _, a := range Algs() {
			if !strings.Contains(err.Error(), string(a)) {
				t.Errorf("ParseAlg(%q) error %q does not list %s", in, err, a)
			}
		}
	}
}

func TestAlgHash(t *testing.T) {
	tests := []struct {
		alg  Alg
		want crypto.Hash
	}{
		{ES256, crypto.SHA256}, {ES384, crypto.SHA384}, {ES512, crypto.SHA512},
		{RS256, crypto.SHA256}, {PS256, crypto.SHA256}, {EdDSA, 0}, {"HS256", 0},
	}
	for _, tt := range tests {
		if got := tt.alg.Hash(); got != tt.want {
			t.Errorf("%s.Hash() = %v, want %v", tt.alg, got, tt.want)
		}
	}
}
