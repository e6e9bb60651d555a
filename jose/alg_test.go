package jose

import (
	"crypto"
	"errors"
	"strings"
	"testing"
)

func TestParseAlg(t *testing.T) {
	tests := []struct {
		in      string
		want    Alg
		wantErr bool
	}{
		{"ES256", ES256, false},
		{"ES384", ES384, false},
		{"ES512", ES512, false},
		{"RS256", RS256, false},
		{"PS256", PS256, false},
		{"EdDSA", EdDSA, false},
		{"es256", "", true},
		{"EDDSA", "", true},
		{"HS256", "", true},
		{"none", "", true},
		{"", "", true},
		{" ES256", "", true},
	}
	for _, tt := range tests {
		got, err := ParseAlg(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseAlg(%q) = %q, %v; want %q, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil {
			if !errors.Is(err, ErrUnsupportedAlg) {
				t.Errorf("ParseAlg(%q) error %v does not wrap ErrUnsupportedAlg", tt.in, err)
			}
			for _, a := range Algs() {
				if !strings.Contains(err.Error(), string(a)) {
					t.Errorf("ParseAlg(%q) error %q does not list %s", tt.in, err, a)
				}
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
