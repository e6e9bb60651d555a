package server

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/jwks/jwksserve"
)

// DIDMediaType is the DID document's media type (DID Core's JSON-LD
// representation).
const DIDMediaType = "application/did+ld+json"

// The DID document of did:web:DOMAIN (/.well-known/did.json) lists the
// published P-256 keys, each as a verification method whose fragment is its
// JWKS kid, all in assertionMethod: the keys a Trust Manifest or catalog
// signature may be made with under did-web-v1. It is made from the same
// published key set as the JWKS, so it follows the same rules: a pending key
// is listed before it signs (verifiers resolve it in time), a revoked key
// leaves at once, a retired one stays while the JWKS keeps it. It is
// rendered, cached and served like the JWKS (ETag, 304, HEAD, open CORS, a
// max-age that never outlives the key set), from the last read while the
// store is unreachable.

// didDocument is the DID document as a keyDocument.
func (d *documents) didDocument() keyDocument {
	return keyDocument{what: "DID document", contentType: DIDMediaType, body: d.didBody, stale: &d.stale.did}
}

// renderDID renders the DID document for serving (renderKeys).
func (d *documents) renderDID(ctx context.Context) (jwksserve.Rendition, error) {
	return d.renderKeys(ctx, d.didDocument())
}

// didBody renders the DID document of the keys recs publish at now: the
// ES256 (P-256) ones, sorted by kid, so every replica renders the same
// bytes. Other algorithms cannot sign under did-web-v1 and are left out, and
// so is a key whose kid cannot be a fragment of a DID URL the verifiers
// accept (an imported key's kid with a colon): the catalog cannot be signed
// with it either.
func (d *documents) didBody(now time.Time, recs []jwks.KeyRecord) ([]byte, error) {
	var keys []aicatalog.VerificationKey
	for _, v := range jwks.Published(jwks.Derive(now, recs, d.keys.policy)) {
		if v.Alg != jose.ES256 {
			continue
		}
		if err := aicatalog.CheckFragment(v.KID); err != nil {
			// Debug: the document is rendered again at every re-read of
			// the key records (each second under traffic).
			d.log.Debug("DID document: key left out: its kid cannot be a DID URL fragment; the catalog cannot be signed with it", "kid", v.KID, "err", err)
			continue
		}
		pub, err := v.Public.PublicKey()
		if err != nil {
			return nil, err
		}
		keys = append(keys, aicatalog.VerificationKey{Fragment: v.KID, Public: pub})
	}
	slices.SortFunc(keys, func(a, b aicatalog.VerificationKey) int { return strings.Compare(a.Fragment, b.Fragment) })
	return aicatalog.DIDDocument(d.didDomain, keys)
}

// noDID answers the DID document's path when the catalog is off: 404, as
// for any path nothing is served at.
func noDID(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusNotFound, map[string]any{"error": "no DID document: this cardsignd publishes no AI Catalog (catalog.domain is not set)"})
}
