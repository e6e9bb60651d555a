package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Kind is what an audit record records: the outcome of a signing request,
// or an administrative action on a key or on the registry. It is stored as
// the record's Outcome, so records written before administrative records
// existed keep their meaning and their hashes. Every kind but KindSigned
// is hashed (ComputeHash's fields 13 and 14), so a record cannot be turned
// into another kind without breaking the chain.
type Kind string

// The kinds of record. A new kind is added here and in Kinds; the stores
// accept any kind that CheckOutcome accepts.
const (
	// KindSigned: a card was signed ("" in Outcome means the same).
	KindSigned Kind = OutcomeSigned
	// KindRefused: the signing policy refused a request.
	KindRefused Kind = OutcomeRefused

	// Key administration. KID and Alg name the key, CanonicalSHA256 holds
	// its public key's RFC 7638 thumbprint, Detail its KeyState after the
	// action (EncodeKeyState), and Reason the caller's reason, if any.
	KindKeyCreate   Kind = "key.create"   // a key made at a backend (the first key included)
	KindKeyImport   Kind = "key.import"   // an existing backend key recorded
	KindKeyRotate   Kind = "key.rotate"   // a key made and scheduled to activate
	KindKeyActivate Kind = "key.activate" // a pending key made the signer
	KindKeyRetire   Kind = "key.retire"   // a key stopped from signing
	KindKeyRevoke   Kind = "key.revoke"   // a key unpublished for good
	KindKeyHold     Kind = "key.hold"     // a retired key kept published while live cards carry it (automatic)
	// KindKeyBaseline: a key that had no key administration record (made
	// by a release before they existed) recorded as it stood at the first
	// start after the upgrade (caller cardsignd). From the first baseline
	// on, every key has a record (store.KeyTrail).
	KindKeyBaseline Kind = "key.baseline"

	// Registry administration. CanonicalSHA256 is the card's, CardName and
	// CardVersion its name and version, Detail the agent (EncodeAgentDetail)
	// and Reason the caller's reason, if any.
	KindAgentRemove Kind = "agent.remove" // every version of an agent deleted
	KindCardRevoke  Kind = "card.revoke"  // one registered card revoked

	// Approvals (signing policy rules whose outcome is require_approval).
	// CanonicalSHA256 is the card's, Caller the requester (approval.request)
	// or the approver, Detail the request after the step
	// (EncodeApprovalDetail) and Reason the rule's message (a request) or
	// the approver's reason. A request also names the card (CardName,
	// CardVersion, sealed in the log for a private agent); a vote does not:
	// its log entry says who voted on which digest, and nothing more.
	KindApprovalRequest Kind = "approval.request" // a signature held for approval
	KindApprovalApprove Kind = "approval.approve" // one approver's approval
	KindApprovalDeny    Kind = "approval.deny"    // an approver's denial, which closes the request
)

// Kinds returns every kind, in the order above.
func Kinds() []Kind {
	return []Kind{KindSigned, KindRefused,
		KindKeyCreate, KindKeyImport, KindKeyRotate, KindKeyActivate, KindKeyRetire, KindKeyRevoke, KindKeyHold,
		KindKeyBaseline, KindAgentRemove, KindCardRevoke,
		KindApprovalRequest, KindApprovalApprove, KindApprovalDeny}
}

// IsKey reports whether k is a key administration kind.
func (k Kind) IsKey() bool {
	switch k {
	case KindKeyCreate, KindKeyImport, KindKeyRotate, KindKeyActivate, KindKeyRetire, KindKeyRevoke, KindKeyHold, KindKeyBaseline:
		return true
	}
	return false
}

// IsRegistry reports whether k is a registry administration kind.
func (k Kind) IsRegistry() bool { return k == KindAgentRemove || k == KindCardRevoke }

// IsApproval reports whether k records a step of an approval request.
func (k Kind) IsApproval() bool {
	return k == KindApprovalRequest || k == KindApprovalApprove || k == KindApprovalDeny
}

// IsAdmin reports whether k records an administrative action rather than a
// signing request.
func (k Kind) IsAdmin() bool { return k.IsKey() || k.IsRegistry() || k.IsApproval() }

// Kind returns the kind of r: its Outcome, with "" read as KindSigned.
func (r Record) Kind() Kind {
	if r.Outcome == "" {
		return KindSigned
	}
	return Kind(r.Outcome)
}

// KeyState is a key record as a key administration record states it after
// the action: its lifecycle times and revocation, everything a store keeps
// of a key but its backend URI (which may carry secrets) and its public key
// (whose thumbprint the record holds). The record's KID and Alg name the
// key. Times are in UTC with nanosecond precision, as the stores keep them.
type KeyState struct {
	CreatedAt    time.Time
	PublishAt    time.Time
	ActivateAt   *time.Time
	RetireAt     *time.Time
	ExpireAt     *time.Time
	RevokedAt    *time.Time
	RevokeReason string
}

// keyStateJSON is KeyState's encoding: members in this order, times in
// timeLayout, absent times left out.
type keyStateJSON struct {
	Created      string `json:"created"`
	Publish      string `json:"publish"`
	Activate     string `json:"activate,omitempty"`
	Retire       string `json:"retire,omitempty"`
	Expire       string `json:"expire,omitempty"`
	Revoked      string `json:"revoked,omitempty"`
	RevokeReason string `json:"revoke_reason,omitempty"`
}

// EncodeKeyState renders s as a record's Detail: compact JSON with members
// in a fixed order and no HTML escaping, so one state has one encoding (it
// is hashed).
func EncodeKeyState(s KeyState) string {
	opt := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(timeLayout)
	}
	return encodeDetail(keyStateJSON{
		Created: s.CreatedAt.UTC().Format(timeLayout), Publish: s.PublishAt.UTC().Format(timeLayout),
		Activate: opt(s.ActivateAt), Retire: opt(s.RetireAt), Expire: opt(s.ExpireAt), Revoked: opt(s.RevokedAt),
		RevokeReason: s.RevokeReason,
	})
}

// DecodeKeyState is the inverse of EncodeKeyState; text EncodeKeyState
// would not have written is refused.
func DecodeKeyState(s string) (KeyState, error) {
	var j keyStateJSON
	if err := decodeDetail(s, &j); err != nil {
		return KeyState{}, fmt.Errorf("audit: key state: %w", err)
	}
	var ks KeyState
	var err error
	parse := func(name, v string) *time.Time {
		if v == "" || err != nil {
			return nil
		}
		t, perr := time.Parse(timeLayout, v)
		if perr != nil {
			err = fmt.Errorf("audit: key state: %s: %w", name, perr)
			return nil
		}
		return &t
	}
	created, publish := parse("created", j.Created), parse("publish", j.Publish)
	ks.ActivateAt, ks.RetireAt, ks.ExpireAt, ks.RevokedAt = parse("activate", j.Activate), parse("retire", j.Retire), parse("expire", j.Expire), parse("revoked", j.Revoked)
	if err != nil {
		return KeyState{}, err
	}
	if created == nil || publish == nil {
		return KeyState{}, errors.New("audit: key state: created and publish are required")
	}
	ks.CreatedAt, ks.PublishAt, ks.RevokeReason = *created, *publish, j.RevokeReason
	if EncodeKeyState(ks) != s {
		return KeyState{}, errors.New("audit: key state is not in the encoding of audit.EncodeKeyState")
	}
	return ks, nil
}

// AgentDetail is what a registry administration record states about the
// agent: its id and the version acted on (0: every version).
type AgentDetail struct {
	Agent   string `json:"agent"`
	Version int64  `json:"version,omitempty"`
}

// EncodeAgentDetail renders d as a record's Detail (compact JSON, fixed
// member order, no HTML escaping).
func EncodeAgentDetail(d AgentDetail) string { return encodeDetail(d) }

// DecodeAgentDetail is the inverse of EncodeAgentDetail; text it would not
// have written is refused.
func DecodeAgentDetail(s string) (AgentDetail, error) {
	var d AgentDetail
	if err := decodeDetail(s, &d); err != nil {
		return AgentDetail{}, fmt.Errorf("audit: agent detail: %w", err)
	}
	if d.Agent == "" {
		return AgentDetail{}, errors.New("audit: agent detail: no agent id")
	}
	if EncodeAgentDetail(d) != s {
		return AgentDetail{}, errors.New("audit: agent detail is not in the encoding of audit.EncodeAgentDetail")
	}
	return d, nil
}

func encodeDetail(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	// Structs of strings and integers cannot fail to encode.
	_ = enc.Encode(v)
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

func decodeDetail(s string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// detailProblem is CheckOutcome's finding about an administrative record's
// kind-specific fields, "" when there is none.
func (r Record) detailProblem(k Kind) string {
	if r.Profile != "" || r.Signature != "" {
		return fmt.Sprintf("a %s record has a profile or signature", k)
	}
	switch {
	case k.IsKey():
		if r.KID == "" || r.Alg == "" {
			return fmt.Sprintf("a %s record names no kid or alg", k)
		}
		if r.CardName != "" || r.CardVersion != "" {
			return fmt.Sprintf("a %s record has a card name or version", k)
		}
		if _, err := DecodeKeyState(r.Detail); err != nil {
			return fmt.Sprintf("a %s record's detail: %v", k, err)
		}
	case k.IsRegistry():
		if r.KID != "" || r.Alg != "" {
			return fmt.Sprintf("a %s record has a kid or alg", k)
		}
		if _, err := DecodeAgentDetail(r.Detail); err != nil {
			return fmt.Sprintf("a %s record's detail: %v", k, err)
		}
	case k.IsApproval():
		if r.KID != "" || r.Alg != "" {
			return fmt.Sprintf("a %s record has a kid or alg", k)
		}
		if _, err := DecodeApprovalDetail(r.Detail); err != nil {
			return fmt.Sprintf("a %s record's detail: %v", k, err)
		}
	}
	return ""
}

// ApprovalDetail is what an approval record states about the request after
// its step: its id, the rule that asked for it, the agent the card is
// registered under ("" when it is not), how many approvals it holds and
// needs, and when it expires.
type ApprovalDetail struct {
	ID        string `json:"id"`
	Rule      string `json:"rule"`
	Agent     string `json:"agent,omitempty"`
	Approvals int    `json:"approvals"`
	Required  int    `json:"required"`
	Expires   string `json:"expires"` // timeLayout, UTC
}

// EncodeApprovalDetail renders d as a record's Detail (compact JSON, fixed
// member order, no HTML escaping).
func EncodeApprovalDetail(d ApprovalDetail) string { return encodeDetail(d) }

// ApprovalExpiry formats an approval's expiry for ApprovalDetail.Expires.
func ApprovalExpiry(t time.Time) string { return t.UTC().Format(timeLayout) }

// DecodeApprovalDetail is the inverse of EncodeApprovalDetail; text it would
// not have written is refused.
func DecodeApprovalDetail(s string) (ApprovalDetail, error) {
	var d ApprovalDetail
	if err := decodeDetail(s, &d); err != nil {
		return ApprovalDetail{}, fmt.Errorf("audit: approval detail: %w", err)
	}
	switch {
	case d.ID == "" || d.Rule == "":
		return ApprovalDetail{}, errors.New("audit: approval detail: no id or rule")
	case d.Required < 1 || d.Approvals < 0 || d.Approvals > d.Required:
		return ApprovalDetail{}, fmt.Errorf("audit: approval detail: %d of %d approvals: want 0 <= approvals <= required and required >= 1", d.Approvals, d.Required)
	}
	if _, err := time.Parse(timeLayout, d.Expires); err != nil {
		return ApprovalDetail{}, fmt.Errorf("audit: approval detail: expires: %w", err)
	}
	if EncodeApprovalDetail(d) != s {
		return ApprovalDetail{}, errors.New("audit: approval detail is not in the encoding of audit.EncodeApprovalDetail")
	}
	return d, nil
}
