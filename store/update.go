package store

import (
	"fmt"

	"github.com/cardsign/cardsign/jwks"
)

// CheckUpdate reports whether UpdateKeys may write updated over old (the
// record with the same KID as stored). It fails with ErrImmutable when
// updated changes a field fixed at creation (CreatedAt, Public, URI, Alg) or
// undoes or alters a revocation: a revoked kid is never published again, and
// the revocation document must not change its story. Implementations call it
// so every Store enforces the same rules.
func CheckUpdate(old, updated jwks.KeyRecord) error {
	field := ""
	switch {
	case updated.KID != old.KID:
		field = "kid"
	case !updated.CreatedAt.Equal(old.CreatedAt):
		field = "created_at"
	case updated.Public != old.Public:
		field = "public key"
	case updated.URI != old.URI:
		field = "uri"
	case updated.Alg != old.Alg:
		field = "alg"
	case old.RevokedAt != nil && (updated.RevokedAt == nil || !updated.RevokedAt.Equal(*old.RevokedAt)):
		field = "revoked_at of a revoked key"
	case old.RevokedAt != nil && updated.RevokeReason != old.RevokeReason:
		field = "revoke reason of a revoked key"
	default:
		return nil
	}
	return fmt.Errorf("key %s: %w: %s", old.KID, ErrImmutable, field)
}

// CheckUpdates reports whether UpdateKeys may write updated over recs (every
// record as stored): each updated record must name a stored kid (else
// ErrNotFound), once, and pass CheckUpdate against it.
func CheckUpdates(recs, updated []jwks.KeyRecord) error {
	old := make(map[string]jwks.KeyRecord, len(recs))
	for _, r := range recs {
		old[r.KID] = r
	}
	seen := make(map[string]bool, len(updated))
	for _, u := range updated {
		o, ok := old[u.KID]
		if !ok {
			return fmt.Errorf("key %s: %w", u.KID, ErrNotFound)
		}
		if seen[u.KID] {
			return fmt.Errorf("key %s returned twice", u.KID)
		}
		seen[u.KID] = true
		if err := CheckUpdate(o, u); err != nil {
			return err
		}
	}
	return nil
}
