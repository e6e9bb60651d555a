package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"strings"
	"testing"
)

// privateNames must never appear as members of a public JWK.
var privateNames = []string{`"d"`, `"p"`, `"q"`, `"dp"`, `"dq"`, `"qi"`, `"k"`, `"oth"`}

func TestNewJWKMarshal(t *testing.T) {
	for _, alg := range Algs() {
		t.Run(string(alg), func(t *testing.T) {
			key := keyFor(t, alg)
			j, err := NewJWK(key.Public(), "", alg)
			if err != nil {
				t.Fatal(err)
			}
			b, err := j.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range privateNames {
				if strings.Contains(string(b), p+":") {
					t.Errorf("public JWK contains private member %s: %s", p, b)
				}
			}
			// encoding/json goes through MarshalJSON too.
			viaJSON, err := json.Marshal(j)
			if err != nil || string(viaJSON) != string(b) {
				t.Errorf("json.Marshal = %s, %v; want %s", viaJSON, err, b)
			}
			// Deterministic: sorted members, no whitespace, same bytes every time.
			if strings.ContainsAny(string(b), " \n\t") {
				t.Errorf("whitespace in %s", b)
			}
			var order []string
			dec := json.NewDecoder(strings.NewReader(string(b)))
			dec.Token()
			for dec.More() {
				tok, _ := dec.Token()
				order = append(order, tok.(string))
				var v any
				dec.Decode(&v)
			}
			for i := 1; i < len(order); i++ {
				if order[i-1] >= order[i] {
					t.Errorf("members not sorted: %v", order)
				}
			}
			j2, _ := NewJWK(key.Public(), "", alg)
			b2, _ := j2.MarshalJSON()
			if string(b2) != string(b) {
				t.Errorf("not deterministic: %s vs %s", b, b2)
			}
			if j.Use != "sig" || j.Alg != string(alg) || j.Kid == "" {
				t.Errorf("use/alg/kid = %q/%q/%q", j.Use, j.Alg, j.Kid)
			}
			// Round trip through the parser gives the same key and members.
			back, err := ParseJWK(b)
			if err != nil {
				t.Fatalf("ParseJWK(%s): %v", b, err)
			}
			if back != j {
				t.Errorf("ParseJWK round trip = %+v, want %+v", back, j)
			}
			pub, err := back.PublicKey()
			if err != nil {
				t.Fatal(err)
			}
			if !pub.(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()) {
				t.Error("PublicKey differs from the original key")
			}
		})
	}
}

func TestNewJWKWidths(t *testing.T) {
	for _, alg := range []Alg{ES256, ES384, ES512} {
		for i := 0; i < 50; i++ { // enough keys that some coordinate has a leading zero byte
			j, err := NewJWK(keyFor(t, alg).Public(), "kid", alg)
			if err != nil {
				t.Fatal(err)
			}
			x, _ := DecodeBase64URL(j.X)
			y, _ := DecodeBase64URL(j.Y)
			if len(x) != alg.ecSize() || len(y) != alg.ecSize() {
				t.Fatalf("%s: x %d, y %d bytes, want %d", alg, len(x), len(y), alg.ecSize())
			}
		}
	}
	j, err := NewJWK(rsa2048().Public(), "kid", "")
	if err != nil {
		t.Fatal(err)
	}
	if j.E != "AQAB" || j.Alg != "" || j.Kid != "kid" {
		t.Errorf("RSA JWK e=%q alg=%q kid=%q", j.E, j.Alg, j.Kid)
	}
	if n, _ := DecodeBase64URL(j.N); n[0] == 0 || len(n) != 256 {
		t.Errorf("RSA n not minimal 256 bytes: %d", len(n))
	}
}

func TestNewJWKErrors(t *testing.T) {
	tests := []struct {
		name string
		pub  crypto.PublicKey
		alg  Alg
	}{
		{"alg mismatch", keyFor(t, ES256).Public(), ES384},
		{"unsupported alg", keyFor(t, ES256).Public(), "HS256"},
		{"private key", keyFor(t, ES256), ""},
		{"RSA 1024", rsa1024().Public(), ""},
		{"nil", nil, ""},
	}
	for _, tt := range tests {
		if _, err := NewJWK(tt.pub, "", tt.alg); err == nil {
			t.Errorf("%s: NewJWK = nil error", tt.name)
		}
	}
}

func TestMarshalEscaping(t *testing.T) {
	j := JWK{Kty: "OKP", Kid: "a<b>&\"\\\n\u2028é\x01"}
	b, err := j.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kid":"a<b>&\"\\\n` + "\u2028é" + `\u0001","kty":"OKP"}`
	if string(b) != want {
		t.Errorf("MarshalJSON = %s, want %s", b, want)
	}
	if _, err := (JWK{Kid: "\xff"}).MarshalJSON(); err == nil {
		t.Error("invalid UTF-8 kid marshalled")
	}
}

func TestParseJWKErrors(t *testing.T) {
	p256, _ := NewJWK(keyFor(t, ES256).Public(), "k", ES256)
	rsaJ, _ := NewJWK(rsa2048().Public(), "k", RS256)
	edJ, _ := NewJWK(keyFor(t, EdDSA).Public(), "k", EdDSA)
	ec := func(mod func(m map[string]any)) string { return obj(p256, mod) }
	tests := []struct {
		name    string
		in      string
		errHas  string // the error must mention this
		wantErr bool
	}{
		{"valid EC", ec(nil), "", false},
		{"valid RSA", obj(rsaJ, nil), "", false},
		{"valid Ed25519", obj(edJ, nil), "", false},
		{"unknown members ignored", ec(func(m map[string]any) { m["x5c"] = []string{"a"}; m["key_ops"] = []string{"verify"} }), "", false},
		{"private members tolerated", ec(func(m map[string]any) { m["d"] = "AAAA" }), "", false},
		{"no kty", ec(func(m map[string]any) { delete(m, "kty") }), `"kty"`, true},
		{"oct", `{"kty":"oct","k":"AAAA"}`, `"kty"`, true},
		{"kty not string", ec(func(m map[string]any) { m["kty"] = 1 }), `"kty"`, true},
		{"bad crv", ec(func(m map[string]any) { m["crv"] = "P-224" }), `"crv"`, true},
		{"secp256k1", ec(func(m map[string]any) { m["crv"] = "secp256k1" }), `"crv"`, true},
		{"missing y", ec(func(m map[string]any) { delete(m, "y") }), `"y"`, true},
		{"short x", ec(func(m map[string]any) { m["x"] = p256.X[1:] }), `"x"`, true},
		{"padded x", ec(func(m map[string]any) { m["x"] = p256.X + "=" }), `"x"`, true},
		{"std alphabet x", ec(func(m map[string]any) { m["x"] = strings.NewReplacer("-", "+", "_", "/").Replace(p256.X) + "+/" }), `"x"`, true},
		{"point off curve", ec(func(m map[string]any) { m["y"] = p256.X }), "curve", true},
		{"alg mismatch", ec(func(m map[string]any) { m["alg"] = "ES384" }), `"alg"`, true},
		{"alg unsupported", ec(func(m map[string]any) { m["alg"] = "HS256" }), `"alg"`, true},
		{"alg empty string", ec(func(m map[string]any) { m["alg"] = "" }), `"alg"`, true},
		{"OKP X25519", obj(edJ, func(m map[string]any) { m["crv"] = "X25519" }), `"crv"`, true},
		{"OKP short x", obj(edJ, func(m map[string]any) { m["x"] = edJ.X[2:] }), `"x"`, true},
		{"RSA small", obj(rsaJ, func(m map[string]any) { m["n"] = rsaJ.N[:200] }), `"n"`, true},
		{"RSA leading zero n", obj(rsaJ, func(m map[string]any) { m["n"] = "AA" + rsaJ.N }), `"n"`, true},
		{"RSA e=1", obj(rsaJ, func(m map[string]any) { m["e"] = "AQ" }), `"e"`, true},
		{"RSA e even", obj(rsaJ, func(m map[string]any) { m["e"] = "AQAA" }), `"e"`, true},
		{"RSA e huge", obj(rsaJ, func(m map[string]any) { m["e"] = "AQAAAAE" }), `"e"`, true},
		{"RSA e leading zero", obj(rsaJ, func(m map[string]any) { m["e"] = "AAEAAQ" }), `"e"`, true},
		{"RSA missing e", obj(rsaJ, func(m map[string]any) { delete(m, "e") }), `"e"`, true},
		{"duplicate member", `{"kty":"EC","kty":"RSA"}`, "duplicate", true},
		{"trailing data", ec(nil) + "{}", "trailing", true},
		{"array", `[]`, "object", true},
		{"invalid UTF-8", "{\"kty\":\"\xff\"}", "UTF-8", true},
		{"empty", ``, "JSON", true},
	}
	for _, tt := range tests {
		_, err := ParseJWK([]byte(tt.in))
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: ParseJWK err = %v, wantErr %v", tt.name, err, tt.wantErr)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: error %q does not mention %s", tt.name, err, tt.errHas)
		}
	}
}

// obj renders k as a JSON object after mod has changed its members.
func obj(k JWK, mod func(map[string]any)) string {
	b, _ := k.MarshalJSON()
	var m map[string]any
	json.Unmarshal(b, &m)
	if mod != nil {
		mod(m)
	}
	out, _ := json.Marshal(m)
	return string(out)
}

func TestPrivateMembers(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{`{"kty":"EC","x":"a"}`, ""},
		{`{"kty":"EC","d":"a"}`, "d"},
		{`{"kty":"RSA","qi":"a","d":"a","p":"a","q":"a","dp":"a","dq":"a"}`, "d,dp,dq,p,q,qi"},
		{`{"kty":"oct","k":"a"}`, "k"},
		{`{"kty":"RSA","oth":[]}`, "oth"},
	}
	for _, tt := range tests {
		got, err := PrivateMembers([]byte(tt.in))
		if err != nil || strings.Join(got, ",") != tt.want {
			t.Errorf("PrivateMembers(%s) = %v, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	if _, err := PrivateMembers([]byte(`{"d":1,"d":2}`)); err == nil {
		t.Error("PrivateMembers accepted duplicate members")
	}
}

// Keys of every supported type survive PublicKey with their concrete type.
func TestPublicKeyTypes(t *testing.T) {
	for _, alg := range Algs() {
		j, _ := NewJWK(keyFor(t, alg).Public(), "", "")
		pub, err := j.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		switch pub.(type) {
		case *ecdsa.PublicKey, ed25519.PublicKey, *rsa.PublicKey:
		default:
			t.Errorf("%s: PublicKey type %T", alg, pub)
		}
	}
}
