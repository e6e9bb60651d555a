package jwksserve

import (
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
)

// t0 is the origin of the key timeline these tests serve.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// rotT is the moment the new key activates in the timeline of
// renderRotation.
const rotT = 100 * time.Hour

// at returns t0 + d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// renderRotation renders, at now, the JWKS of a rotation: "old" active from
// t0, "new" published at rotT-1h and active from rotT (the timeline of the
// jwks package's own tests), with a max-age of an hour.
func renderRotation(t *testing.T, now time.Time) jwks.Document {
	t.Helper()
	recs := []jwks.KeyRecord{
		{KID: "old", CreatedAt: t0, PublishAt: t0, ActivateAt: ptr(t0)},
		{KID: "new", CreatedAt: at(rotT - time.Hour), PublishAt: at(rotT - time.Hour), ActivateAt: ptr(at(rotT))},
	}
	for i := range recs {
		r := &recs[i]
		r.Alg = jose.ES256
		pub, err := jose.NewJWK(testsupport.Key(t, jose.ES256).Public(), r.KID, r.Alg)
		if err != nil {
			t.Fatal(err)
		}
		r.Public = pub
	}
	doc, err := jwks.Render(now, recs, jwks.Policy{RetireGrace: 10 * time.Hour}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func ptr(t time.Time) *time.Time { return &t }

// signedRevocations returns a signed revocation document listing two keys.
func signedRevocations(t *testing.T) []byte {
	t.Helper()
	r := jwks.Revocations{
		Sequence:  7,
		IssuedAt:  time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		ExpiresAt: time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC),
		Revoked: []jwks.Revocation{
			{KID: "zz", RevokedAt: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), Reason: "superseded"},
			{KID: "aa", RevokedAt: time.Date(2026, 2, 2, 3, 4, 5, 600, time.UTC), Reason: "key compromise"},
		},
	}
	doc, err := jwks.SignRevocations(t.Context(), r, testsupport.Key(t, jose.ES256), jose.ES256, "k")
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
