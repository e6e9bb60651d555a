package jose_test

import (
	"crypto"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	gojose "github.com/go-jose/go-jose/v4"

	"github.com/cardsign/cardsign/jose"
)

// Interop is a test, not a hope (DESIGN §4): what Sign makes must verify with
// go-jose's detached-payload JWS verification, what go-jose makes must verify
// with Verify, and JWKs and thumbprints must agree with go-jose's.

func interopKey(t *testing.T, alg jose.Alg) crypto.Signer {
	t.Helper()
	k, err := jose.GenerateKey(alg, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestInteropGoJOSEDetached(t *testing.T) {
	b64 := base64.RawURLEncoding.EncodeToString
	payload := []byte(`{"capabilities":{},"name":"Example Agent","skills":[]}`)
	for _, alg := range jose.Algs() {
		t.Run(string(alg), func(t *testing.T) {
			key := interopKey(t, alg)
			kid, err := jose.Thumbprint(key.Public())
			if err != nil {
				t.Fatal(err)
			}
			protected := b64([]byte(`{"alg":"` + string(alg) + `","kid":"` + kid + `","typ":"JOSE"}`))
			signingInput := []byte(protected + "." + b64(payload))

			for i := 0; i < 5; i++ { // several signatures: ES* widths vary with r and s
				sig, err := jose.Sign(t.Context(), key, alg, signingInput)
				if err != nil {
					t.Fatal(err)
				}
				compact := protected + ".." + b64(sig)
				obj, err := gojose.ParseDetached(compact, payload, []gojose.SignatureAlgorithm{gojose.SignatureAlgorithm(alg)})
				if err != nil {
					t.Fatalf("go-jose ParseDetached: %v", err)
				}
				if err := obj.DetachedVerify(payload, key.Public()); err != nil {
					t.Fatalf("go-jose DetachedVerify: %v", err)
				}
				if got := obj.Signatures[0].Header.KeyID; got != kid {
					t.Errorf("go-jose kid = %q, want %q", got, kid)
				}
			}

			// The other way: go-jose signs, Verify checks.
			gs, err := gojose.NewSigner(gojose.SigningKey{Algorithm: gojose.SignatureAlgorithm(alg), Key: key}, nil)
			if err != nil {
				t.Fatal(err)
			}
			jws, err := gs.Sign(payload)
			if err != nil {
				t.Fatal(err)
			}
			compact, err := jws.CompactSerialize()
			if err != nil {
				t.Fatal(err)
			}
			parts := strings.Split(compact, ".")
			gsig, err := base64.RawURLEncoding.DecodeString(parts[2])
			if err != nil {
				t.Fatal(err)
			}
			if err := jose.Verify(alg, key.Public(), []byte(parts[0]+"."+parts[1]), gsig); err != nil {
				t.Errorf("Verify of go-jose signature: %v", err)
			}
		})
	}
}

func TestInteropGoJOSEJWK(t *testing.T) {
	for _, alg := range jose.Algs() {
		t.Run(string(alg), func(t *testing.T) {
			key := interopKey(t, alg)
			j, err := jose.NewJWK(key.Public(), "", alg)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			var gj gojose.JSONWebKey
			if err := gj.UnmarshalJSON(b); err != nil {
				t.Fatalf("go-jose cannot read our JWK %s: %v", b, err)
			}
			if !gj.IsPublic() || !gj.Valid() {
				t.Errorf("go-jose: public=%v valid=%v", gj.IsPublic(), gj.Valid())
			}
			tp, err := gj.Thumbprint(crypto.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			if got := base64.RawURLEncoding.EncodeToString(tp); got != j.Kid {
				t.Errorf("go-jose thumbprint %s, ours %s", got, j.Kid)
			}
			// go-jose's private JWK of the key parses with ParsePrivateJWK.
			priv, err := gojose.JSONWebKey{Key: key, KeyID: "k1", Algorithm: string(alg)}.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			s, pj, err := jose.ParsePrivateJWK(priv)
			if err != nil {
				t.Fatalf("ParsePrivateJWK(go-jose output): %v", err)
			}
			if pj.Kid != "k1" || pj.Alg != string(alg) || !s.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()) {
				t.Errorf("ParsePrivateJWK(go-jose output) = %+v", pj)
			}
			// And ours parses with go-jose.
			mine, err := jose.MarshalPrivateJWK(key, "k2", alg)
			if err != nil {
				t.Fatal(err)
			}
			var gp gojose.JSONWebKey
			if err := gp.UnmarshalJSON(mine); err != nil || gp.IsPublic() || !gp.Valid() {
				t.Errorf("go-jose reading our private JWK: %v (public=%v valid=%v)", err, gp.IsPublic(), gp.Valid())
			}
		})
	}
}
