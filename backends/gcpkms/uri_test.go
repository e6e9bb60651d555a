//go:build !nogcpkms

package gcpkms

import (
	"errors"
	"testing"

	"github.com/cardsign/cardsign/backends"
)

func TestParseURI(t *testing.T) {
	const v = "projects/my-proj/locations/global/keyRings/ring_1/cryptoKeys/signing-key/cryptoKeyVersions/12"
	tests := []struct {
		uri, want string
	}{
		{"gcpkms://" + v, v},
		{"GCPKMS://" + v, v},
		{"gcpkms://projects/example.com:proj/locations/us-east1/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1", "projects/example.com:proj/locations/us-east1/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1"},
		{"gcpkms:" + v, ""},
		{"gcpkms:///" + v, ""},
		{"gcpkms://" + v + "/", ""},
		{"gcpkms://" + v + "?x=1", ""},
		{"gcpkms://" + v + "#f", ""},
		{"gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k", ""},
		{"gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/01", ""},
		{"gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/x", ""},
		{"gcpkms://projects/p/locations/l/keyRings/r%2F/cryptoKeys/k/cryptoKeyVersions/1", ""},
		{"gcpkms://projects//locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1", ""},
		{"gcpkms://user@projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1", ""},
		{"awskms:///alias/x", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, err := parseURI(tt.uri)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("parseURI(%q) = %q, %v; want %q", tt.uri, got, err, tt.want)
		}
		if err != nil && !errors.As(err, new(*backends.URIError)) {
			t.Errorf("parseURI(%q): %T, want *backends.URIError", tt.uri, err)
		}
		if err == nil && versionURI(got) != "gcpkms://"+got {
			t.Errorf("versionURI(%q) = %q", got, versionURI(got))
		}
	}
}

func TestCryptoKeyOf(t *testing.T) {
	const k = "projects/p/locations/l/keyRings/r/cryptoKeys/k"
	if got := cryptoKeyOf(k + "/cryptoKeyVersions/3"); got != k {
		t.Errorf("cryptoKeyOf = %q", got)
	}
}
