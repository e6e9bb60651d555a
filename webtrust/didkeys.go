package webtrust

import (
	"fmt"
	"strings"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/strictjson"
)

// didKeys reads the keys a DID document authorizes for assertions, as a
// key set a card verifier can use: each assertionMethod P-256 key of did
// (controller did, no private member) under its fragment as kid, which is
// how cardsignd's did.json names the JWKS keys it signs cards with. The
// document is read as plain JSON (its @context is never fetched).
func didKeys(did string, data []byte, lim strictjson.Limits) (jwks.Set, error) {
	doc, err := strictjson.ParseAs(data, lim, "DID document", "a DID document object")
	if err != nil {
		return jwks.Set{}, err
	}
	id, ok, err := doc.GetString("id")
	if err != nil || !ok || id != did {
		return jwks.Set{}, fmt.Errorf("DID document id %s is not %s", strictjson.QuoteForMessage(id), did)
	}
	methods := map[string]strictjson.Value{}
	if vm, ok := doc.Get("verificationMethod"); ok {
		if vm.Kind != strictjson.Array {
			return jwks.Set{}, fmt.Errorf("DID document verificationMethod: want an array, not %s", vm.Kind)
		}
		for i, m := range vm.Arr {
			mid, ok, err := m.GetString("id")
			if err != nil || !ok {
				return jwks.Set{}, fmt.Errorf("DID document verificationMethod[%d].id: want a string", i)
			}
			methods[absolute(did, mid)] = m
		}
	}
	am, ok := doc.Get("assertionMethod")
	if !ok || am.Kind != strictjson.Array {
		return jwks.Set{}, fmt.Errorf("DID document of %s has no assertionMethod array: it authorizes no key", did)
	}
	var set jwks.Set
	seen := map[string]bool{}
	for i, ref := range am.Arr {
		path := fmt.Sprintf("assertionMethod[%d]", i)
		m := ref
		if ref.Kind == strictjson.String {
			var ok bool
			if m, ok = methods[absolute(did, ref.Str)]; !ok {
				return jwks.Set{}, fmt.Errorf("DID document %s: %s names no verification method", path, strictjson.QuoteForMessage(ref.Str))
			}
		}
		k, err := assertionKey(did, m)
		if err != nil {
			return jwks.Set{}, fmt.Errorf("DID document %s: %w", path, err)
		}
		if seen[k.Kid] {
			return jwks.Set{}, fmt.Errorf("DID document %s: key %s listed twice", path, strictjson.QuoteForMessage(k.Kid))
		}
		seen[k.Kid] = true
		set.Keys = append(set.Keys, k)
	}
	return set, nil
}

// absolute resolves a relative DID URL ("#frag") against did.
func absolute(did, id string) string {
	if strings.HasPrefix(id, "#") {
		return did + id
	}
	return id
}

// assertionKey reads one verification method: controlled by did, with a
// public P-256 JWK; its kid is the id's fragment.
func assertionKey(did string, m strictjson.Value) (jose.JWK, error) {
	if m.Kind != strictjson.Object {
		return jose.JWK{}, fmt.Errorf("want a verification method object or its id, not %s", m.Kind)
	}
	id, _, _ := m.GetString("id")
	frag, ok := strings.CutPrefix(absolute(did, id), did+"#")
	if !ok || frag == "" {
		return jose.JWK{}, fmt.Errorf("id %s is not %s#FRAGMENT", strictjson.QuoteForMessage(id), did)
	}
	if c, _, _ := m.GetString("controller"); c != did {
		return jose.JWK{}, fmt.Errorf("%s: controller %s is not %s", strictjson.QuoteForMessage(id), strictjson.QuoteForMessage(c), did)
	}
	jv, ok := m.Get("publicKeyJwk")
	if !ok || jv.Kind != strictjson.Object {
		return jose.JWK{}, fmt.Errorf("%s: no publicKeyJwk object", strictjson.QuoteForMessage(id))
	}
	raw := jv.Compact()
	priv, err := jose.PrivateMembers(raw)
	if err != nil {
		return jose.JWK{}, fmt.Errorf("%s: publicKeyJwk: %w", strictjson.QuoteForMessage(id), err)
	}
	if len(priv) > 0 {
		return jose.JWK{}, fmt.Errorf("%s: publicKeyJwk carries private members %v: refused", strictjson.QuoteForMessage(id), priv)
	}
	k, err := jose.ParseJWK(raw)
	if err != nil {
		return jose.JWK{}, fmt.Errorf("%s: publicKeyJwk: %w", strictjson.QuoteForMessage(id), err)
	}
	if k.Kty != "EC" || k.Crv != "P-256" {
		return jose.JWK{}, fmt.Errorf("%s: publicKeyJwk is %s %s, not an EC P-256 key", strictjson.QuoteForMessage(id), strictjson.QuoteForMessage(k.Kty), strictjson.QuoteForMessage(k.Crv))
	}
	k.Kid, k.Alg, k.Use = frag, string(jose.ES256), "sig"
	return k, nil
}
