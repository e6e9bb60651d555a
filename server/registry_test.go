package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/store"
)

func registryCard(t *testing.T) []byte { return registryCardB(t) }

func registryCardB(t testing.TB) []byte {
	t.Helper()
	b := testsupport.Card(t, "security.json")
	return b
}

// TestSignRegisters: a card signed with a registration is the agent's newest
// version, with the signed bytes returned to the caller; visibility is kept
// across versions unless changed; a bad agent id refuses the card before
// anything is signed.
func TestSignRegisters(t *testing.T) { onBothStores(t, testSignRegisters) }

func testSignRegisters(t *testing.T, a *Authority) {
	ctx := t.Context()
	req := SignRequest{Card: registryCard(t), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"}, RequestID: "r1",
		Registration: &Registration{Visibility: store.Public}}
	first, err := a.Sign(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.Agent == nil || first.Agent.ID != "secure.example.com-a2a" || first.Agent.Version != 1 || first.Agent.Visibility != store.Public {
		t.Fatalf("registered as %+v", first.Agent)
	}
	if !bytes.Equal(first.Agent.Signed, first.Card) || first.Agent.AuditSeq != first.Audit[0].Seq || first.Agent.KIDs[0] != activeKID(t, a) {
		t.Fatalf("the registry holds %+v for a card signed as %s (audit %d)", first.Agent, first.Card, first.Audit[0].Seq)
	}
	req.Registration = &Registration{} // visibility unchanged
	second, err := a.Sign(ctx, req)
	if err != nil || second.Agent.Version != 2 || second.Agent.Visibility != store.Public {
		t.Fatalf("second version: %+v, %v", second.Agent, err)
	}
	got, err := a.registry.Card(ctx, "secure.example.com-a2a", 0)
	if err != nil || !bytes.Equal(got.Signed, second.Card) {
		t.Fatalf("newest card: %+v, %v", got, err)
	}
	if unregistered, err := a.Sign(ctx, SignRequest{Card: registryCard(t), Caller: "token:ci", RequestID: "r3"}); err != nil || unregistered.Agent != nil {
		t.Fatalf("a card signed without registration: %+v, %v", unregistered.Agent, err)
	}
	if h, _ := a.registry.History(ctx, "secure.example.com-a2a"); len(h) != 2 {
		t.Fatalf("history holds %d versions after an unregistered signature, want 2", len(h))
	}
	seq, _, _ := a.store.AuditHead(ctx)
	_, err = a.Sign(ctx, SignRequest{Card: registryCard(t), Caller: "token:ci", RequestID: "r4", Registration: &Registration{AgentID: "Bad/Id"}})
	var re *registry.RegistrationError
	if !errors.As(err, &re) {
		t.Fatalf("a bad agent id: err = %v, want a RegistrationError", err)
	}
	if after, _, _ := a.store.AuditHead(ctx); after != seq {
		t.Fatalf("a card refused for its agent id was signed anyway (audit head %d → %d)", seq, after)
	}
}

// TestAgentCardHTTP: a public card is served to anyone with an ETag and 304;
// a private one only to a reader, and as a 404 to anyone else.
func TestAgentCardHTTP(t *testing.T) {
	a, _ := newAuthority(t)
	ctx := t.Context()
	sign := func(id string, vis store.Visibility) []byte {
		t.Helper()
		s, err := a.Sign(ctx, SignRequest{Card: registryCard(t), Caller: "token:ci", RequestID: id, Registration: &Registration{AgentID: id, Visibility: vis}})
		if err != nil {
			t.Fatal(err)
		}
		return s.Card
	}
	pub := sign("public-agent", store.Public)
	sign("private-agent", store.Private)
	readerTok, signerTok := "reader-token-0123456789", "signer-token-0123456789"
	auth := access.New([]access.Token{
		{Name: "reader", SHA256: sha(readerTok), Roles: []access.Role{access.RoleReader}},
		{Name: "signer", SHA256: sha(signerTok), Roles: []access.Role{access.RoleSigner}},
	}, nil)
	srv := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{Auth: auth}))
	defer srv.Close()
	get := func(path, token, inm string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp, b.Bytes()
	}
	resp, body := get("/agents/public-agent/agent-card.json", "", "")
	if resp.StatusCode != 200 || !bytes.Equal(body, pub) || resp.Header.Get("Cache-Control") != "public, max-age=3600" || resp.Header.Get("ETag") == "" {
		t.Fatalf("public card: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	if r304, b := get("/agents/public-agent/agent-card.json", "", resp.Header.Get("ETag")); r304.StatusCode != 304 || len(b) != 0 {
		t.Fatalf("If-None-Match: %d, %d bytes", r304.StatusCode, len(b))
	}
	for _, tc := range []struct{ name, token string }{{"no credentials", ""}, {"signer only", signerTok}, {"wrong token", "nope-nope-nope"}} {
		if r, _ := get("/agents/private-agent/agent-card.json", tc.token, ""); r.StatusCode != 404 {
			t.Errorf("private card, %s: %d, want 404", tc.name, r.StatusCode)
		}
	}
	// The wrong token is an authentication failure, counted; an anonymous
	// fetch is not.
	if n := counterValue(t, a.metrics, "cardsign_auth_failures_total", "method", "token"); n != 1 {
		t.Errorf("cardsign_auth_failures_total{method=token} = %v after one wrong token, want 1", n)
	}
	if r, b := get("/agents/private-agent/agent-card.json", readerTok, ""); r.StatusCode != 200 || len(b) == 0 || r.Header.Get("Cache-Control") != "private, no-cache" {
		t.Fatalf("private card to a reader: %d %v", r.StatusCode, r.Header)
	}
	for _, path := range []string{"/agents/missing/agent-card.json", "/agents/Bad..Id/agent-card.json", "/agents/../agent-card.json"} {
		if r, _ := get(path, readerTok, ""); r.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", path, r.StatusCode)
		}
	}
}

func sha(tok string) [32]byte { return sha256.Sum256([]byte(tok)) }

// TestRevokeAgentCard: the daemon's own verification refuses a revoked card
// and says why (and so any card with the same content), the revocation
// document lists it, and the registry does not sign it again. (A sibling
// with other content verifies: cmd/cardsign TestAgentsRevokeCard.)
func TestRevokeAgentCard(t *testing.T) { onBothStores(t, testRevokeAgentCard) }

func testRevokeAgentCard(t *testing.T, a *Authority) {
	ctx := t.Context()
	registerAgents(t, a, "payments", "billing")
	if _, err := a.Agents().RevokeAgentCard(ctx, "payments", 0, "  ", "token:admin"); err == nil {
		t.Fatal("a revocation without a reason was accepted")
	}
	if _, err := a.Agents().RevokeAgentCard(ctx, "payments", 0, strings.Repeat("x", 300), "token:admin"); err == nil {
		t.Fatal("a 300-character reason was accepted")
	}
	rev, err := a.Agents().RevokeAgentCard(ctx, "payments", 0, "leaked", "token:admin")
	if err != nil || rev.Version != 1 || rev.AgentID != "payments" {
		t.Fatalf("RevokeAgentCard = %+v, %v", rev, err)
	}
	payments, _ := a.registry.Card(ctx, "payments", 0)
	billing, _ := a.registry.Card(ctx, "billing", 0)
	v, err := a.Verify(ctx, payments.Signed, "")
	// A private agent: the public revocation document (and so this answer)
	// names neither the agent nor the reason; the log does.
	if err != nil || v.Valid(false) || !strings.Contains(v.CardRevoked, "version 1") || strings.Contains(v.CardRevoked, "leaked") || strings.Contains(v.CardRevoked, "payments") {
		t.Fatalf("the revoked private card: valid %v, revoked %q, %v", v.Valid(false), v.CardRevoked, err)
	}
	// Same content, so same canonical SHA-256: billing's card is the same
	// security.json under another id, and is revoked with it.
	if v, _ := a.Verify(ctx, billing.Signed, ""); v.Valid(false) {
		t.Fatal("a card with the same content as a revoked one verifies")
	}
	doc, err := a.revocations.Document(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := testsupport.JWSPayload(t, doc); !strings.Contains(p, `"revoked_cards":[{"agent_id":"","canonical_sha256":"`) || strings.Contains(p, "leaked") {
		t.Fatalf("the revocation document does not list the card: %s", testsupport.JWSPayload(t, doc))
	}
	pendingKey(t, a)
	runDuties(t, a)
	if c, _ := a.registry.Card(ctx, "payments", 0); c.Version != 1 {
		t.Fatalf("the registry signed a revoked card again (version %d)", c.Version)
	}
}

// TestVerifyRevokedCardAsV03 (review #1): VerifyCard refuses a revoked
// card rewritten as v0.3. The registered card C is a2a-python's reading of
// a v0.3 card saying "protocolVersion": "1.0"; once C is revoked, that v0.3
// card carrying C's signatures (which verify over its a2a-python reading)
// is revoked too, though cardsign's reading of it is other bytes.
func TestVerifyRevokedCardAsV03(t *testing.T) { onBothStores(t, testVerifyRevokedCardAsV03) }

func testVerifyRevokedCardAsV03(t *testing.T, a *Authority) {
	ctx := t.Context()
	b := testsupport.Card(t, "v03.json")
	v03src := strings.Replace(string(b), `"protocolVersion": "0.3.0"`, `"protocolVersion": "1.0"`, 1)
	l, err := card.Load([]byte(v03src), card.Options{})
	if err != nil {
		t.Fatal(err)
	}
	python := l.Reading(card.MappingPython)
	if python.Mapping != card.MappingPython {
		t.Fatal("the v0.3 card has no a2a-python reading of its own")
	}
	if _, err := a.Sign(ctx, SignRequest{Card: python.Value.Compact(), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"},
		RequestID: "reg", Registration: &Registration{AgentID: "legacy", Visibility: store.Public}}); err != nil {
		t.Fatal(err)
	}
	c, err := a.registry.Card(ctx, "legacy", 0)
	if err != nil {
		t.Fatal(err)
	}
	v03 := testsupport.WithSignatures(t, []byte(v03src), c.Signed)
	if v, err := a.Verify(ctx, v03, ""); err != nil || !v.Valid(true) || bytes.Equal(v.CanonicalSHA256[:], c.CanonicalSHA256) {
		t.Fatalf("before the revocation, the v0.3 rewrite: %+v, %v (want valid, under another reading than cardsign's)", v, err)
	}
	if _, err := a.Agents().RevokeAgentCard(ctx, "legacy", 0, "leaked", "token:admin"); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"registered card": c.Signed, "v0.3 rewrite": v03} {
		v, err := a.Verify(ctx, data, "")
		if err != nil || v.Valid(false) || !strings.Contains(v.CardRevoked, "leaked") {
			t.Errorf("%s after the revocation: valid %v, revoked %q, %v", name, v != nil && v.Valid(false), v.CardRevoked, err)
		}
	}
}

// counterValue reads a counter of m's registry by name and one label.
func counterValue(t *testing.T, m *Metrics, name, label, value string) float64 {
	t.Helper()
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return metric.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestRegisterNeedsAgentIDsRule: with a signing policy, a caller registers
// under a named agent id only when its rule lists it; the refusal happens
// before signing and is audited.
func TestRegisterNeedsAgentIDsRule(t *testing.T) {
	a, _ := newAuthority(t)
	ctx := t.Context()
	pol, probs := policy.Compile(policy.Config{Rules: []policy.Rule{
		{Name: "ci", Identities: []string{"token:ci"}, CardNames: []string{"*"}, Hosts: []string{"*"}, AgentIDs: []string{"secure-*"}},
	}})
	if probs != nil {
		t.Fatal(probs)
	}
	a.cfg.Policy = pol
	sign := func(id string) error {
		_, err := a.Sign(ctx, SignRequest{Card: registryCard(t), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"}, RequestID: "r",
			Registration: &Registration{AgentID: id}})
		return err
	}
	if err := sign(""); err != nil {
		t.Fatalf("the derived id: %v", err)
	}
	if err := sign("secure-agent"); err != nil {
		t.Fatalf("an id the rule lists: %v", err)
	}
	before, _, _ := a.store.AuditHead(ctx)
	err := sign("payments")
	var re *RefusedError
	if !errors.As(err, &re) || re.Refusal.Path != "agent_id" {
		t.Fatalf("another id: err = %v, want a policy refusal on agent_id", err)
	}
	recs, _ := a.store.ListAudit(ctx, before, 0)
	if len(recs) != 1 || !recs[0].Refused() || !strings.Contains(recs[0].Reason, "payments") {
		t.Fatalf("the refusal's audit records: %+v", recs)
	}
	if _, err := a.registry.Card(ctx, "payments", 0); err == nil {
		t.Fatal("the refused registration was stored")
	}
}

// TestRegistryQuotas: a caller registers at most
// registry.max_agents_per_caller agents and the registry holds at most
// registry.max_agents; a refusal is RESOURCE_EXHAUSTED naming the limit,
// before anything is signed. New versions of a live agent and the
// registry's own re-signatures are never refused.
func TestRegistryQuotas(t *testing.T) {
	a, _ := newAuthority(t)
	a.cfg.RegistryMaxAgents, a.cfg.RegistryMaxAgentsPerCaller = 3, 2
	a.registry = newRegistry(a) // built from the configuration
	ctx := t.Context()
	register := func(caller, id string) error {
		_, err := a.Sign(ctx, SignRequest{Card: registryCard(t), Caller: caller, Identity: access.Identity{Name: caller}, RequestID: "r",
			Registration: &Registration{AgentID: id}})
		return err
	}
	for _, tc := range []struct {
		caller, id string
		limit      string // the quota that refuses it; "" when accepted
	}{
		{"token:a", "a1", ""},
		{"token:a", "a2", ""},
		{"token:a", "a3", "registry.max_agents_per_caller"},
		{"token:a", "a1", ""}, // a new version of a live agent
		{"token:b", "b1", ""},
		{"token:b", "b2", "registry.max_agents"},
		{"token:a", "a3", "registry.max_agents"},
	} {
		before, _, _ := a.store.AuditHead(ctx)
		err := register(tc.caller, tc.id)
		if tc.limit == "" {
			if err != nil {
				t.Fatalf("%s registering %s: %v", tc.caller, tc.id, err)
			}
			continue
		}
		var qe *registry.QuotaError
		if !errors.As(err, &qe) || qe.Limit != tc.limit {
			t.Fatalf("%s registering %s: err = %v, want the quota %s", tc.caller, tc.id, err, tc.limit)
		}
		// Its gRPC status: server/grpcapi's TestQuotaStatus.
		if after, _, _ := a.store.AuditHead(ctx); after != before {
			t.Fatalf("%s registering %s: refused by a quota, yet %d audit records were written", tc.caller, tc.id, after-before)
		}
	}
	// A full registry still follows the keys.
	pendingKey(t, a)
	if err := a.dutyRound(ctx); err != nil {
		t.Fatalf("re-signing a full registry: %v", err)
	}
	if c, _ := a.registry.Card(ctx, "b1", 0); len(c.KIDs) != 2 {
		t.Fatalf("b1 carries %v after a rotation in a full registry", c.KIDs)
	}
	// Removing an agent makes room.
	if err := a.registry.Remove(ctx, "b1", "token:admin"); err != nil {
		t.Fatal(err)
	}
	if err := register("token:b", "b2"); err != nil {
		t.Fatalf("after a removal: %v", err)
	}
}

// appendsFail is a store whose AppendAudit fails once fail is set, as a
// transaction of its own fails when the store goes down or its disk fills
// up between two transactions.
type appendsFail struct {
	store.Store
	fail atomic.Bool
}

func (s *appendsFail) AppendAudit(ctx context.Context, recs []audit.Record) ([]audit.Record, error) {
	if s.fail.Load() {
		return nil, errors.New("audit append failed in a test")
	}
	return s.Store.AppendAudit(ctx, recs)
}

// TestRegistryAdministrationOneTransaction: a card revocation and an agent
// removal are done with their audit record or not at all (item 5, DESIGN
// §10): with every separate audit append failing, each is done and audited
// in its own transaction; never done without its record.
func TestRegistryAdministrationOneTransaction(t *testing.T) {
	dir := t.TempDir()
	sq := openStore(t, dir)
	st := &appendsFail{Store: sq}
	a := newAuthorityOn(t, st, dir)
	ctx := t.Context()
	registerAgents(t, a, "payments", "billing")
	st.fail.Store(true)

	recorded := func(kind audit.Kind, agent string) bool {
		t.Helper()
		recs := chainedAudit(t, sq)
		for _, r := range recs {
			if d, err := audit.DecodeAgentDetail(r.Detail); r.Kind() == kind && err == nil && d.Agent == agent {
				return true
			}
		}
		return false
	}

	_, err := a.Agents().RevokeAgentCard(ctx, "payments", 0, "leaked", "token:admin")
	revs, rerr := sq.RevokedCards(ctx)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if done, audited := len(revs) == 1, recorded(audit.KindCardRevoke, "payments"); done != audited || (err == nil) != done {
		t.Fatalf("card revocation: error %v, revoked %v, audited %v; want it done and audited, or neither", err, done, audited)
	}
	if err != nil {
		t.Fatal(err)
	}

	err = a.registry.Remove(ctx, "billing", "token:root")
	_, gerr := sq.AgentCard(ctx, "billing", 0)
	if gerr != nil && !errors.Is(gerr, store.ErrNotFound) {
		t.Fatal(gerr)
	}
	if done, audited := gerr != nil, recorded(audit.KindAgentRemove, "billing"); done != audited || (err == nil) != done {
		t.Fatalf("agent removal: error %v, removed %v, audited %v; want it done and audited, or neither", err, done, audited)
	}
	if err != nil {
		t.Fatal(err)
	}
}
