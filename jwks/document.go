package jwks

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cardsign/cardsign/jose"
)

// Document is a rendered JWKS, ready to serve.
type Document struct {
	Body []byte // the JWK Set of the published keys
	// ETag is the strong entity tag of Body: `"` + base64url(SHA-256(Body))
	// + `"`, all 43 characters of the hash.
	ETag string
	// MaxAge is how long, from the moment Render ran, caches may keep Body:
	// never past the next scheduled transition. A caller that keeps a
	// Document should render it again at that transition (NextTransition),
	// or the max-age it serves would reach past it.
	MaxAge time.Duration
}

// Render builds the JWKS of the keys published at now (Published: pending,
// active, retired). Each key is written with its public members only (kty
// crv x y n e kid alg use), sorted by kid, so the bytes, and so the ETag,
// depend only on the set of published keys: not on the order of recs, the
// replica or a restart. MaxAge is maxAge capped at the time left until the
// next transition (0 if it is imminent), so no cache holds a set that has
// gained or lost a key.
//
// A record whose public JWK is unusable, whose JWK names another kid or alg
// than the record, or whose kid is not unique is an error rather than a
// silently different set: verifiers would fail in ways far harder to trace.
func Render(now time.Time, recs []KeyRecord, p Policy, maxAge time.Duration) (Document, error) {
	pub := Published(Derive(now, recs, p))
	keys := make([]jose.JWK, 0, len(pub))
	for _, v := range pub {
		k, err := publicKeyOf(v.KeyRecord)
		if err != nil {
			return Document{}, err
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b jose.JWK) int { return strings.Compare(a.Kid, b.Kid) })
	body, err := Set{Keys: keys}.MarshalJSON()
	if err != nil {
		return Document{}, fmt.Errorf("jwks: render: %w", err)
	}
	age := max(maxAge, 0)
	if next, ok := NextTransition(now, recs, p); ok {
		age = min(age, next.Sub(now))
	}
	return Document{Body: body, ETag: ETagOf(body), MaxAge: age}, nil
}

// ETagOf returns the strong entity tag of body (see Document.ETag): the full
// unpadded base64url SHA-256 of the bytes, quoted. The full 43 characters are
// kept rather than a prefix: the tag costs nothing to send, and a tag that
// depends on every bit of the body needs no argument about collisions. Since
// the body's bytes depend only on the key set, so does the tag, on every
// replica and across restarts.
func ETagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:]) + `"`
}

// publicKeyOf returns the JWK to publish for r: its stored public JWK, with
// kid, alg and use filled in from the record when the JWK lacks them. It is
// checked (jose.JWK.PublicKey) before it is published, since one bad key
// would make clients refuse the whole set (Parse).
func publicKeyOf(r KeyRecord) (jose.JWK, error) {
	k := r.Public
	if r.KID == "" {
		return jose.JWK{}, fmt.Errorf("jwks: render: key record without kid")
	}
	switch k.Kid {
	case "":
		k.Kid = r.KID
	case r.KID:
	default:
		return jose.JWK{}, fmt.Errorf("jwks: render: key %q: stored public JWK has kid %q", r.KID, k.Kid)
	}
	switch k.Alg {
	case "":
		k.Alg = string(r.Alg)
	case string(r.Alg):
	default:
		return jose.JWK{}, fmt.Errorf("jwks: render: key %q: stored public JWK has alg %q, record has %q", r.KID, k.Alg, r.Alg)
	}
	if k.Use == "" {
		k.Use = "sig"
	}
	// PublicKey also checks that alg fits the key.
	if _, err := k.PublicKey(); err != nil {
		return jose.JWK{}, fmt.Errorf("jwks: render: key %q: %w", r.KID, err)
	}
	return k, nil
}
