package jwks

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// The ways a revocation document can be refused. VerifyRevocations wraps
// exactly one of them (errors.Is), so a CLI can tell "revocation document
// expired" from "bad signature" and decide, say, to retry a fetch on one and
// not on the other.
var (
	// ErrRevocationsMalformed: not a flattened JWS of a revocation document
	// (bad JSON or base64url, wrong typ, missing or unexpected members).
	ErrRevocationsMalformed = errors.New("malformed revocation document")
	// ErrRevocationsUnknownKey: the kid is not in the trusted key set.
	ErrRevocationsUnknownKey = errors.New("revocation document signed by an unknown key")
	// ErrRevocationsBadSignature: the signature does not verify, or its alg
	// is not the key's.
	ErrRevocationsBadSignature = errors.New("revocation document has a bad signature")
	// ErrRevocationsExpired: now is at or after expires_at.
	ErrRevocationsExpired = errors.New("revocation document expired")
	// ErrRevocationsNotYetValid: issued_at is further in the future than
	// RevocationsClockSkew allows.
	ErrRevocationsNotYetValid = errors.New("revocation document issued in the future")
)

// RevocationsClockSkew is how far issued_at may be ahead of the verifier's
// clock: clocks of publisher and verifier are never quite in step, and an
// otherwise valid, freshly issued document should not be refused for it.
const RevocationsClockSkew = 5 * time.Minute

// KeyLookup finds a trusted verification key by kid; Set implements it.
type KeyLookup interface {
	Lookup(kid string) (jose.JWK, bool)
}

// VerifyRevocations checks a document made by SignRevocations and returns its
// content. The key is chosen by kid from keys only (never from the document),
// the header alg must fit that key (and equal its "alg" member, when it has
// one), typ must be RevocationsType and now must be before expires_at, with
// issued_at no later than now + RevocationsClockSkew. Every error wraps one
// of the ErrRevocations* values.
//
// It cannot tell a replayed older document from the current one: a verifier
// that keeps the highest Sequence it has seen should refuse a lower one.
func VerifyRevocations(data []byte, keys KeyLookup, now time.Time) (Revocations, error) {
	r, err := verifyRevocations(data, keys, now)
	if err != nil {
		return Revocations{}, fmt.Errorf("jwks: %w", err)
	}
	return r, nil
}

func verifyRevocations(data []byte, keys KeyLookup, now time.Time) (Revocations, error) {
	malformed := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrRevocationsMalformed, fmt.Sprintf(format, args...))
	}
	if len(data) > MaxSize {
		return Revocations{}, malformed("%d bytes, over the %d-byte limit", len(data), MaxSize)
	}
	env, err := jose.ParseObject(data)
	if err != nil {
		return Revocations{}, malformed("%v", err)
	}
	if err := env.ExactMembers("payload", "protected", "signature"); err != nil {
		return Revocations{}, malformed("%v", err)
	}
	parts := map[string][]byte{}
	b64 := map[string]string{}
	for _, name := range []string{"payload", "protected", "signature"} {
		s, err := stringOf(env, name)
		if err != nil {
			return Revocations{}, malformed("%v", err)
		}
		b, err := jose.DecodeBase64URL(s)
		if err != nil {
			return Revocations{}, malformed("member %q: %v", name, err)
		}
		b64[name], parts[name] = s, b
	}

	hdr, err := jose.ParseObject(parts["protected"])
	if err != nil {
		return Revocations{}, malformed("protected header: %v", err)
	}
	// Exactly these members: in particular no "crit", whose extensions this
	// verifier would have to understand (RFC 7515 §4.1.11).
	if err := hdr.ExactMembers("alg", "kid", "typ"); err != nil {
		return Revocations{}, malformed("protected header: %v", err)
	}
	var h [3]string
	for i, name := range []string{"alg", "kid", "typ"} {
		if h[i], err = stringOf(hdr, name); err != nil {
			return Revocations{}, malformed("protected header: %v", err)
		}
	}
	algName, kid, typ := h[0], h[1], h[2]
	if typ != RevocationsType {
		return Revocations{}, malformed("typ is %q, want %q", typ, RevocationsType)
	}
	if keys == nil {
		return Revocations{}, fmt.Errorf("%w: no trusted keys given", ErrRevocationsUnknownKey)
	}
	key, ok := keys.Lookup(kid)
	if !ok {
		return Revocations{}, fmt.Errorf("%w: kid %q", ErrRevocationsUnknownKey, kid)
	}
	alg, err := jose.ParseAlg(algName)
	if err != nil {
		return Revocations{}, fmt.Errorf("%w: %v", ErrRevocationsBadSignature, err)
	}
	if key.Alg != "" && key.Alg != algName {
		return Revocations{}, fmt.Errorf("%w: alg %s, but key %q is for %s", ErrRevocationsBadSignature, algName, kid, key.Alg)
	}
	pub, err := key.PublicKey()
	if err != nil {
		return Revocations{}, fmt.Errorf("%w: key %q: %v", ErrRevocationsBadSignature, kid, err)
	}
	input := []byte(b64["protected"] + "." + b64["payload"])
	if err := jose.Verify(alg, pub, input, parts["signature"]); err != nil {
		return Revocations{}, fmt.Errorf("%w: key %q: %v", ErrRevocationsBadSignature, kid, err)
	}

	r, err := parseRevocations(parts["payload"])
	if err != nil {
		return Revocations{}, malformed("payload: %v", err)
	}
	if !now.Before(r.ExpiresAt) {
		return Revocations{}, fmt.Errorf("%w at %s (sequence %d)", ErrRevocationsExpired, r.ExpiresAt.Format(time.RFC3339), r.Sequence)
	}
	if r.IssuedAt.After(now.Add(RevocationsClockSkew)) {
		return Revocations{}, fmt.Errorf("%w: issued_at %s is more than %s ahead of this clock", ErrRevocationsNotYetValid, r.IssuedAt.Format(time.RFC3339), RevocationsClockSkew)
	}
	return r, nil
}

// parseRevocations reads the signed payload. It is as strict as the
// envelope: every member required, none unknown, kids unique.
func parseRevocations(data []byte) (Revocations, error) {
	m, err := jose.ParseObject(data)
	if err != nil {
		return Revocations{}, err
	}
	var r Revocations
	// "audit_head" is optional: documents signed before it existed lack it.
	members := []string{"expires_at", "issued_at", "revoked", "sequence"}
	if head, ok := m.Get("audit_head"); ok {
		members = append(members, "audit_head")
		if r.AuditHead, err = parseAuditHead(head); err != nil {
			return Revocations{}, err
		}
	}
	if cards, ok := m.Get("revoked_cards"); ok {
		members = append(members, "revoked_cards")
		if r.Cards, err = parseCardRevocations(cards); err != nil {
			return Revocations{}, err
		}
	}
	if err := m.ExactMembers(members...); err != nil {
		return Revocations{}, err
	}
	if r.IssuedAt, err = timeOf(m, "issued_at"); err != nil {
		return Revocations{}, err
	}
	if r.ExpiresAt, err = timeOf(m, "expires_at"); err != nil {
		return Revocations{}, err
	}
	if r.Sequence, err = integerOf(m, "sequence"); err != nil {
		return Revocations{}, err
	}
	entries, _ := m.Get("revoked")
	if entries.Kind != strictjson.Array {
		return Revocations{}, errors.New(`member "revoked" is not an array`)
	}
	seen := make(map[string]bool, len(entries.Arr))
	r.Revoked = make([]Revocation, 0, len(entries.Arr))
	for i, e := range entries.Arr {
		if e.Kind != strictjson.Object {
			return Revocations{}, fmt.Errorf("revoked[%d]: want a JSON object, not %s", i, e.Kind)
		}
		if err := e.ExactMembers("kid", "reason", "revoked_at"); err != nil {
			return Revocations{}, fmt.Errorf("revoked[%d]: %w", i, err)
		}
		var rev Revocation
		if rev.KID, err = stringOf(e, "kid"); err != nil || rev.KID == "" {
			return Revocations{}, fmt.Errorf("revoked[%d]: member \"kid\" is not a non-empty string", i)
		}
		if seen[rev.KID] {
			return Revocations{}, fmt.Errorf("revoked[%d]: kid %q listed twice", i, rev.KID)
		}
		seen[rev.KID] = true
		if rev.Reason, err = stringOf(e, "reason"); err != nil {
			return Revocations{}, fmt.Errorf("revoked[%d]: %w", i, err)
		}
		if rev.RevokedAt, err = timeOf(e, "revoked_at"); err != nil {
			return Revocations{}, fmt.Errorf("revoked[%d]: %w", i, err)
		}
		r.Revoked = append(r.Revoked, rev)
	}
	return r, nil
}

// parseCardRevocations reads "revoked_cards": objects with every member, a
// 32-byte hex SHA-256 each, none twice.
func parseCardRevocations(v strictjson.Value) ([]CardRevocation, error) {
	if v.Kind != strictjson.Array {
		return nil, errors.New(`member "revoked_cards" is not an array`)
	}
	seen := make(map[string]bool, len(v.Arr))
	out := make([]CardRevocation, 0, len(v.Arr))
	for i, e := range v.Arr {
		if e.Kind != strictjson.Object {
			return nil, fmt.Errorf("revoked_cards[%d]: want a JSON object, not %s", i, e.Kind)
		}
		if err := e.ExactMembers("agent_id", "canonical_sha256", "reason", "revoked_at", "version"); err != nil {
			return nil, fmt.Errorf("revoked_cards[%d]: %w", i, err)
		}
		var c CardRevocation
		sum, err := stringOf(e, "canonical_sha256")
		if err == nil {
			c.CanonicalSHA256, err = hex.DecodeString(sum)
		}
		if err != nil || len(c.CanonicalSHA256) != 32 || sum != hex.EncodeToString(c.CanonicalSHA256) {
			return nil, fmt.Errorf("revoked_cards[%d]: canonical_sha256 is not 64 lowercase hex digits", i)
		}
		if seen[sum] {
			return nil, fmt.Errorf("revoked_cards[%d]: card %s listed twice", i, sum)
		}
		seen[sum] = true
		if c.AgentID, err = stringOf(e, "agent_id"); err != nil {
			return nil, fmt.Errorf("revoked_cards[%d]: %w", i, err)
		}
		if c.Reason, err = stringOf(e, "reason"); err != nil {
			return nil, fmt.Errorf("revoked_cards[%d]: %w", i, err)
		}
		if c.Version, err = integerOf(e, "version"); err != nil {
			return nil, fmt.Errorf("revoked_cards[%d]: %w", i, err)
		}
		if c.RevokedAt, err = timeOf(e, "revoked_at"); err != nil {
			return nil, fmt.Errorf("revoked_cards[%d]: %w", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// stringOf decodes a member that must be a JSON string.
func stringOf(m strictjson.Value, name string) (string, error) {
	s, ok, err := m.GetString(name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("missing member %q", name)
	}
	return s, nil
}

// integerOf decodes a member that must be an integer in 0..2^53-1 written as
// plain digits: RFC 8785 writes numbers as doubles, which hold integers
// exactly only that far.
func integerOf(m strictjson.Value, name string) (int64, error) {
	v, _ := m.Get(name)
	n, err := strconv.ParseInt(v.Str, 10, 64)
	if v.Kind != strictjson.Number || err != nil || n < 0 || n > maxSequence {
		return 0, fmt.Errorf("member %q is not an integer in 0..2^53-1", name)
	}
	return n, nil
}

// timeOf decodes an RFC 3339 time member into UTC.
func timeOf(m strictjson.Value, name string) (time.Time, error) {
	s, err := stringOf(m, name)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("member %q is not an RFC 3339 time", name)
	}
	return t.UTC(), nil
}

// VerifyRevocationsSigned checks a revocation document's signature and form
// as VerifyRevocations does, as of the document's own issued_at: whether it
// has expired since is not asked. It is for documents kept as evidence (the
// last one a store holds, a copy saved long ago), never for deciding what
// is revoked now. issued_at is read unverified only to pick that instant;
// the content is returned only if the signature verifies.
func VerifyRevocationsSigned(data []byte, keys KeyLookup) (Revocations, error) {
	if len(data) > MaxSize {
		return VerifyRevocations(data, keys, time.Now())
	}
	var env struct{ Payload string }
	var p struct {
		IssuedAt time.Time `json:"issued_at"`
	}
	if err := json.Unmarshal(data, &env); err == nil {
		if raw, err := jose.DecodeBase64URL(env.Payload); err == nil && json.Unmarshal(raw, &p) == nil && !p.IssuedAt.IsZero() {
			return VerifyRevocations(data, keys, p.IssuedAt)
		}
	}
	return VerifyRevocations(data, keys, time.Now())
}
