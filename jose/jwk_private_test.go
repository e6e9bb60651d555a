package jose

import (
	"crypto"
	"encoding/json"
	"strings"
	"testing"
)

func TestPrivateJWKRoundTrip(t *testing.T) {
	for _, alg := range Algs() {
		t.Run(string(alg), func(t *testing.T) {
			key := keyFor(t, alg)
			b, err := MarshalPrivateJWK(key, "my-kid", alg)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), `"d":`) {
				t.Fatalf("private JWK without d: %s", b)
			}
			signer, pub, err := ParsePrivateJWK(b)
			if err != nil {
				t.Fatalf("ParsePrivateJWK: %v", err)
			}
			if pub.Kid != "my-kid" || pub.Alg != string(alg) || pub.Use != "sig" {
				t.Errorf("kid/alg/use = %q/%q/%q", pub.Kid, pub.Alg, pub.Use)
			}
			if !signer.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()) {
				t.Error("parsed signer has another public key")
			}
			want, _ := NewJWK(key.Public(), "my-kid", alg)
			if pub != want {
				t.Errorf("public JWK = %+v, want %+v", pub, want)
			}
			// The public JWK never carries the private members.
			pb, _ := pub.MarshalJSON()
			for _, p := range privateNames {
				if strings.Contains(string(pb), p+":") {
					t.Errorf("public JWK has %s: %s", p, pb)
				}
			}
			if _, err := Sign(t.Context(), signer, alg, input); err != nil {
				t.Errorf("Sign with parsed key: %v", err)
			}
			// Without kid and alg, both come back empty: the caller decides.
			b, _ = MarshalPrivateJWK(key, "", "")
			if _, pub, err = ParsePrivateJWK(b); err != nil || pub.Kid != "" || pub.Alg != "" {
				t.Errorf("no kid/alg: got %q/%q, %v", pub.Kid, pub.Alg, err)
			}
		})
	}
}

func TestParsePrivateJWKErrors(t *testing.T) {
	ecB, _ := MarshalPrivateJWK(keyFor(t, ES256), "", "")
	otherEC, _ := MarshalPrivateJWK(keyFor(t, ES256), "", "")
	edB, _ := MarshalPrivateJWK(keyFor(t, EdDSA), "", "")
	otherEd, _ := MarshalPrivateJWK(keyFor(t, EdDSA), "", "")
	rsaB, _ := MarshalPrivateJWK(rsa2048(), "", "")
	ec, ed, rs := members(ecB), members(edB), members(rsaB)
	secret := []string{ec["d"].(string), ed["d"].(string), rs["d"].(string), rs["p"].(string)}
	with := func(base map[string]any, mod func(map[string]any)) string {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		mod(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	tests := []struct {
		name   string
		in     string
		errHas string
	}{
		{"public only", with(ec, func(m map[string]any) { delete(m, "d") }), "public"},
		{"EC d of another key", with(ec, func(m map[string]any) { m["d"] = members(otherEC)["d"] }), `"d"`},
		{"EC d short", with(ec, func(m map[string]any) { m["d"] = ec["d"].(string)[2:] }), `"d"`},
		{"EC d zero", with(ec, func(m map[string]any) { m["d"] = b64(make([]byte, 32)) }), `"d"`},
		{"EC d not string", with(ec, func(m map[string]any) { m["d"] = 5 }), `"d"`},
		{"EC alg mismatch", with(ec, func(m map[string]any) { m["alg"] = "ES512" }), `"alg"`},
		{"Ed25519 d of another key", with(ed, func(m map[string]any) { m["d"] = members(otherEd)["d"] }), `"d"`},
		{"RSA no primes", with(rs, func(m map[string]any) {
			for _, k := range []string{"p", "q", "dp", "dq", "qi"} {
				delete(m, k)
			}
		}), `"p"`},
		{"RSA wrong d", with(rs, func(m map[string]any) { m["d"] = rs["p"] }), "RSA"},
		{"RSA swapped-in p", with(rs, func(m map[string]any) { m["p"] = rs["q"] }), "RSA"},
		{"RSA partial CRT", with(rs, func(m map[string]any) { delete(m, "qi") }), `"qi"`},
		{"RSA wrong dp", with(rs, func(m map[string]any) { m["dp"] = rs["dq"] }), `"dp"`},
		{"RSA multi-prime", with(rs, func(m map[string]any) { m["oth"] = []any{} }), `"oth"`},
		{"oct", `{"kty":"oct","k":"AAAA"}`, `"kty"`},
		{"not JSON", `-----BEGIN PRIVATE KEY-----`, "JSON"},
	}
	for _, tt := range tests {
		_, _, err := ParsePrivateJWK([]byte(tt.in))
		if err == nil {
			t.Errorf("%s: ParsePrivateJWK = nil error", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: error %q does not mention %s", tt.name, err, tt.errHas)
		}
		for _, s := range secret {
			if strings.Contains(err.Error(), s) || strings.Contains(err.Error(), s[:8]) {
				t.Errorf("%s: error leaks private key material: %q", tt.name, err)
			}
		}
	}
}

func members(b []byte) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	return m
}

func TestMarshalPrivateJWKErrors(t *testing.T) {
	tests := []struct {
		name string
		key  crypto.Signer
		alg  Alg
	}{
		{"nil", nil, ""},
		{"alg mismatch", keyFor(t, ES256), RS256},
		{"opaque signer", wrongPublic{keyFor(t, ES256), keyFor(t, ES256).Public()}, ""},
		{"small RSA", rsa1024(), ""},
	}
	for _, tt := range tests {
		if _, err := MarshalPrivateJWK(tt.key, "", tt.alg); err == nil {
			t.Errorf("%s: MarshalPrivateJWK = nil error", tt.name)
		}
	}
}
