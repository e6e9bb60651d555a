package events

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cardsign/cardsign/audit"
)

// SpecVersion is the CloudEvents version events are written in.
const SpecVersion = "1.0"

// ContentType is a structured-mode event's media type, and BatchContentType
// a batch's (a JSON array of events).
const (
	ContentType      = "application/cloudevents+json"
	BatchContentType = "application/cloudevents-batch+json"
)

// The event types. Every type starts with TypePrefix, so a filter of
// "dev.cardsign.*" takes them all.
const (
	TypePrefix = "dev.cardsign."

	TypeCardSigned    = "dev.cardsign.card.signed"    // a card was signed for a caller
	TypeCardResigned  = "dev.cardsign.card.resigned"  // the registry re-signed a live card (key rotation, expiry)
	TypeCardRefused   = "dev.cardsign.card.refused"   // the signing policy refused a card
	TypeCatalogSigned = "dev.cardsign.catalog.signed" // an AI Catalog Trust Manifest was signed

	TypeKeyCreated   = "dev.cardsign.key.created"   // a key was made at its backend
	TypeKeyImported  = "dev.cardsign.key.imported"  // an existing backend key was recorded
	TypeKeyRotated   = "dev.cardsign.key.rotated"   // a key was made and scheduled to activate
	TypeKeyActivated = "dev.cardsign.key.activated" // a pending key became the signer
	TypeKeyRetired   = "dev.cardsign.key.retired"   // a key stopped signing
	TypeKeyRevoked   = "dev.cardsign.key.revoked"   // a key was unpublished for good
	TypeKeyHeld      = "dev.cardsign.key.held"      // a retired key kept published while live cards carry it
	TypeKeyBaseline  = "dev.cardsign.key.baseline"  // a key made before key records existed, recorded as it stood

	TypeAgentRemoved = "dev.cardsign.agent.removed" // every version of an agent was deleted from the registry
	TypeCardRevoked  = "dev.cardsign.card.revoked"  // one registered card was revoked

	TypeApprovalRequested = "dev.cardsign.approval.requested" // a signature was held for approval
	TypeApprovalApproved  = "dev.cardsign.approval.approved"  // an approver approved it
	TypeApprovalDenied    = "dev.cardsign.approval.denied"    // an approver denied it

	// TypeLogCheckpoint is not an audit record's: once a sink caught up
	// (at most every Options.CheckpointEvery), the transparency log's signed
	// checkpoint of the tree up to its cursor, so a consumer can check each
	// event's inclusion (its data.seq is its leaf index plus one) against a
	// signed tree head.
	TypeLogCheckpoint = "dev.cardsign.log.checkpoint"

	// The monitor's types are not audit records': cardsign log monitor
	// --webhook sends them for what it finds: an entry for a watched name
	// or host, and an alarm (a log not consistent with what it showed
	// before, a checkpoint without its witnesses' quorum).
	TypeMonitorMatch = "dev.cardsign.monitor.match"
	TypeMonitorAlarm = "dev.cardsign.monitor.alarm"
)

// kindTypes maps each audit kind to its event type; signed records are
// told apart by Builder.typeOf.
var kindTypes = map[audit.Kind]string{
	audit.KindRefused:         TypeCardRefused,
	audit.KindKeyCreate:       TypeKeyCreated,
	audit.KindKeyImport:       TypeKeyImported,
	audit.KindKeyRotate:       TypeKeyRotated,
	audit.KindKeyActivate:     TypeKeyActivated,
	audit.KindKeyRetire:       TypeKeyRetired,
	audit.KindKeyRevoke:       TypeKeyRevoked,
	audit.KindKeyHold:         TypeKeyHeld,
	audit.KindKeyBaseline:     TypeKeyBaseline,
	audit.KindAgentRemove:     TypeAgentRemoved,
	audit.KindCardRevoke:      TypeCardRevoked,
	audit.KindApprovalRequest: TypeApprovalRequested,
	audit.KindApprovalApprove: TypeApprovalApproved,
	audit.KindApprovalDeny:    TypeApprovalDenied,
}

// Types returns every type an audit record becomes, in a fixed order.
func Types() []string {
	return []string{TypeCardSigned, TypeCardResigned, TypeCardRefused, TypeCatalogSigned,
		TypeKeyCreated, TypeKeyImported, TypeKeyRotated, TypeKeyActivated, TypeKeyRetired, TypeKeyRevoked,
		TypeKeyHeld, TypeKeyBaseline, TypeAgentRemoved, TypeCardRevoked,
		TypeApprovalRequested, TypeApprovalApproved, TypeApprovalDenied}
}

// Event is one CloudEvents 1.0 event in structured JSON mode. Sequence is
// the CloudEvents sequence extension: the audit record's Seq in decimal,
// zero-padded to 20 digits, so that the strings sort as the numbers do (the
// extension compares them lexicographically); data.seq is the number.
type Event struct {
	SpecVersion     string `json:"specversion"`
	ID              string `json:"id"`
	Source          string `json:"source"`
	Type            string `json:"type"`
	Subject         string `json:"subject,omitempty"`
	Time            string `json:"time"`
	DataContentType string `json:"datacontenttype"`
	Sequence        string `json:"sequence"`
	Data            Data   `json:"data"`
}

// Data is an event's data: the audit record, every field of it, in JSON.
type Data struct {
	Seq       int64  `json:"seq"`
	Hash      string `json:"hash"`      // hex SHA-256 (audit.Record.ComputeHash)
	PrevHash  string `json:"prev_hash"` // hex; the record before's Hash
	Kind      string `json:"kind"`      // the audit kind (signed, refused, key.create, ...)
	Time      string `json:"time"`      // the record's time, nine fractional digits, as hashed
	Caller    string `json:"caller"`
	RequestID string `json:"request_id,omitempty"`
	// Card is the card signed or refused, the card revoked or removed, or
	// the card held for approval. For a key record, CanonicalSHA256 is the
	// key's RFC 7638 thumbprint and appears as Key.Thumbprint instead.
	Card *Card `json:"card,omitempty"`
	// Key is the key that signed, or the key a key record is about.
	Key *Key `json:"key,omitempty"`
	// Profile and Signature: the signature made (signed records).
	Profile   string `json:"profile,omitempty"`
	Signature string `json:"signature,omitempty"`
	// Reason: why a card was refused; the caller's reason for a key or
	// registry action or a vote; the rule's message for an approval
	// request.
	Reason string `json:"reason,omitempty"`
	// Provenance: what the caller's OIDC identity token said about the
	// pipeline run (issuer, subject, repository, ref, sha, run id, ...).
	Provenance map[string]string `json:"provenance,omitempty"`
	// Detail: what an administrative record states (the key's state after
	// the action, the agent, the approval), as stored and hashed.
	Detail json.RawMessage `json:"detail,omitempty"`
	// Private: the card's agent is private, and its transparency-log entry
	// shows commitments instead of its caller, name and hosts. The event
	// shows the values: it goes to the organisation's own sinks.
	Private bool `json:"private,omitempty"`
}

// Card is the card a record is about.
type Card struct {
	Name            string   `json:"name,omitempty"`
	Version         string   `json:"version,omitempty"`
	CanonicalSHA256 string   `json:"canonical_sha256,omitempty"` // hex
	Hosts           []string `json:"hosts,omitempty"`
}

// Key is the key a record names.
type Key struct {
	KID        string `json:"kid"`
	Alg        string `json:"alg,omitempty"`
	Thumbprint string `json:"thumbprint,omitempty"` // hex SHA-256, RFC 7638 (key records)
}

// Builder makes events of audit records.
type Builder struct {
	// Source is every event's source attribute (a URI reference).
	Source string
	// ResignCaller is the caller of the registry's own re-signatures
	// (registry.ResignCaller): their records become card.resigned.
	ResignCaller string
	// CatalogProfile is the profile of AI Catalog signatures
	// (catalog.Profile): their records become catalog.signed.
	CatalogProfile string
}

// TypeOf returns the event type of r.
func (b Builder) TypeOf(r audit.Record) string {
	k := r.Kind()
	if k != audit.KindSigned {
		if t, ok := kindTypes[k]; ok {
			return t
		}
		return TypePrefix + string(k) // a kind added to audit before it is added here
	}
	switch {
	case b.CatalogProfile != "" && r.Profile == b.CatalogProfile:
		return TypeCatalogSigned
	case b.ResignCaller != "" && r.Caller == b.ResignCaller:
		return TypeCardResigned
	}
	return TypeCardSigned
}

// ID returns the event id of r: its hash, in hex. It is the same whoever
// delivers it, however often.
func ID(r audit.Record) string { return hex.EncodeToString(r.Hash) }

// Event returns the event of r.
func (b Builder) Event(r audit.Record) Event {
	k := r.Kind()
	d := Data{
		Seq: r.Seq, Hash: hex.EncodeToString(r.Hash), PrevHash: hex.EncodeToString(r.PrevHash), Kind: string(k),
		Time: r.Time.UTC().Format("2006-01-02T15:04:05.000000000Z"), Caller: r.Caller, RequestID: r.RequestID,
		Profile: r.Profile, Signature: r.Signature, Reason: r.Reason, Private: r.Sealed != nil,
	}
	if p, err := audit.DecodeProvenance(r.Provenance); err == nil {
		d.Provenance = p
	}
	if r.Detail != "" && json.Valid([]byte(r.Detail)) {
		d.Detail = json.RawMessage(r.Detail)
	}
	subject := r.CardName
	switch {
	case k.IsKey():
		d.Key = &Key{KID: r.KID, Alg: r.Alg, Thumbprint: hex.EncodeToString(r.CanonicalSHA256)}
		subject = r.KID
	default:
		d.Card = &Card{Name: r.CardName, Version: r.CardVersion, Hosts: r.Hosts}
		if len(r.CanonicalSHA256) > 0 {
			d.Card.CanonicalSHA256 = hex.EncodeToString(r.CanonicalSHA256)
		}
		if r.KID != "" {
			d.Key = &Key{KID: r.KID, Alg: r.Alg}
		}
		if k.IsApproval() {
			if a, err := audit.DecodeApprovalDetail(r.Detail); err == nil {
				subject = a.ID
			}
		} else if k.IsRegistry() {
			if a, err := audit.DecodeAgentDetail(r.Detail); err == nil {
				subject = a.Agent
			}
		}
	}
	return Event{
		SpecVersion: SpecVersion, ID: ID(r), Source: b.Source, Type: b.TypeOf(r), Subject: subject,
		Time: r.Time.UTC().Format(time.RFC3339Nano), DataContentType: "application/json",
		Sequence: fmt.Sprintf("%020d", r.Seq), Data: d,
	}
}

// Marshal renders e as compact JSON, without HTML escaping (a card's name
// with "<" stays readable).
func Marshal(e Event) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(e) // strings, integers, a map of strings and valid raw JSON: it cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Message is an event ready for a sink: its id, type, sequence number and
// time, and its JSON.
type Message struct {
	ID   string
	Type string
	Seq  int64
	Time time.Time
	JSON []byte
}

// Message returns the message of r.
func (b Builder) Message(r audit.Record) Message {
	e := b.Event(r)
	return Message{ID: e.ID, Type: e.Type, Seq: r.Seq, Time: r.Time, JSON: Marshal(e)}
}

// otherEvent is an event that is not an audit record's.
type otherEvent struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject,omitempty"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`
}

// Other returns the message of an event that is not an audit record's
// (cardsign log monitor's): data is its JSON.
func Other(source, typ, id, subject string, at time.Time, data json.RawMessage) Message {
	e := otherEvent{SpecVersion: SpecVersion, ID: id, Source: source, Type: typ, Subject: subject,
		Time: at.UTC().Format(time.RFC3339Nano), DataContentType: "application/json", Data: data}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(e)
	return Message{ID: id, Type: typ, Time: at, JSON: bytes.TrimSuffix(b.Bytes(), []byte("\n"))}
}

// CheckpointData is a log checkpoint event's data: the checkpoint (a C2SP
// signed note: origin, size and root hash, then the log key's signatures)
// and what it says.
type CheckpointData struct {
	Origin     string `json:"origin"`
	Size       int64  `json:"size"`
	RootHash   string `json:"root_hash"` // base64, as in the note
	Checkpoint string `json:"checkpoint"`
}

// CheckpointMessage returns the event of a signed checkpoint note of size
// leaves: its id is the origin and the size, the same whoever sends it
// (Ed25519 checkpoints are deterministic).
func (b Builder) CheckpointMessage(size int64, note []byte, at time.Time) Message {
	lines := strings.SplitN(string(note), "\n", 4)
	d := CheckpointData{Size: size, Checkpoint: string(note)}
	if len(lines) >= 3 {
		d.Origin, d.RootHash = lines[0], lines[2]
	}
	data, _ := json.Marshal(d)
	m := Other(b.Source, TypeLogCheckpoint, d.Origin+"/checkpoint/"+strconv.FormatInt(size, 10), d.Origin, at, data)
	m.Seq = size // it covers the records up to this one
	return m
}
