package jwks

import (
	"crypto"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

func testKeys(t *testing.T) (ec, ed, rs crypto.Signer) {
	t.Helper()
	return testsupport.Key(t, jose.ES256), testsupport.Key(t, jose.EdDSA), testsupport.Key(t, jose.RS256)
}

func mustJWK(t *testing.T, k crypto.Signer, kid string, alg jose.Alg) jose.JWK {
	t.Helper()
	j, err := jose.NewJWK(k.Public(), kid, alg)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestSetMarshalParse(t *testing.T) {
	ec, ed, rs := testKeys(t)
	set := Set{Keys: []jose.JWK{
		mustJWK(t, rs, "", jose.PS256), // order is kept, not sorted
		mustJWK(t, ec, "", jose.ES256),
		mustJWK(t, ed, "ed-1", jose.EdDSA),
	}}
	b, err := set.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"keys":[{"alg":"PS256","e":"AQAB","kid":"`) || !strings.HasSuffix(string(b), `}]}`) {
		t.Errorf("unexpected shape: %s", b)
	}
	again, _ := set.MarshalJSON()
	if string(again) != string(b) {
		t.Error("MarshalJSON not deterministic")
	}
	if viaJSON, err := json.Marshal(set); err != nil || string(viaJSON) != string(b) {
		t.Errorf("json.Marshal = %s, %v", viaJSON, err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(back.Keys) != 3 {
		t.Fatalf("got %d keys", len(back.Keys))
	}
	for i := range set.Keys {
		if back.Keys[i] != set.Keys[i] {
			t.Errorf("keys[%d] = %+v, want %+v", i, back.Keys[i], set.Keys[i])
		}
	}
	if k, ok := back.Lookup("ed-1"); !ok || k.Crv != "Ed25519" {
		t.Errorf("Lookup(ed-1) = %+v, %v", k, ok)
	}
	if _, ok := back.Lookup("nope"); ok {
		t.Error("Lookup(nope) found a key")
	}
	if b, _ := (Set{}).MarshalJSON(); string(b) != `{"keys":[]}` {
		t.Errorf("empty set = %s", b)
	}
}

func TestLookupEmptyKid(t *testing.T) {
	ec, _, _ := testKeys(t)
	j := mustJWK(t, ec, "", "")
	j.Kid = ""
	set := Set{Keys: []jose.JWK{j}}
	if _, ok := set.Lookup(""); ok {
		t.Error(`Lookup("") matched a key without kid`)
	}
}

func TestMarshalDuplicateKid(t *testing.T) {
	ec, ed, _ := testKeys(t)
	set := Set{Keys: []jose.JWK{mustJWK(t, ec, "same", ""), mustJWK(t, ed, "same", "")}}
	if _, err := set.MarshalJSON(); err == nil || !strings.Contains(err.Error(), "same") {
		t.Errorf("MarshalJSON with duplicate kid = %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	ec, ed, rs := testKeys(t)
	ecJ, _ := json.Marshal(mustJWK(t, ec, "a", jose.ES256))
	edJ, _ := json.Marshal(mustJWK(t, ed, "b", ""))
	ecPriv, _ := jose.MarshalPrivateJWK(ec, "a", jose.ES256)
	rsPriv, _ := jose.MarshalPrivateJWK(rs, "r", "")
	edPub, _ := json.Marshal(mustJWK(t, ed, "a", "")) // kid clashes with ecJ
	set := func(keys ...[]byte) string {
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = string(k)
		}
		return `{"keys":[` + strings.Join(parts, ",") + `]}`
	}
	tests := []struct {
		name    string
		in      string
		errHas  string
		wantErr bool
		n       int
	}{
		{"two keys", set(ecJ, edJ), "", false, 2},
		{"empty keys", `{"keys":[]}`, "", false, 0},
		{"other members ignored", `{"keys":[],"x-meta":{"a":1}}`, "", false, 0},
		{"private EC key", set(edJ, ecPriv), "must not carry private keys", true, 0},
		{"private RSA key names members", set(rsPriv), "d, dp, dq, p, q, qi", true, 0},
		{"symmetric key", `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`, "private", true, 0},
		{"duplicate kid", set(ecJ, edPub), "same kid", true, 0},
		{"bad key", `{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}`, "keys[0]", true, 0},
		{"keys not array", `{"keys":{}}`, `"keys"`, true, 0},
		{"keys null", `{"keys":null}`, `"keys"`, true, 0},
		{"no keys", `{"x":[]}`, `"keys"`, true, 0},
		{"duplicate keys member", `{"keys":[],"keys":[]}`, "duplicate", true, 0},
		{"top-level array", `[]`, "object", true, 0},
		{"trailing", `{"keys":[]} x`, "trailing", true, 0},
		{"not JSON", `keys`, "JSON", true, 0},
		{"key not object", `{"keys":[1]}`, "keys[0]", true, 0},
		{"too big", `{"keys":[],"pad":"` + strings.Repeat("a", MaxSize) + `"}`, "limit", true, 0},
	}
	for _, tt := range tests {
		got, err := Parse([]byte(tt.in))
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: Parse err = %v, wantErr %v", tt.name, err, tt.wantErr)
			continue
		}
		if err != nil {
			if !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("%s: error %q does not mention %q", tt.name, err, tt.errHas)
			}
			// Private key values never reach an error message.
			for _, priv := range [][]byte{ecPriv, rsPriv} {
				var m map[string]string
				json.Unmarshal(priv, &m)
				if strings.Contains(err.Error(), m["d"]) {
					t.Errorf("%s: error leaks d", tt.name)
				}
			}
			continue
		}
		if len(got.Keys) != tt.n {
			t.Errorf("%s: %d keys, want %d", tt.name, len(got.Keys), tt.n)
		}
	}
}
