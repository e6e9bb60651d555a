package jwks

import "testing"

func TestRevocationsURLBeside(t *testing.T) {
	for in, want := range map[string]string{
		"https://keys.example.com:8443/.well-known/jwks.json": "https://keys.example.com:8443" + RevocationsPath,
		"http://127.0.0.1:7701/jwks":                          "http://127.0.0.1:7701" + RevocationsPath,
		"jwks.json":                                           "",
		"file:///etc/jwks.json":                               "",
	} {
		got, ok := RevocationsURLBeside(in)
		if got != want || ok != (want != "") {
			t.Errorf("RevocationsURLBeside(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestRevokedKeyLookup(t *testing.T) {
	look := RevokedKeyLookup([]Revocation{{KID: "k1", Reason: "key-compromise"}})
	if why, ok := look("k1"); !ok || why == "" {
		t.Fatalf("k1: %q, %v", why, ok)
	}
	if _, ok := look("k2"); ok {
		t.Fatal("k2 is not revoked")
	}
}
