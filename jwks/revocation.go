package jwks

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// RevocationsType is the "typ" of a signed revocation document. It keeps a
// JWS made for something else (a card signature, say) from being accepted as
// a revocation document, and the reverse.
const RevocationsType = "cardsign-revocations+jws"

// maxSequence is the largest sequence number: RFC 8785 writes numbers as
// IEEE 754 doubles, which hold integers exactly only up to 2^53.
const maxSequence = 1<<53 - 1

// Revocation is one entry of the revocation document.
type Revocation struct {
	KID       string
	RevokedAt time.Time
	Reason    string
}

// Revocations is the content of the revocation document (DESIGN §5):
// verifiers that fetch it refuse signatures by the listed keys. Sequence
// grows with every new document, so a verifier that remembers the last one
// it saw can refuse a replayed older one; ExpiresAt bounds how long a
// withheld update can go unnoticed.
//
// AuditHead, when set, is the issuer's audit log head when the document was
// signed, so anyone holding a document can later prove the log was not
// truncated or rewritten below it (audit.Head.Check). Documents made before
// it existed have none (nil).
type Revocations struct {
	Sequence  int64
	IssuedAt  time.Time
	ExpiresAt time.Time
	Revoked   []Revocation
	AuditHead *AuditHead
	// Cards are single cards revoked (by the SHA-256 of their spec-profile
	// canonical bytes) while their keys stay good: "revoked_cards", present
	// only when there is one, so documents without any are as before.
	Cards []CardRevocation
}

// CardRevocation is one entry of "revoked_cards": a card a verifier refuses
// whatever key signed it.
type CardRevocation struct {
	CanonicalSHA256 []byte // 32 bytes; written in lowercase hex
	AgentID         string
	Version         int64
	RevokedAt       time.Time
	Reason          string
}

// AuditHead is the "audit_head" member of the revocation document: the Seq
// and Hash (SHA-256, 32 bytes; written in lowercase hex, as cardsign prints
// audit hashes) of the last audit record. Seq 0 is the empty log.
type AuditHead struct {
	Seq  int64
	Hash []byte
}

// String says which card was revoked, when and why, as verifiers report it.
func (c CardRevocation) String() string {
	agent := c.AgentID
	if agent == "" {
		agent = "(private)"
	}
	return fmt.Sprintf("agent %s version %d, revoked at %s: %s", agent, c.Version, c.RevokedAt.UTC().Format(time.RFC3339), c.Reason)
}

// CardLookup answers signer.VerifyOptions.RevokedCard for cards: whether a
// card, by the SHA-256 of its spec-profile canonical bytes, is listed, and
// why.
func CardLookup(cards []CardRevocation) func([32]byte) (string, bool) {
	by := make(map[[32]byte]CardRevocation, len(cards))
	for _, c := range cards {
		if len(c.CanonicalSHA256) == 32 {
			by[[32]byte(c.CanonicalSHA256)] = c
		}
	}
	return func(sum [32]byte) (string, bool) {
		c, ok := by[sum]
		if !ok {
			return "", false
		}
		return c.String(), true
	}
}

// RevokedFrom lists the keys revoked at now (RevokedAt ≤ now), sorted by kid.
// A revocation scheduled for later is not listed before its time, matching
// Derive.
func RevokedFrom(recs []KeyRecord, now time.Time) []Revocation {
	var out []Revocation
	for _, r := range recs {
		if r.RevokedAt != nil && !r.RevokedAt.After(now) {
			out = append(out, Revocation{KID: r.KID, RevokedAt: *r.RevokedAt, Reason: r.RevokeReason})
		}
	}
	slices.SortFunc(out, func(a, b Revocation) int { return cmp.Compare(a.KID, b.KID) })
	return out
}

// auditHeadHashSize is the length of AuditHead.Hash: an audit record hash
// (SHA-256). jwks does not import package audit for it.
const auditHeadHashSize = 32

// formatTime writes t as RFC 3339 in UTC, truncated to whole seconds
// ("2006-01-02T15:04:05Z"). Whole seconds because stores keep different
// sub-second precision (SQLite milliseconds, PostgreSQL microseconds): the
// same revocation then gives the same bytes from every store. Truncation
// errs on the safe side: a revocation looks earlier, a document expires
// sooner.
func formatTime(t time.Time) (string, error) {
	if t.IsZero() {
		return "", errors.New("time is not set")
	}
	b, err := t.UTC().Truncate(time.Second).MarshalText() // refuses years outside 0000-9999
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// revocationsPayload returns the RFC 8785 bytes of r, with Revoked sorted by
// kid so the bytes do not depend on the caller's order.
func revocationsPayload(r Revocations) ([]byte, error) {
	if r.Sequence < 0 || r.Sequence > maxSequence {
		return nil, fmt.Errorf("sequence %d is outside 0..2^53-1", r.Sequence)
	}
	issued, err := formatTime(r.IssuedAt)
	if err != nil {
		return nil, fmt.Errorf("issued_at: %w", err)
	}
	expires, err := formatTime(r.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("expires_at: %w", err)
	}
	if expires <= issued { // same fixed-width format, so string order is time order
		return nil, fmt.Errorf("expires_at %s is not after issued_at %s", expires, issued)
	}
	revoked := slices.Clone(r.Revoked)
	slices.SortFunc(revoked, func(a, b Revocation) int { return cmp.Compare(a.KID, b.KID) })
	// Members are listed in RFC 8785 order already; JCS would sort them anyway.
	var doc []strictjson.Member
	if h := r.AuditHead; h != nil {
		if h.Seq < 0 || h.Seq > maxSequence {
			return nil, fmt.Errorf("audit head sequence %d is outside 0..2^53-1", h.Seq)
		}
		if len(h.Hash) != auditHeadHashSize {
			return nil, fmt.Errorf("audit head hash is %d bytes, want %d", len(h.Hash), auditHeadHashSize)
		}
		doc = append(doc, strictjson.Member{Key: "audit_head", Val: strictjson.ObjectValue(
			strictjson.Member{Key: "hash", Val: strictjson.StringValue(hex.EncodeToString(h.Hash))},
			strictjson.Member{Key: "seq", Val: strictjson.IntValue(h.Seq)},
		)})
	}
	entries := make([]strictjson.Value, 0, len(revoked))
	for i, e := range revoked {
		if e.KID == "" {
			return nil, errors.New("revoked entry without kid")
		}
		if i > 0 && revoked[i-1].KID == e.KID {
			return nil, fmt.Errorf("kid %q listed twice", e.KID)
		}
		// Checked here, before JCS would refuse it too, so that the message
		// names the entry by its kid rather than by its index after sorting.
		if !utf8.ValidString(e.KID) || !utf8.ValidString(e.Reason) {
			return nil, fmt.Errorf("kid %q: kid or reason is not valid UTF-8", e.KID)
		}
		at, err := formatTime(e.RevokedAt)
		if err != nil {
			return nil, fmt.Errorf("kid %q: revoked_at: %w", e.KID, err)
		}
		entries = append(entries, strictjson.ObjectValue(
			strictjson.Member{Key: "kid", Val: strictjson.StringValue(e.KID)},
			strictjson.Member{Key: "reason", Val: strictjson.StringValue(e.Reason)},
			strictjson.Member{Key: "revoked_at", Val: strictjson.StringValue(at)},
		))
	}
	doc = append(doc,
		strictjson.Member{Key: "expires_at", Val: strictjson.StringValue(expires)},
		strictjson.Member{Key: "issued_at", Val: strictjson.StringValue(issued)},
		strictjson.Member{Key: "revoked", Val: strictjson.ArrayValue(entries...)},
	)
	if len(r.Cards) > 0 {
		cards, err := cardEntries(r.Cards)
		if err != nil {
			return nil, err
		}
		doc = append(doc, strictjson.Member{Key: "revoked_cards", Val: strictjson.ArrayValue(cards...)})
	}
	doc = append(doc, strictjson.Member{Key: "sequence", Val: strictjson.IntValue(r.Sequence)})
	return strictjson.ObjectValue(doc...).JCS()
}

// cardEntries renders "revoked_cards", sorted by canonical SHA-256.
func cardEntries(cards []CardRevocation) ([]strictjson.Value, error) {
	sorted := slices.Clone(cards)
	slices.SortFunc(sorted, func(a, b CardRevocation) int { return bytes.Compare(a.CanonicalSHA256, b.CanonicalSHA256) })
	out := make([]strictjson.Value, 0, len(sorted))
	for i, c := range sorted {
		if len(c.CanonicalSHA256) != 32 {
			return nil, fmt.Errorf("revoked card %q: canonical SHA-256 is %d bytes, want 32", c.AgentID, len(c.CanonicalSHA256))
		}
		if i > 0 && bytes.Equal(sorted[i-1].CanonicalSHA256, c.CanonicalSHA256) {
			return nil, fmt.Errorf("revoked card %x listed twice", c.CanonicalSHA256)
		}
		if !utf8.ValidString(c.AgentID) || !utf8.ValidString(c.Reason) || c.Version < 0 || c.Version > maxSequence {
			return nil, fmt.Errorf("revoked card %x: agent id, version or reason invalid", c.CanonicalSHA256)
		}
		at, err := formatTime(c.RevokedAt)
		if err != nil {
			return nil, fmt.Errorf("revoked card %x: revoked_at: %w", c.CanonicalSHA256, err)
		}
		out = append(out, strictjson.ObjectValue(
			strictjson.Member{Key: "agent_id", Val: strictjson.StringValue(c.AgentID)},
			strictjson.Member{Key: "canonical_sha256", Val: strictjson.StringValue(hex.EncodeToString(c.CanonicalSHA256))},
			strictjson.Member{Key: "reason", Val: strictjson.StringValue(c.Reason)},
			strictjson.Member{Key: "revoked_at", Val: strictjson.StringValue(at)},
			strictjson.Member{Key: "version", Val: strictjson.IntValue(c.Version)},
		))
	}
	return out, nil
}

// stringObject returns an object of string members, in the order given.
func stringObject(kv ...string) strictjson.Value {
	members := make([]strictjson.Member, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		members = append(members, strictjson.Member{Key: kv[i], Val: strictjson.StringValue(kv[i+1])})
	}
	return strictjson.ObjectValue(members...)
}

// SignRevocations serializes r as RFC 8785 JSON
//
//	{"audit_head":{"hash","seq"},"expires_at","issued_at","revoked":[{"kid","reason","revoked_at"}],
//	 "revoked_cards":[{"agent_id","canonical_sha256","reason","revoked_at","version"}],"sequence"}
//
// ("audit_head" only when r.AuditHead is set: hash in lowercase hex;
// "revoked_cards" only when r.Cards is not empty, sorted by canonical_sha256)
// with times in RFC 3339 UTC at whole-second precision (see formatTime) and
// entries sorted by kid, and signs it with s as a flattened JWS JSON object
// {"payload","protected","signature"} whose protected header is
// {"alg","kid","typ":"cardsign-revocations+jws"} (RFC 8785, so sorted). The
// same r, key and kid always give the same payload and protected bytes.
// jose.Sign verifies the signature before it is returned.
func SignRevocations(ctx context.Context, r Revocations, s crypto.Signer, alg jose.Alg, kid string) ([]byte, error) {
	if kid == "" {
		return nil, errors.New("jwks: sign revocations: empty kid")
	}
	if _, err := jose.ParseAlg(string(alg)); err != nil {
		return nil, fmt.Errorf("jwks: sign revocations: %w", err)
	}
	payload, err := revocationsPayload(r)
	if err != nil {
		return nil, fmt.Errorf("jwks: sign revocations: %w", err)
	}
	protected, err := stringObject("alg", string(alg), "kid", kid, "typ", RevocationsType).JCS()
	if err != nil {
		return nil, fmt.Errorf("jwks: sign revocations: protected header: %w", err)
	}
	enc := base64.RawURLEncoding
	p64, h64 := enc.EncodeToString(payload), enc.EncodeToString(protected)
	sig, err := jose.Sign(ctx, s, alg, []byte(h64+"."+p64))
	if err != nil {
		return nil, fmt.Errorf("jwks: sign revocations with key %q: %w", kid, err)
	}
	// The flattened JWS JSON serialization (RFC 7515 §7.2.2) without an
	// unprotected header: everything that matters is signed.
	out, err := stringObject("payload", p64, "protected", h64, "signature", enc.EncodeToString(sig)).JCS()
	if err != nil {
		return nil, fmt.Errorf("jwks: sign revocations: %w", err)
	}
	return out, nil
}

// parseAuditHead reads the "audit_head" member as strictly as the rest of
// the document: exactly "hash" (64 lowercase hex digits, as written) and
// "seq" (an integer in 0..2^53-1).
func parseAuditHead(m strictjson.Value) (*AuditHead, error) {
	if m.Kind != strictjson.Object {
		return nil, fmt.Errorf("audit_head: want a JSON object, not %s", m.Kind)
	}
	if err := m.ExactMembers("hash", "seq"); err != nil {
		return nil, fmt.Errorf("audit_head: %w", err)
	}
	seq, err := integerOf(m, "seq")
	if err != nil {
		return nil, fmt.Errorf("audit_head: %w", err)
	}
	text, err := stringOf(m, "hash")
	if err != nil {
		return nil, fmt.Errorf("audit_head: %w", err)
	}
	hash, err := hex.DecodeString(text)
	if err != nil || len(hash) != auditHeadHashSize || hex.EncodeToString(hash) != text {
		return nil, fmt.Errorf(`audit_head: member "hash" is not %d lowercase hex digits`, 2*auditHeadHashSize)
	}
	return &AuditHead{Seq: seq, Hash: hash}, nil
}
