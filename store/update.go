package store

import (
	"errors"
	"fmt"

	"github.com/cardsign/cardsign/audit"
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

// ErrUnaudited: a key change without an audit record of its key.
var ErrUnaudited = errors.New("a key change must carry a key administration record of every key it changes")

// PrepareKeyChange checks ch against recs (every key record as stored) for
// ChangeKeys: its updates as CheckUpdates does, and its audit records as
// PrepareAudit does, each a key administration record, one at least for
// every key created or updated. It returns the audit records as they will
// be stored and their times in nanoseconds.
func PrepareKeyChange(recs []jwks.KeyRecord, ch KeyChange) ([]audit.Record, []int64, error) {
	if err := CheckUpdates(recs, ch.Update); err != nil {
		return nil, nil, err
	}
	audited := map[string]bool{}
	for i, r := range ch.Audit {
		if !r.Kind().IsKey() {
			return nil, nil, fmt.Errorf("store: change keys: audit record %d is a %s record, not a key administration record", i, r.Kind())
		}
		audited[r.KID] = true
	}
	changed := ch.Update
	if ch.Create != nil {
		changed = append([]jwks.KeyRecord{*ch.Create}, changed...)
	}
	for _, k := range changed {
		if !audited[k.KID] {
			return nil, nil, fmt.Errorf("store: change keys: key %s: %w", k.KID, ErrUnaudited)
		}
	}
	if len(ch.Audit) == 0 {
		return nil, nil, nil
	}
	return PrepareAudit(ch.Audit)
}
