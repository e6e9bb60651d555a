package webtrust

import (
	"fmt"
	"sort"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/strictjson"
)

// didKeys reads the keys a DID document authorizes for assertions, as a
// key set a card verifier can use: each assertionMethod P-256 key of did
// that the did:web Signer Profile accepts (aicatalog's rules: controller
// did, no private member, alg and use fit), under its fragment as kid,
// which is how cardsignd's did.json names the JWKS keys it signs cards
// with. The document is read as plain JSON (its @context is never
// fetched).
func didKeys(did string, data []byte, lim strictjson.Limits) (jwks.Set, error) {
	doc, err := aicatalog.ParseDIDDocument(data, lim)
	if err != nil {
		return jwks.Set{}, err
	}
	if doc.ID != did {
		return jwks.Set{}, fmt.Errorf("DID document id %s is not %s", strictjson.QuoteForMessage(doc.ID), did)
	}
	keys, err := doc.AssertionKeys()
	if err != nil {
		return jwks.Set{}, fmt.Errorf("the DID document of %s: %w", did, err)
	}
	if len(keys) == 0 {
		return jwks.Set{}, fmt.Errorf("the DID document of %s authorizes no P-256 key for assertions (assertionMethod)", did)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Fragment < keys[j].Fragment })
	var set jwks.Set
	for _, key := range keys {
		k, err := jose.NewJWK(key.Public, key.Fragment, jose.ES256)
		if err != nil {
			return jwks.Set{}, fmt.Errorf("DID document of %s: key %s: %w", did, strictjson.QuoteForMessage(key.Fragment), err)
		}
		set.Keys = append(set.Keys, k)
	}
	return set, nil
}
