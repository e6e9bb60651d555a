package jwks

import (
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
)

// keyRecords returns the rotation timeline with real keys of three types,
// plus a revoked and a scheduled key, whose JWKs must never be published.
func keyRecords(t *testing.T) ([]KeyRecord, map[string]crypto.Signer) {
	t.Helper()
	ec, ed, rs := testKeys(t)
	signers := map[string]crypto.Signer{"old": rs, "new": ec, "gone": ed, "later": ec}
	algs := map[string]jose.Alg{"old": jose.PS256, "new": jose.ES256, "gone": jose.EdDSA, "later": jose.ES256}
	recs := append(rotation(),
		rec("gone", 0, activate(rotT-hour), revoke(rotT-2*hour)),
		rec("later", rotT+5*hour))
	for i := range recs {
		r := &recs[i]
		r.Alg = algs[r.KID]
		r.Public = mustJWK(t, signers[r.KID], r.KID, r.Alg)
		r.URI = "file:/keys/" + r.KID + ".pem?secret=x"
	}
	return recs, signers
}

func TestRenderPublicOnly(t *testing.T) {
	recs, signers := keyRecords(t)
	// Even records built from private JWKs, with every private member
	// present in the source, must render public members only.
	for i := range recs {
		priv, err := jose.MarshalPrivateJWK(signers[recs[i].KID], recs[i].KID, recs[i].Alg)
		if err != nil {
			t.Fatal(err)
		}
		if recs[i].Public, err = jose.ParseJWK(priv); err != nil {
			t.Fatal(err)
		}
	}
	for _, now := range []time.Duration{0, rotT - hour, rotT, rotT + 6*hour, rotT + grace} {
		doc, err := Render(at(now), recs, testPolicy, time.Hour)
		if err != nil {
			t.Fatalf("now %v: Render: %v", now, err)
		}
		var parsed struct{ Keys []map[string]any }
		if err := json.Unmarshal(doc.Body, &parsed); err != nil {
			t.Fatalf("now %v: body is not JSON: %v", now, err)
		}
		allowed := map[string]bool{"kty": true, "crv": true, "x": true, "y": true, "n": true, "e": true, "kid": true, "alg": true, "use": true}
		for _, k := range parsed.Keys {
			for m := range k {
				if !allowed[m] {
					t.Errorf("now %v: key %v has member %q", now, k["kid"], m)
				}
			}
		}
		for _, priv := range []string{"d", "p", "q", "dp", "dq", "qi", "k"} {
			if strings.Contains(string(doc.Body), `"`+priv+`":`) {
				t.Errorf("now %v: body has private member %q", now, priv)
			}
		}
		if strings.Contains(string(doc.Body), "secret") || strings.Contains(string(doc.Body), "file:") {
			t.Errorf("now %v: body shows a key URI: %s", now, doc.Body)
		}
		if _, err := Parse(doc.Body); err != nil { // Parse refuses private members too
			t.Errorf("now %v: rendered JWKS does not parse: %v", now, err)
		}
	}
}

func TestRenderKeys(t *testing.T) {
	recs, _ := keyRecords(t)
	tests := []struct {
		now  time.Duration
		kids string
	}{
		{0, "gone,old"},          // gone is pending until it is revoked
		{rotT - hour, "new,old"}, // sorted by kid, not by record order
		{rotT + 5*hour, "later,new,old"},
		{rotT + grace, "later,new"},
	}
	for _, tt := range tests {
		doc, err := Render(at(tt.now), recs, testPolicy, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		set, err := Parse(doc.Body)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, k := range set.Keys {
			got = append(got, k.Kid)
			if want := recByKID(recs, k.Kid).Public; k != want {
				t.Errorf("now %v: key %s = %+v, want %+v", tt.now, k.Kid, k, want)
			}
		}
		if strings.Join(got, ",") != tt.kids {
			t.Errorf("now %v: kids %v, want %s", tt.now, got, tt.kids)
		}
	}
}

func TestRenderStable(t *testing.T) {
	recs, _ := keyRecords(t)
	now := at(rotT + hour)
	want, err := Render(now, recs, testPolicy, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(want.Body)
	if wantTag := `"` + base64.RawURLEncoding.EncodeToString(sum[:]) + `"`; want.ETag != wantTag {
		t.Errorf("ETag = %s, want %s", want.ETag, wantTag)
	}
	for _, perm := range permutations(recs) {
		got, err := Render(now, perm, testPolicy, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Body) != string(want.Body) || got.ETag != want.ETag || got.MaxAge != want.MaxAge {
			t.Errorf("order %s: document differs", kids(Derive(now, perm, testPolicy)))
		}
	}
	// A different key set has a different tag.
	other, err := Render(at(rotT+grace), recs, testPolicy, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if other.ETag == want.ETag {
		t.Error("two key sets share an ETag")
	}
}

func TestRenderMaxAge(t *testing.T) {
	recs, _ := keyRecords(t)
	tests := []struct {
		name   string
		now    time.Duration
		maxAge time.Duration
		want   time.Duration
	}{
		{"capped by the publication of new", rotT - hour - 10*time.Minute, time.Hour, 10 * time.Minute},
		{"configured max-age is shorter", rotT - hour - 10*time.Minute, 5 * time.Minute, 5 * time.Minute},
		{"capped by the activation of new", rotT - time.Second, time.Hour, time.Second},
		{"capped by the publication of later", rotT + 4*hour + 30*time.Minute, time.Hour, 30 * time.Minute},
		{"capped by old's expiry", rotT + grace - time.Minute, time.Hour, time.Minute},
		{"nothing scheduled", rotT + grace, time.Hour, time.Hour},
		{"negative max-age", rotT + grace, -time.Hour, 0},
	}
	for _, tt := range tests {
		doc, err := Render(at(tt.now), recs, testPolicy, tt.maxAge)
		if err != nil {
			t.Fatal(err)
		}
		if doc.MaxAge != tt.want {
			t.Errorf("%s: MaxAge = %v, want %v", tt.name, doc.MaxAge, tt.want)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	ec, ed, _ := testKeys(t)
	good := func(kid string) KeyRecord {
		r := rec(kid, 0, activate(0))
		r.Alg, r.Public = jose.ES256, mustJWK(t, ec, kid, jose.ES256)
		return r
	}
	bare := good("bare")
	bare.Public.Kid, bare.Public.Alg, bare.Public.Use = "", "", ""
	tests := []struct {
		name   string
		mutate func(*KeyRecord)
		errHas string
	}{
		{"fills kid, alg and use", func(r *KeyRecord) { *r = bare }, ""},
		{"kid mismatch", func(r *KeyRecord) { r.Public.Kid = "other" }, `has kid "other"`},
		{"alg mismatch", func(r *KeyRecord) { r.Alg = jose.ES384 }, "has alg"},
		{"alg does not fit the key", func(r *KeyRecord) { r.Public.Alg, r.Alg = "EdDSA", jose.EdDSA }, "EdDSA"},
		{"not a key", func(r *KeyRecord) { r.Public = jose.JWK{} }, "kty"},
		{"wrong key material", func(r *KeyRecord) { r.Public.X = mustJWK(t, ed, "", "").X }, "not a point"},
		{"no kid", func(r *KeyRecord) { r.KID, r.Public.Kid = "", "" }, "without kid"},
		{"duplicate kid", func(r *KeyRecord) { r.KID, r.Public.Kid = "a", "a" }, "same kid"},
	}
	for _, tt := range tests {
		r := good("k")
		tt.mutate(&r)
		doc, err := Render(at(hour), []KeyRecord{good("a"), r}, testPolicy, time.Hour)
		if tt.errHas == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
				continue
			}
			set, _ := Parse(doc.Body)
			if k, ok := set.Lookup("bare"); !ok || k.Alg != "ES256" || k.Use != "sig" {
				t.Errorf("%s: key = %+v", tt.name, k)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: Render err = %v, want it to mention %q", tt.name, err, tt.errHas)
		}
	}
}
