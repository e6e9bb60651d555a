package aicatalog

import (
	"crypto"
	"fmt"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// VerificationKey is a public key a DID document lists for assertions.
type VerificationKey struct {
	Fragment string
	Public   crypto.PublicKey
}

// DIDDocument renders the DID document of did:web:domain listing keys
// (P-256 only) as JsonWebKey2020 verification methods with their public
// JWK (kty, crv, x, y, alg ES256, use sig: never a private member), each
// referenced by absolute id from assertionMethod. The same keys give the
// same bytes (RFC 8785), so every replica serves one ETag.
func DIDDocument(domain string, keys []VerificationKey) ([]byte, error) {
	if err := CheckDomain(domain); err != nil {
		return nil, fmt.Errorf("aicatalog: did document: domain %q: %w", domain, err)
	}
	did := DID(domain)
	str := strictjson.StringValue
	methods := strictjson.ArrayValue()
	assertion := strictjson.ArrayValue()
	for _, k := range keys {
		if err := CheckFragment(k.Fragment); err != nil {
			return nil, fmt.Errorf("aicatalog: did document: key %q: %w", k.Fragment, err)
		}
		jwk, err := jose.NewJWK(k.Public, "-", jose.ES256)
		if err != nil {
			return nil, fmt.Errorf("aicatalog: did document: key %q: did-web-v1 takes P-256 keys only: %w", k.Fragment, err)
		}
		id := KID(did, k.Fragment)
		methods.Arr = append(methods.Arr, strictjson.ObjectValue(
			strictjson.Member{Key: "id", Val: str(id)},
			strictjson.Member{Key: "type", Val: str("JsonWebKey2020")},
			strictjson.Member{Key: "controller", Val: str(did)},
			strictjson.Member{Key: "publicKeyJwk", Val: strictjson.ObjectValue(
				strictjson.Member{Key: "kty", Val: str(jwk.Kty)},
				strictjson.Member{Key: "crv", Val: str(jwk.Crv)},
				strictjson.Member{Key: "x", Val: str(jwk.X)},
				strictjson.Member{Key: "y", Val: str(jwk.Y)},
				strictjson.Member{Key: "alg", Val: str(jwk.Alg)},
				strictjson.Member{Key: "use", Val: str(jwk.Use)},
			)},
		))
		assertion.Arr = append(assertion.Arr, str(id))
	}
	doc := strictjson.ObjectValue(
		strictjson.Member{Key: "@context", Val: strictjson.ArrayValue(str("https://www.w3.org/ns/did/v1"), str("https://w3id.org/security/suites/jws-2020/v1"))},
		strictjson.Member{Key: "id", Val: str(did)},
		strictjson.Member{Key: "verificationMethod", Val: methods},
		strictjson.Member{Key: "assertionMethod", Val: assertion},
	)
	return doc.JCS()
}
