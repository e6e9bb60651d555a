package jose

import (
	"crypto/rsa"
	"math/big"
	"testing"
)

// rfc7638N and rfc7638E are the RSA key of RFC 7638 §3.1.
const (
	rfc7638N = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
	rfc7638E = "AQAB"
	rfc7638T = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
)

func TestThumbprintRFC7638(t *testing.T) {
	// Through the JWK parser, as a verifier would reach the key...
	k, err := ParseJWK([]byte(`{"kty":"RSA","n":"` + rfc7638N + `","e":"` + rfc7638E + `","alg":"RS256","kid":"2011-04-29"}`))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := k.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Thumbprint(pub)
	if err != nil {
		t.Fatal(err)
	}
	if got != rfc7638T {
		t.Errorf("Thumbprint = %s, want %s", got, rfc7638T)
	}
	// ...and from a key built by hand, as a backend would hand it over.
	n, _ := DecodeBase64URL(rfc7638N)
	got, err = Thumbprint(&rsa.PublicKey{N: new(big.Int).SetBytes(n), E: 65537})
	if err != nil || got != rfc7638T {
		t.Errorf("Thumbprint = %s, %v; want %s", got, err, rfc7638T)
	}
	// NewJWK with no kid uses the thumbprint.
	j, err := NewJWK(pub, "", RS256)
	if err != nil || j.Kid != rfc7638T {
		t.Errorf("NewJWK kid = %q, %v; want %s", j.Kid, err, rfc7638T)
	}
}

func TestThumbprintRejects(t *testing.T) {
	for _, pub := range []any{nil, "key", rsa1024().Public(), keyFor(t, ES256)} {
		if _, err := Thumbprint(pub); err == nil {
			t.Errorf("Thumbprint(%T) = nil error", pub)
		}
	}
}
