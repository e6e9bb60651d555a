package events

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/cardsign/cardsign/audit"
)

var testBuilder = Builder{Source: "urn:cardsign:test/log", ResignCaller: "cardsignd/resign", CatalogProfile: "ai-catalog"}

// chain returns recs with their Seq, PrevHash and Hash set as a store sets
// them.
func chain(recs ...audit.Record) []audit.Record {
	prev := audit.Genesis()
	for i := range recs {
		recs[i].Seq = int64(i + 1)
		recs[i].PrevHash = prev
		recs[i].Hash = recs[i].ComputeHash(prev)
		prev = recs[i].Hash
	}
	return recs
}

func digest(s string) []byte { d := sha256.Sum256([]byte(s)); return d[:] }

// sampleRecords is one record of every kind, and the type each becomes.
func sampleRecords() ([]audit.Record, []string) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	key := audit.EncodeKeyState(audit.KeyState{CreatedAt: at, PublishAt: at})
	agent := audit.EncodeAgentDetail(audit.AgentDetail{Agent: "orders", Version: 2})
	apr := audit.EncodeApprovalDetail(audit.ApprovalDetail{ID: "apr_" + strings.Repeat("a", 26), Rule: "new-host", Agent: "orders",
		Approvals: 1, Required: 2, Expires: audit.ApprovalExpiry(at.Add(time.Hour))})
	signed := audit.Record{Time: at, Caller: "oidc:repo:acme/orders", RequestID: "r1", CardName: "Orders <EU>", CardVersion: "2",
		CanonicalSHA256: digest("card"), KID: "k1", Alg: "ES256", Profile: "spec", Signature: "c2ln", Hosts: []string{"orders.example.com"},
		Provenance: audit.EncodeProvenance(map[string]string{"repository": "acme/orders"})}
	resigned := signed
	resigned.Caller = "cardsignd/resign"
	catalog := signed
	catalog.Caller, catalog.Profile = "cardsignd/catalog", "ai-catalog"
	refused := audit.Record{Time: at, Caller: "token:ci", CardName: "Orders", CanonicalSHA256: digest("card"), Outcome: "refused", Reason: "host evil.example is not allowed"}
	byType := map[string]audit.Record{TypeCardSigned: signed, TypeCardResigned: resigned, TypeCatalogSigned: catalog, TypeCardRefused: refused}
	for k, typ := range map[audit.Kind]string{audit.KindKeyCreate: TypeKeyCreated, audit.KindKeyImport: TypeKeyImported,
		audit.KindKeyRotate: TypeKeyRotated, audit.KindKeyActivate: TypeKeyActivated, audit.KindKeyRetire: TypeKeyRetired,
		audit.KindKeyRevoke: TypeKeyRevoked, audit.KindKeyHold: TypeKeyHeld, audit.KindKeyBaseline: TypeKeyBaseline} {
		byType[typ] = audit.Record{Time: at, Caller: "token:admin", KID: "k2", Alg: "ES256", CanonicalSHA256: digest("k2"), Outcome: string(k), Detail: key}
	}
	for k, typ := range map[audit.Kind]string{audit.KindAgentRemove: TypeAgentRemoved, audit.KindCardRevoke: TypeCardRevoked} {
		byType[typ] = audit.Record{Time: at, Caller: "token:admin", CardName: "Orders", CardVersion: "2", CanonicalSHA256: digest("card"), Outcome: string(k), Detail: agent, Reason: "compromised"}
	}
	for k, typ := range map[audit.Kind]string{audit.KindApprovalRequest: TypeApprovalRequested, audit.KindApprovalApprove: TypeApprovalApproved, audit.KindApprovalDeny: TypeApprovalDenied} {
		r := audit.Record{Time: at, Caller: "token:alice", CanonicalSHA256: digest("card"), Outcome: string(k), Detail: apr}
		if k == audit.KindApprovalRequest {
			r.CardName, r.CardVersion = "Orders", "2"
		}
		byType[typ] = r
	}
	// In the order of Types, so the chain (and the README's examples) are
	// the same at every run.
	var recs []audit.Record
	types := Types()
	for _, typ := range types {
		recs = append(recs, byType[typ])
	}
	return chain(recs...), types
}

// TestEventOfEveryKind: every kind of record becomes its type, a valid
// CloudEvent (the CloudEvents SDK reads and validates it) whose data is the
// whole record.
func TestEventOfEveryKind(t *testing.T) {
	recs, types := sampleRecords()
	seen := map[string]bool{}
	for i, r := range recs {
		if err := r.CheckOutcome(); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		m := testBuilder.Message(r)
		if m.Type != types[i] {
			t.Errorf("record %d (%s): type %s, want %s", i, r.Kind(), m.Type, types[i])
		}
		seen[m.Type] = true
		var ce cloudevents.Event
		if err := json.Unmarshal(m.JSON, &ce); err != nil {
			t.Fatalf("%s: the CloudEvents SDK cannot read %s: %v", m.Type, m.JSON, err)
		}
		if err := ce.Validate(); err != nil {
			t.Fatalf("%s: not a valid CloudEvent: %v", m.Type, err)
		}
		if ce.ID() != fmt.Sprintf("%x", r.Hash) || ce.Source() != testBuilder.Source || ce.SpecVersion() != "1.0" ||
			ce.Extensions()["sequence"] != fmt.Sprintf("%020d", r.Seq) || !ce.Time().Equal(r.Time) {
			t.Fatalf("%s: attributes %s", m.Type, ce.String())
		}
		var e Event
		if err := json.Unmarshal(m.JSON, &e); err != nil {
			t.Fatal(err)
		}
		d := e.Data
		if d.Seq != r.Seq || d.Hash != fmt.Sprintf("%x", r.Hash) || d.PrevHash != fmt.Sprintf("%x", r.PrevHash) || d.Caller != r.Caller || d.Kind != string(r.Kind()) {
			t.Fatalf("%s: data %+v does not carry the record", m.Type, d)
		}
		if r.Detail != "" && string(d.Detail) != r.Detail {
			t.Fatalf("%s: detail %s, want %s", m.Type, d.Detail, r.Detail)
		}
		switch {
		case r.Kind().IsKey():
			if e.Subject != "k2" || d.Key == nil || d.Key.Thumbprint != fmt.Sprintf("%x", digest("k2")) || d.Card != nil {
				t.Fatalf("%s: subject %q key %+v card %+v", m.Type, e.Subject, d.Key, d.Card)
			}
		case r.Kind().IsApproval():
			if e.Subject != "apr_"+strings.Repeat("a", 26) {
				t.Fatalf("%s: subject %q, want the approval id", m.Type, e.Subject)
			}
		case r.Kind().IsRegistry():
			if e.Subject != "orders" {
				t.Fatalf("%s: subject %q, want the agent", m.Type, e.Subject)
			}
		default:
			if e.Subject != r.CardName || d.Card.CanonicalSHA256 != fmt.Sprintf("%x", digest("card")) {
				t.Fatalf("%s: subject %q card %+v", m.Type, e.Subject, d.Card)
			}
		}
	}
	for _, typ := range Types() {
		if !seen[typ] {
			t.Errorf("no record became %s", typ)
		}
	}
	// HTML is not escaped; provenance is an object.
	m := testBuilder.Message(recs[0])
	if !strings.Contains(string(m.JSON), `"Orders <EU>"`) || !strings.Contains(string(m.JSON), `"provenance":{"repository":"acme/orders"}`) {
		t.Fatalf("signed event: %s", m.JSON)
	}
}

func TestFilter(t *testing.T) {
	for _, tt := range []struct {
		patterns []string
		typ      string
		want     bool
	}{
		{nil, TypeCardSigned, true},
		{[]string{"dev.cardsign.key.*"}, TypeKeyRevoked, true},
		{[]string{"dev.cardsign.key.*"}, TypeCardSigned, false},
		{[]string{"dev.cardsign.card.refused", "dev.cardsign.approval.*"}, TypeApprovalDenied, true},
		{[]string{"*"}, TypeMonitorAlarm, true},
	} {
		f, err := NewFilter(tt.patterns)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Match(tt.typ); got != tt.want {
			t.Errorf("%v matches %s: %v, want %v", tt.patterns, tt.typ, got, tt.want)
		}
	}
	for _, bad := range [][]string{{"dev.cardsign.keys.*"}, {""}, {"card.signed"}, {"\xff"}} {
		if _, err := NewFilter(bad); err == nil || !strings.Contains(err.Error(), "types[0]") {
			t.Errorf("NewFilter(%q): %v, want an error naming types[0]", bad, err)
		}
	}
}

func TestCheckpointMessage(t *testing.T) {
	note := []byte("cardsign.example.com/log\n42\nq6xh2Tz8yqlQ5hRaaEUq4rS1xFq4t6s7vY0p1l2m3n4=\n\n\u2014 cardsign.example.com/log abcd\n")
	m := testBuilder.CheckpointMessage(42, note, time.Unix(1764400000, 0))
	var ce cloudevents.Event
	if err := json.Unmarshal(m.JSON, &ce); err != nil || ce.Validate() != nil {
		t.Fatalf("not a valid CloudEvent: %s (%v)", m.JSON, err)
	}
	var e struct{ Data CheckpointData }
	if err := json.Unmarshal(m.JSON, &e); err != nil {
		t.Fatal(err)
	}
	if m.ID != "cardsign.example.com/log/checkpoint/42" || m.Type != TypeLogCheckpoint || m.Seq != 42 ||
		e.Data.Origin != "cardsign.example.com/log" || e.Data.Size != 42 || e.Data.Checkpoint != string(note) || e.Data.RootHash == "" {
		t.Fatalf("checkpoint event %+v: %s", m, m.JSON)
	}
}
