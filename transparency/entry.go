package transparency

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/strictjson"
	"golang.org/x/mod/sumdb/tlog"
)

// EntryVersion is the V of every Entry this package writes.
const EntryVersion = 1

// MaxEntryBytes bounds an encoded entry: C2SP tlog-tiles entry bundles
// prefix each entry with a 16-bit length.
const MaxEntryBytes = 1<<16 - 1

// maxField bounds each free-text field of an entry (caller, card name and
// version, kid): an entry must fit MaxEntryBytes whatever a card says.
// Longer text is cut at a character boundary and ends in "…".
const maxField = 512

// MaxHosts bounds the hosts an entry lists (the first ones, sorted).
const MaxHosts = 32

// Entry is a leaf of the log: what anyone may learn about one audit record.
// It names the card (name, version, the hosts its interfaces point at and
// the SHA-256 of its canonical bytes), who asked, and the signature, and it
// binds the whole audit record through its hash (Record), so the record's
// other fields (request id, provenance, a refusal's reason) are committed to
// without being published.
type Entry struct {
	V         int       `json:"v"`
	Seq       int64     `json:"seq"`
	Time      string    `json:"time"` // RFC 3339, UTC, nine fractional digits
	Outcome   string    `json:"outcome"`
	Caller    string    `json:"caller"`
	Card      EntryCard `json:"card"`
	KID       string    `json:"kid,omitempty"`
	Alg       string    `json:"alg,omitempty"`
	Profile   string    `json:"profile,omitempty"`
	Signature string    `json:"signature,omitempty"` // base64url, as in the card
	Record    string    `json:"record"`              // hex audit.Record.Hash
}

// EntryCard is what an entry says about the card.
type EntryCard struct {
	Name    string   `json:"name"`
	Version string   `json:"version,omitempty"`
	SHA256  string   `json:"sha256"` // hex, spec-profile canonical bytes
	Hosts   []string `json:"hosts,omitempty"`
}

// NewEntry is the entry of a committed audit record (Seq and Hash set) of a
// card whose interfaces point at hosts (CardHosts).
func NewEntry(rec audit.Record, hosts []string) Entry {
	outcome := rec.Outcome
	if outcome == "" {
		outcome = audit.OutcomeSigned
	}
	hosts = normalHosts(hosts)
	caller, name := rec.Caller, rec.CardName
	if rec.Sealed != nil {
		// A private agent's: hosts are commitments already (SealRecord).
		caller, name = rec.Sealed.Caller, rec.Sealed.CardName
	}
	return Entry{
		V:       EntryVersion,
		Seq:     rec.Seq,
		Time:    rec.Time.UTC().Format(timeLayout),
		Outcome: outcome,
		Caller:  clip(caller),
		Card: EntryCard{
			Name:    clip(name),
			Version: clip(rec.CardVersion),
			SHA256:  hex.EncodeToString(rec.CanonicalSHA256),
			Hosts:   hosts,
		},
		KID:       clip(rec.KID),
		Alg:       rec.Alg,
		Profile:   rec.Profile,
		Signature: rec.Signature,
		Record:    hex.EncodeToString(rec.Hash),
	}
}

// timeLayout is audit's: fixed width, so an entry has one encoding.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// Marshal encodes e: compact JSON, members in the order of the struct,
// empty optional members left out, strings escaped only where JSON requires
// (quote, backslash, control characters). The encoding is a function of e,
// so an entry can be rebuilt from its audit record and compared byte for
// byte. It is written by hand, not with encoding/json: it runs twice per
// signature on the signing path.
func (e Entry) Marshal() []byte {
	b := make([]byte, 0, 512+len(e.Signature))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(e.V), 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = appendMember(b, "time", e.Time, false)
	b = appendMember(b, "outcome", e.Outcome, false)
	b = appendMember(b, "caller", e.Caller, false)
	b = append(b, `,"card":{"name":`...)
	b = appendString(b, e.Card.Name)
	b = appendMember(b, "version", e.Card.Version, true)
	b = appendMember(b, "sha256", e.Card.SHA256, false)
	if len(e.Card.Hosts) > 0 {
		b = append(b, `,"hosts":[`...)
		for i, h := range e.Card.Hosts {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, h)
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	b = appendMember(b, "kid", e.KID, true)
	b = appendMember(b, "alg", e.Alg, true)
	b = appendMember(b, "profile", e.Profile, true)
	b = appendMember(b, "signature", e.Signature, true)
	b = appendMember(b, "record", e.Record, false)
	return append(b, '}')
}

// appendMember appends ,"name":"value", or nothing for an empty value when
// the member is optional.
func appendMember(b []byte, name, value string, optional bool) []byte {
	if optional && value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, value)
}

// appendString appends s as a JSON string (invalid UTF-8, which no audit
// record holds, as U+FFFD: an entry is always valid JSON).
func appendString(b []byte, s string) []byte {
	if !utf8.ValidString(s) { // utf8.ValidString is the fast check: entries are written on the signing path
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strictjson.AppendString(b, s)
}

// LeafHash is the RFC 6962 leaf hash of an encoded entry.
func LeafHash(entry []byte) tlog.Hash { return tlog.RecordHash(entry) }

// ParseEntry decodes an encoded entry and checks that it is one: version 1,
// no unknown members, and encoded exactly as Marshal encodes it (an entry
// has one encoding, so what a monitor prints is what was hashed).
func ParseEntry(b []byte) (Entry, error) {
	if len(b) > MaxEntryBytes {
		return Entry{}, fmt.Errorf("transparency: entry of %d bytes, over the limit of %d", len(b), MaxEntryBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var e Entry
	if err := dec.Decode(&e); err != nil {
		return Entry{}, fmt.Errorf("transparency: entry: %w", err)
	}
	if e.V != EntryVersion {
		return Entry{}, fmt.Errorf("transparency: entry version %d, want %d", e.V, EntryVersion)
	}
	if !bytes.Equal(e.Marshal(), b) {
		return Entry{}, errors.New("transparency: entry is not in its canonical encoding")
	}
	return e, nil
}

// Kind is the kind of the audit record e logs: its outcome, "signed" or
// "refused" for a signing request, the action for an administrative record
// ("key.revoke", "agent.remove", ...: audit.Kind). An administrative
// record's entry names the caller, the kid and alg of a key (card.sha256:
// the key's RFC 7638 thumbprint) or the card's SHA-256 for a registry
// action, and no card name, hosts or agent id; the rest of the record
// (reason, detail) is bound by its hash, not published.
func (e Entry) Kind() audit.Kind {
	if e.Outcome == "" {
		return audit.KindSigned
	}
	return audit.Kind(e.Outcome)
}

// Index is the entry's leaf index: Seq - 1.
func (e Entry) Index() int64 { return e.Seq - 1 }

// clip cuts s to maxField bytes at a character boundary, marking the cut.
func clip(s string) string {
	if len(s) <= maxField {
		return s
	}
	const mark = "…"
	cut := maxField - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
