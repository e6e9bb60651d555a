package store

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
)

// Key records sit outside the audit chain, but every change made to one is
// an audit record (audit.Kind.IsKey) stating the key's whole state after
// it. A KeyTrail replays those records so the key records can be checked
// against them: a revocation erased from the keys table, a key added behind
// cardsignd's back or one deleted shows up as a disagreement.

// ErrKeyTrail is wrapped by every KeyTrailError.
var ErrKeyTrail = errors.New("key records disagree with the audit trail")

// KeyTrailError is a key record that disagrees with the audit trail.
type KeyTrailError struct {
	KID    string
	Seq    int64  // the audit record it disagrees with; 0 when none
	Reason string // what disagrees
}

func (e *KeyTrailError) Error() string {
	if e.Seq == 0 {
		return fmt.Sprintf("%v: key %q: %s", ErrKeyTrail, e.KID, e.Reason)
	}
	return fmt.Sprintf("%v: key %q: %s (audit record %d)", ErrKeyTrail, e.KID, e.Reason, e.Seq)
}

func (e *KeyTrailError) Unwrap() error { return ErrKeyTrail }

// KeyThumbprint is the RFC 7638 thumbprint of rec's public key, as raw
// SHA-256 bytes: what a key administration record keeps of the key.
func KeyThumbprint(pub jose.JWK) ([]byte, error) {
	k, err := pub.PublicKey()
	if err != nil {
		return nil, err
	}
	t, err := jose.Thumbprint(k)
	if err != nil {
		return nil, err
	}
	return base64.RawURLEncoding.DecodeString(t)
}

// KeyState is what a key administration record states about rec.
func KeyState(rec jwks.KeyRecord) audit.KeyState {
	return audit.KeyState{CreatedAt: rec.CreatedAt, PublishAt: rec.PublishAt, ActivateAt: rec.ActivateAt,
		RetireAt: rec.RetireAt, ExpireAt: rec.ExpireAt, RevokedAt: rec.RevokedAt, RevokeReason: rec.RevokeReason}
}

// KeyAudit is the audit record of kind (a key kind) done by caller to the
// key whose record is now rec, at t. reason is the caller's, if any.
func KeyAudit(kind audit.Kind, rec jwks.KeyRecord, caller, requestID, reason string, t time.Time) (audit.Record, error) {
	if !kind.IsKey() {
		return audit.Record{}, fmt.Errorf("store: %q is not a key administration kind", kind)
	}
	thumb, err := KeyThumbprint(rec.Public)
	if err != nil {
		return audit.Record{}, fmt.Errorf("store: key %s: public key: %w", rec.KID, err)
	}
	return audit.Record{Time: t, Caller: caller, RequestID: requestID, Outcome: string(kind), Reason: reason,
		KID: rec.KID, Alg: string(rec.Alg), CanonicalSHA256: thumb, Detail: audit.EncodeKeyState(KeyState(rec))}, nil
}

// KeyTrail is the last key administration record of each kid in an audit
// log, fed in order with Add. It holds one entry per key, whatever the
// length of the log.
type KeyTrail struct {
	last  map[string]trailEntry
	first *time.Time // time of the first key administration record
	// fromStart: record 1 is a key's creation, so the log was written by a
	// cardsignd that audited key administration from the first key on,
	// and no key may lack a record.
	fromStart bool
	// baseline: a key.baseline record was seen, recording every key that
	// had no record at the first start after the upgrade: from there on,
	// too, no key may lack a record.
	baseline bool
}

type trailEntry struct {
	seq   int64
	alg   string
	thumb []byte
	state audit.KeyState
}

// Add takes the next record of the log; records of other kinds are
// skipped. A key record whose detail does not decode fails (a chain that
// verified never has one).
func (t *KeyTrail) Add(r audit.Record) error {
	if r.Seq == 1 {
		t.fromStart = r.Kind().IsKey()
	}
	if !r.Kind().IsKey() {
		return nil
	}
	if r.Kind() == audit.KindKeyBaseline {
		t.baseline = true
	}
	st, err := audit.DecodeKeyState(r.Detail)
	if err != nil {
		return fmt.Errorf("audit record %d: %w", r.Seq, err)
	}
	if t.last == nil {
		t.last = map[string]trailEntry{}
	}
	if t.first == nil {
		at := r.Time
		t.first = &at
	}
	t.last[r.KID] = trailEntry{seq: r.Seq, alg: r.Alg, thumb: bytes.Clone(r.CanonicalSHA256), state: st}
	return nil
}

// Keys is the number of kids with a record.
func (t *KeyTrail) Keys() int { return len(t.last) }

// Since is the time of the first key administration record; ok is false
// when there is none (a log written before key administration was
// audited, or an empty one).
func (t *KeyTrail) Since() (at time.Time, ok bool) {
	if t.first == nil {
		return time.Time{}, false
	}
	return *t.first, true
}

// KeyCheck says how much of a key record Check compares.
type KeyCheck int

const (
	// CheckAll compares every field a record states: a store's key records.
	CheckAll KeyCheck = iota
	// CheckServed compares what cardsignd's ListKeys serves as stored
	// (kid, alg, public key, creation, activation and revocation): its
	// retirement and expiry are derived, not the records'.
	CheckServed
)

// Check compares keys (every key record of the store the log is from)
// with the trail and returns every disagreement found (nil when none), and
// the kids of keys that predate the trail (created before the first key
// administration record, by a cardsignd that did not audit key
// administration): those are taken as they are. A log whose record 1 is a
// key administration record was audited from its first key on, and one
// with a key.baseline record recorded every key then on record: there,
// every key must have a record.
//
// A key with records must agree with its last one (a revocation erased, a
// time moved); a key without one must predate the trail (else it was added
// behind cardsignd's back); and every kid with records must still exist.
func (t *KeyTrail) Check(keys []jwks.KeyRecord, how KeyCheck) (problems []*KeyTrailError, legacy []string) {
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k.KID] = true
		e, ok := t.last[k.KID]
		if !ok {
			if since, audited := t.Since(); t.fromStart || t.baseline || (audited && !k.CreatedAt.Before(since)) {
				problems = append(problems, &KeyTrailError{KID: k.KID, Reason: fmt.Sprintf(
					"the store has this key, created at %s, but no audit record created or imported it: it was added outside cardsignd",
					k.CreatedAt.UTC().Format(time.RFC3339Nano))})
				continue
			}
			legacy = append(legacy, k.KID)
			continue
		}
		if p := e.disagreement(k, how); p != "" {
			problems = append(problems, &KeyTrailError{KID: k.KID, Seq: e.seq, Reason: p})
		}
	}
	for _, kid := range slices.Sorted(maps.Keys(t.last)) {
		if !seen[kid] {
			problems = append(problems, &KeyTrailError{KID: kid, Seq: t.last[kid].seq,
				Reason: "the audit trail records this key, the store has no record of it: it was deleted outside cardsignd"})
		}
	}
	return problems, legacy
}

// disagreement names the first field of k that differs from e, "" when
// none does.
func (e trailEntry) disagreement(k jwks.KeyRecord, how KeyCheck) string {
	if string(k.Alg) != e.alg {
		return fmt.Sprintf("alg: the audit trail says %q, the store has %q", e.alg, k.Alg)
	}
	thumb, err := KeyThumbprint(k.Public)
	if err != nil || !bytes.Equal(thumb, e.thumb) {
		return "public key: the store's is not the one the audit trail recorded"
	}
	s := e.state
	times := []struct {
		name        string
		trail, have *time.Time
		all         bool // compared only with CheckAll
	}{
		{"created_at", &s.CreatedAt, &k.CreatedAt, false},
		{"publish_at", &s.PublishAt, &k.PublishAt, false},
		{"activate_at", s.ActivateAt, k.ActivateAt, false},
		{"retire_at", s.RetireAt, k.RetireAt, true},
		{"expire_at", s.ExpireAt, k.ExpireAt, true},
		{"revoked_at", s.RevokedAt, k.RevokedAt, false},
	}
	for _, f := range times {
		if f.all && how != CheckAll {
			continue
		}
		if !sameTime(f.trail, f.have) {
			return fmt.Sprintf("%s: the audit trail says %s, the store has %s", f.name, showTime(f.trail), showTime(f.have))
		}
	}
	if s.RevokeReason != k.RevokeReason {
		return fmt.Sprintf("revoke reason: the audit trail says %q, the store has %q", s.RevokeReason, k.RevokeReason)
	}
	return ""
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

func showTime(t *time.Time) string {
	if t == nil {
		return "none"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// RevocationsDocument is the stored name (and counter name) of the signed
// revocation document.
const RevocationsDocument = "revocations"

// CheckRevocations checks keys (every key record of a store) against doc,
// the store's latest signed revocation document: every kid the document
// lists as revoked must be revoked in the key records, at the same time (to
// the second, as the document writes it). Unlike the audit trail, this
// covers keys that predate the audit of key administration: a revocation
// erased from the keys table of an upgraded store shows up here. A key the
// document lists that disagrees is one of problems.
//
// The document's signature is checked against the key records' public
// keys (a document no key on record signed was not made by cardsignd), and
// its signed sequence must be its row's: either failing is an error
// wrapping ErrKeyTrail. Whether it is the latest the store signed is not
// known here: see RevocationsBehind.
func CheckRevocations(doc Document, keys []jwks.KeyRecord) (problems []*KeyTrailError, err error) {
	set := jwks.Set{Keys: make([]jose.JWK, 0, len(keys))}
	for _, k := range keys {
		pub := k.Public
		pub.Kid, pub.Alg = k.KID, string(k.Alg)
		set.Keys = append(set.Keys, pub)
	}
	r, verr := jwks.VerifyRevocationsSigned(doc.Body, set)
	if verr != nil {
		return nil, fmt.Errorf("%w: the stored revocation document (sequence %d) does not verify against the key records: %v", ErrKeyTrail, doc.Seq, verr)
	}
	if r.Sequence != doc.Seq {
		return nil, fmt.Errorf("%w: the stored revocation document says sequence %d, its row %d", ErrKeyTrail, r.Sequence, doc.Seq)
	}
	return RevokedIn(r, keys), nil
}

// RevocationsBehind says why a store's revocation document (sequence
// stored, 0 when there is none) is behind its counter, "" when it is not.
// It is not proof of a rollback: a cardsignd stopped between taking a
// sequence and storing its document (a quick stop at start, a store
// outage) leaves the same, so callers report it and do not refuse.
func RevocationsBehind(stored, counter int64) string {
	switch {
	case stored >= counter:
		return ""
	case stored == 0:
		return fmt.Sprintf("the revocation counter is %d but no revocation document is stored: a cardsignd stopped before storing its first one, "+
			"or the document was deleted outside cardsignd", counter)
	default:
		return fmt.Sprintf("the stored revocation document has sequence %d, below the revocation counter %d: a cardsignd stopped between signing "+
			"a document and storing it, or an older document was put back outside cardsignd (a rollback, which would hide later revocations): "+
			"check a copy you kept with cardsign audit verify --revocations", stored, counter)
	}
}

// RevokedIn returns a problem for every key that r lists as revoked and
// keys (every key record of a store) do not hold revoked at the same time
// (to the second, as the document writes it). Revocation cannot be undone
// and no key record is ever deleted, so a signed document, however old,
// still holds for the keys it lists.
func RevokedIn(r jwks.Revocations, keys []jwks.KeyRecord) (problems []*KeyTrailError) {
	byKID := make(map[string]jwks.KeyRecord, len(keys))
	for _, k := range keys {
		byKID[k.KID] = k
	}
	for _, rev := range r.Revoked {
		listed := fmt.Sprintf("the signed revocation document (sequence %d) lists it as revoked at %s", r.Sequence, rev.RevokedAt.UTC().Format(time.RFC3339))
		k, ok := byKID[rev.KID]
		switch {
		case !ok:
			problems = append(problems, &KeyTrailError{KID: rev.KID, Reason: listed + ", the store has no record of it: it was deleted outside cardsignd"})
		case k.RevokedAt == nil:
			problems = append(problems, &KeyTrailError{KID: rev.KID, Reason: listed + ", the store has it not revoked: the revocation was erased outside cardsignd"})
		case !k.RevokedAt.UTC().Truncate(time.Second).Equal(rev.RevokedAt.UTC().Truncate(time.Second)):
			problems = append(problems, &KeyTrailError{KID: rev.KID, Reason: listed + ", the store has it revoked at " + showTime(k.RevokedAt)})
		}
	}
	return problems
}

// NeedsBaseline says whether BaselineKeys has anything to append, given
// keys (every key record), baselined and audited as for BaselineChange.
func NeedsBaseline(keys []jwks.KeyRecord, baselined bool, audited map[string]bool) bool {
	if baselined {
		return false
	}
	for _, k := range keys {
		if !audited[k.KID] {
			return true
		}
	}
	return false
}

// BaselineChange is the change BaselineKeys makes, given recs (every key
// record, read in its transaction), baselined (whether a key.baseline
// record exists) and audited (the kids some key administration record
// names): a key.baseline record, made by rec, of every key not audited;
// an empty change when baselined. Each store runs it in its transaction.
func BaselineChange(recs []jwks.KeyRecord, baselined bool, audited map[string]bool, rec func(jwks.KeyRecord) (audit.Record, error)) (KeyChange, error) {
	var ch KeyChange
	if baselined {
		return ch, nil
	}
	for _, k := range recs {
		if audited[k.KID] {
			continue
		}
		r, err := rec(k)
		if err != nil {
			return KeyChange{}, err
		}
		if r.Kind() != audit.KindKeyBaseline || r.KID != k.KID {
			return KeyChange{}, fmt.Errorf("store: baseline of key %s: a %s record of key %q, want a %s record of it", k.KID, r.Kind(), r.KID, audit.KindKeyBaseline)
		}
		ch.Audit = append(ch.Audit, r)
	}
	return ch, nil
}
