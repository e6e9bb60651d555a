package testsupport

import (
	"encoding/base64"
	"encoding/json"
	"testing"
)

// JWSPayload returns the payload of doc, a JWS in the flattened JSON
// serialization, as text, unverified: for tests that check what a signed
// document says.
func JWSPayload(t testing.TB, doc []byte) string {
	t.Helper()
	var env struct{ Payload string }
	if err := json.Unmarshal(doc, &env); err != nil {
		t.Fatal(err)
	}
	p, err := base64.RawURLEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return string(p)
}
