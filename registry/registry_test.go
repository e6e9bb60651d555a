package registry

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
)

func TestDeriveAgentID(t *testing.T) {
	for _, tt := range []struct{ url, want, err string }{
		{"https://secure.example.com/a2a", "secure.example.com-a2a", ""},
		{"https://Payments.Example.com:8443/a2a/v1/", "payments.example.com-a2a-v1", ""},
		{"https://agent.example.com", "agent.example.com", ""},
		{"https://agent.example.com/", "agent.example.com", ""},
		{"https://agent.example.com/a%20b/ü", "agent.example.com-a-20b-c3-bc", ""},
		{"https://" + strings.Repeat("a", 200) + ".com/x", strings.Repeat("a", 128), ""},
		{"grpc.example.com:443", "", "no host"},
	} {
		v, err := card.Parse([]byte(`{"supportedInterfaces":[{"url":"`+tt.url+`"}]}`), strictjson.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := DeriveAgentID(v)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %q, %v; want an error saying %q", tt.url, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.url, got, err, tt.want)
		}
		if err == nil && store.CheckAgentID(got) != nil {
			t.Errorf("%s: derived id %q is not a valid agent id", tt.url, got)
		}
	}
	if _, err := DeriveAgentID(strictjson.Value{Kind: strictjson.Object}); err == nil {
		t.Error("a card without interfaces derived an id")
	}
}

// TestQuotas: a new agent beyond registry.max_agents_per_caller or
// registry.max_agents is refused before it is signed, naming the limit; a
// new version of a live agent and the registry's own re-signatures are not.
func TestQuotas(t *testing.T) {
	tr := newTestRegistry(t, func(c *Config) { c.MaxAgents, c.MaxAgentsPerCaller = 3, 2 })
	for _, id := range []string{"a1", "a2"} {
		if _, err := tr.register(t, id, store.Public, "token:a", "k1"); err != nil {
			t.Fatal(err)
		}
	}
	var qe *QuotaError
	if _, err := tr.register(t, "a3", store.Public, "token:a", "k1"); !errors.As(err, &qe) || qe.Limit != "registry.max_agents_per_caller" || qe.Caller != "token:a" {
		t.Fatalf("a third agent of token:a: err = %v, want the per-caller quota", err)
	}
	if _, err := tr.register(t, "a1", store.Public, "token:a", "k1"); err != nil {
		t.Fatalf("a new version of a1: %v", err)
	}
	if _, err := tr.register(t, "b1", store.Public, "token:b", "k1"); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.register(t, "b2", store.Public, "token:b", "k1"); !errors.As(err, &qe) || qe.Limit != "registry.max_agents" || qe.Caller != "" {
		t.Fatalf("a fourth agent: err = %v, want the registry quota", err)
	}
	v := prepared(t, testCard(t)).Loaded.Value
	if _, _, err := tr.Prepare(t.Context(), &Registration{AgentID: "b2", resign: true}, v, ResignCaller); err != nil {
		t.Fatalf("a re-signature: %v", err)
	}
}

// TestPrepare: the settled registration names the agent (derived when not
// given), keeps a known agent's visibility, makes a new one private, and
// seals a private agent's entries unless the log shows them open or there
// is no log.
func TestPrepare(t *testing.T) {
	calls := 0
	seal := func() ([]byte, error) { calls++; return []byte(testSecret), nil }
	tr := newTestRegistry(t, func(c *Config) { c.SealSecret = seal })
	ctx := t.Context()
	v := prepared(t, testCard(t)).Loaded.Value
	derived, err := DeriveAgentID(v)
	if err != nil {
		t.Fatal(err)
	}
	reg, salt, err := tr.Prepare(ctx, &Registration{}, v, "token:a")
	if err != nil || reg.AgentID != derived || reg.Visibility != store.Private || !bytes.Equal(salt, transparency.AgentSalt([]byte(testSecret), derived)) {
		t.Fatalf("a new agent: %+v, salt %x, %v; want %s, private, sealed", reg, salt, err, derived)
	}
	if _, err := tr.register(t, "pub", store.Public, "token:a", "k1"); err != nil {
		t.Fatal(err)
	}
	if reg, salt, err := tr.Prepare(ctx, &Registration{AgentID: "pub"}, v, "token:a"); err != nil || reg.Visibility != store.Public || salt != nil {
		t.Fatalf("a known public agent: %+v, salt %x, %v; want public, no salt", reg, salt, err)
	}
	if _, _, err := tr.Prepare(ctx, &Registration{AgentID: "private-2"}, v, "token:a"); err != nil || calls != 1 {
		t.Fatalf("the seal secret was derived %d times (%v), want once", calls, err)
	}
	var re *RegistrationError
	if _, _, err := tr.Prepare(ctx, &Registration{AgentID: "Bad/Id"}, v, "token:a"); !errors.As(err, &re) {
		t.Fatalf("a bad agent id: err = %v, want a RegistrationError", err)
	}
	for name, edit := range map[string]func(*Config){
		"open":   func(c *Config) { c.SealSecret, c.OpenPrivate = seal, true },
		"no log": nil,
	} {
		tr := newTestRegistry(t, edit)
		if _, salt, err := tr.Prepare(ctx, &Registration{AgentID: "p"}, v, "token:a"); err != nil || salt != nil {
			t.Errorf("%s: salt %x, %v; want none", name, salt, err)
		}
	}
	failing := newTestRegistry(t, func(c *Config) { c.SealSecret = func() ([]byte, error) { return nil, errors.New("no key") } })
	if _, _, err := failing.Prepare(ctx, &Registration{AgentID: "p"}, v, "token:a"); err == nil {
		t.Fatal("a private agent without its seal secret was prepared")
	}
}

// TestRevoke: a revoked card is listed, a private one without its id and
// reason (the document is public); its audit record is committed, sealed
// for a private agent; the revoked cards are read again at once; the
// document's bound is a RevocationsFullError.
func TestRevoke(t *testing.T) {
	tr := newTestRegistry(t, func(c *Config) {
		withLog(c)
		c.KeyRefresh = time.Hour
	})
	ctx := t.Context()
	pub, err := tr.register(t, "pub", store.Public, "token:a", "k1")
	if err != nil {
		t.Fatal(err)
	}
	priv, err := tr.register(t, "priv", store.Private, "token:a", "k1")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got, err := tr.RevokedCards(ctx); err != nil || len(got) != 0 {
			t.Fatalf("revoked before any revocation: %v, %v", got, err)
		}
	}
	if n := tr.agents.reads.Load(); n != 1 {
		t.Fatalf("the revoked cards were read from the store %d times within KeyRefresh, want once", n)
	}
	rev, err := tr.Revoke(ctx, "pub", 0, "key compromise", "token:admin")
	if err != nil || rev.AgentID != "pub" || rev.Version != pub.Version {
		t.Fatalf("revoke pub: %+v, %v", rev, err)
	}
	if rev, err = tr.Revoke(ctx, "priv", 0, "leaked", "token:admin"); err != nil || rev.AgentID != "priv" {
		t.Fatalf("revoke priv: %+v, %v (the admin is told which card)", rev, err)
	}
	got, err := tr.RevokedCards(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("revoked cards after two revocations: %v, %v (the cache was not invalidated)", got, err)
	}
	reads := tr.agents.reads.Load()
	if _, err := tr.RevokedCards(ctx); err != nil || tr.agents.reads.Load() != reads {
		t.Fatalf("the revoked cards were read again within KeyRefresh (%v)", err)
	}
	if got[0].AgentID != "pub" || got[0].Reason != "key compromise" {
		t.Errorf("public card's entry %+v, want its id and reason", got[0])
	}
	if got[1].AgentID != "" || got[1].Reason != "unspecified" || !bytes.Equal(got[1].CanonicalSHA256, priv.CanonicalSHA256) {
		t.Errorf("private card's entry %+v, want no id, reason unspecified", got[1])
	}
	if len(tr.admin) != 2 || tr.admin[0].Caller != "token:admin" || tr.admin[0].Sealed != nil || tr.admin[1].Sealed == nil {
		t.Errorf("committed audit records %+v, want the public one open, the private one sealed", tr.admin)
	}
	if tr.revoked != 2 {
		t.Errorf("CardRevoked called %d times, want 2", tr.revoked)
	}
	if !CardRevoked(got, pub) || !CardRevoked(got, priv) {
		t.Error("CardRevoked does not find the revoked cards")
	}
}

// TestRevokeBound: the revocation document holds MaxRevokedCards cards; a
// revocation beyond them is a RevocationsFullError, and nothing is revoked.
func TestRevokeBound(t *testing.T) {
	tr := newTestRegistry(t, nil)
	ctx := t.Context()
	for _, id := range []string{"last", "over"} {
		if _, err := tr.register(t, id, store.Public, "token:a", "k1"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range MaxRevokedCards - 1 {
		sum := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		rec := audit.Record{Time: time.Now(), Caller: "token:admin", Outcome: string(audit.KindCardRevoke), Reason: "old", CanonicalSHA256: sum[:],
			Detail: audit.EncodeAgentDetail(audit.AgentDetail{Agent: "old", Version: 1})}
		if _, _, err := tr.agents.RevokeCard(ctx, store.CardRevocation{CanonicalSHA256: sum[:], Reason: "old"}, rec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.Revoke(ctx, "last", 0, "the last room", "token:admin"); err != nil {
		t.Fatalf("revoking the last card the document holds: %v", err)
	}
	var full *RevocationsFullError
	if _, err := tr.Revoke(ctx, "over", 0, "beyond", "token:admin"); !errors.As(err, &full) || full.Revoked != MaxRevokedCards {
		t.Fatalf("revoking beyond the bound: err = %v, want RevocationsFullError", err)
	}
	if got, err := tr.RevokedCards(ctx); err != nil || len(got) != MaxRevokedCards {
		t.Fatalf("revoked cards after a revocation beyond the bound: %d, %v; want %d", len(got), err, MaxRevokedCards)
	}
}

// TestRemove: every version goes, with one audit record naming the agent.
func TestRemove(t *testing.T) {
	tr := newTestRegistry(t, nil)
	ctx := t.Context()
	for range 2 {
		if _, err := tr.register(t, "gone", store.Public, "token:a", "k1"); err != nil {
			t.Fatal(err)
		}
	}
	if h, err := tr.History(ctx, "gone"); err != nil || len(h) != 2 || h[0].Version != 2 {
		t.Fatalf("history: %v, %v; want versions 2, 1", h, err)
	}
	if err := tr.Remove(ctx, "gone", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Card(ctx, "gone", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after removal: %v, want not found", err)
	}
	if len(tr.admin) != 1 || tr.admin[0].Outcome != string(audit.KindAgentRemove) || tr.admin[0].Caller != "cardsignd" {
		t.Fatalf("audit records %+v, want one agent removal by the actor", tr.admin)
	}
	var re *RegistrationError
	if err := tr.Remove(ctx, "Bad/Id", ""); !errors.As(err, &re) {
		t.Fatalf("a bad id: %v, want a RegistrationError", err)
	}
}
