package server

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/transparency"
)

// testLogSigner is a transparency log with a fresh key: every test
// authority logs its signatures, as cardsignd does.
func testLogSigner(t testing.TB) *transparency.Signer {
	t.Helper()
	k, err := transparency.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := transparency.NewSigner("test.example/log", k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// trustedKeys is the authority's published key set.
func trustedKeys(t *testing.T, a *Authority) jwks.Set {
	t.Helper()
	views, err := a.keys.views(t.Context(), a.now())
	if err != nil {
		t.Fatal(err)
	}
	var set jwks.Set
	for _, v := range jwks.Published(views) {
		set.Keys = append(set.Keys, v.Public)
	}
	return set
}

func cardFor(t *testing.T, name, host string) []byte {
	t.Helper()
	data := testsupport.Card(t, "divergent.json")
	s := strings.Replace(string(data), `"name": "`, `"name": "`+name+` `, 1)
	return []byte(strings.ReplaceAll(s, "divergent.example.com", host))
}

// TestEverySignatureCarriesAProof: cards signed concurrently (sharing audit
// transactions and checkpoints) each carry, for every signature, a proof
// that the log's key vouches for, of that signature's own audit record.
func TestEverySignatureCarriesAProof(t *testing.T) {
	onBothStores(t, func(t *testing.T, a *Authority) {
		ctx := t.Context()
		const n = 40
		results := make([]*Signed, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				id := access.Identity{Name: "token:ci", Roles: []access.Role{access.RoleSigner}}
				results[i], errs[i] = a.Sign(ctx, SignRequest{Card: cardFor(t, fmt.Sprint("agent", i), fmt.Sprintf("a%d.example.com", i)), Caller: id.Name, Identity: id})
			})
		}
		wg.Wait()
		trusted := trustedKeys(t, a)
		sizes := map[int64]bool{}
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("card %d: %v", i, errs[i])
			}
			v, err := signer.Verify(ctx, res.Card, signer.VerifyOptions{Trusted: trusted, LogKeys: a.cfg.Log.Verifiers(), RequireLog: true})
			if err != nil {
				t.Fatal(err)
			}
			if !v.Valid(true) || len(v.Checks) != len(res.Audit) {
				t.Fatalf("card %d: %+v", i, v.Checks)
			}
			for j, c := range v.Checks {
				if c.Logged.Index != res.Audit[j].Seq-1 {
					t.Fatalf("card %d signature %d is leaf %d, its audit record %d", i, j, c.Logged.Index, res.Audit[j].Seq)
				}
				sizes[c.Logged.Size] = true
			}
			// The daemon's own verification checks the proofs too.
			if dv, err := a.Verify(ctx, res.Card, ""); err != nil || !dv.Valid(true) || dv.Checks[0].Logged == nil {
				t.Fatalf("card %d: Authority.Verify %+v %v", i, dv, err)
			}
		}
		t.Logf("%d cards, %d checkpoints", n, len(sizes))
		// Every leaf's entry is its record's, hosts included.
		recs, _ := loggedRecords(t, a)
		for _, r := range recs {
			if r.Kind().IsAdmin() { // the first key's creation: no card
				continue
			}
			if len(r.Hosts) != 1 || !strings.HasSuffix(r.Hosts[0], ".example.com") {
				t.Fatalf("record %d hosts %v", r.Seq, r.Hosts)
			}
		}
	})
}

// TestRefusalsAreLeavesToo: a refused request is logged (without its
// reason, which the record hash binds).
func TestRefusalsAreLeavesToo(t *testing.T) {
	ctx := t.Context()
	a, _ := newAuthority(t)
	teamAPolicy(t, a)
	id := access.Identity{Name: "token:team-a", Method: access.MethodToken, Roles: []access.Role{access.RoleSigner}}
	_, err := a.Sign(ctx, SignRequest{Card: cardFor(t, "x", "evil.example.net"), Caller: id.Name, Identity: id})
	if err == nil {
		t.Fatal("not refused")
	}
	entries, err := a.store.LogEntries(ctx, 1, 2) // leaf 0 is the first key's creation
	if err != nil {
		t.Fatal(err)
	}
	e, err := transparency.ParseEntry(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	if e.Outcome != audit.OutcomeRefused || !e.MatchesHost("evil.example.net") || e.Signature != "" || strings.Contains(string(entries[0]), "team-a.example.com") {
		t.Fatalf("refusal entry %s", entries[0])
	}
}

// TestLogKeyServed: the log's verifier keys are served beside the JWKS, and
// they verify the checkpoints proofs carry.
func TestLogKeyServed(t *testing.T) {
	a, _ := newAuthority(t)
	srv := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{}))
	defer srv.Close()
	resp, body := httpGet(t, srv.URL+transparency.KeyPath)
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Cache-Control"), "max-age=3600") {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	keys, err := transparency.ParseVerifierKeys(string(body))
	if err != nil || len(keys) != 1 || keys[0].Name() != "test.example/log" {
		t.Fatalf("served keys %q: %v", string(body), err)
	}
	id := access.Identity{Name: "token:ci", Roles: []access.Role{access.RoleSigner}}
	res, err := a.Sign(t.Context(), SignRequest{Card: cardFor(t, "x", "agent.example.com"), Caller: id.Name, Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	v, err := signer.Verify(t.Context(), res.Card, signer.VerifyOptions{Trusted: trustedKeys(t, a), LogKeys: keys, RequireLog: true})
	if err != nil || !v.Valid(true) {
		t.Fatalf("%+v %v", v, err)
	}
}

// TestTooManyHostsRefused: a card naming more hosts than a log entry lists
// is not signed: a host the entry left out would be signed for unseen by its
// owner's monitor.
func TestTooManyHostsRefused(t *testing.T) {
	a, _ := newAuthority(t)
	var ifaces []string
	for i := range transparency.MaxHosts + 1 {
		ifaces = append(ifaces, fmt.Sprintf(`{"url":"https://h%02d.example.com/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}`, i))
	}
	card := []byte(`{"name":"A","description":"d","supportedInterfaces":[` + strings.Join(ifaces, ",") + `],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)
	id := access.Identity{Name: "token:ci", Roles: []access.Role{access.RoleSigner}}
	_, err := a.Sign(t.Context(), SignRequest{Card: card, Caller: id.Name, Identity: id})
	var bad *InvalidArgumentError
	if !errors.As(err, &bad) || bad.Field != "supportedInterfaces" || !strings.Contains(bad.Reason, "33 hosts") {
		t.Fatalf("got %v", err)
	}
}

// loggedRecords reads the audit trail and the log's leaves, and fails unless
// every leaf is made again from its record as the store reads it back.
func loggedRecords(t *testing.T, a *Authority) ([]audit.Record, [][]byte) {
	t.Helper()
	ctx := t.Context()
	recs, err := a.store.ListAudit(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := a.store.LogEntries(ctx, 0, int64(len(recs)))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if want := transparency.NewEntry(r, r.Hosts).Marshal(); string(entries[i]) != string(want) {
			t.Fatalf("leaf %d is not made again from its record as the store reads it back:\n%s\nwant\n%s", i, entries[i], want)
		}
	}
	return recs, entries
}

// TestPrivateAgentEntriesSealed: a private agent's log entries (its
// registration and the registry's re-signatures) commit to its caller, card
// name and hosts instead of showing them; a public agent's and an
// unregistered card's show them. A reader fetches the agent's salt, with
// which the entries are found by name or host and their caller checked;
// the store reads sealed entries back so that every record's entry is made
// again byte for byte (what store copy and audit verify rely on).
// log.private: open shows them again.
func TestPrivateAgentEntriesSealed(t *testing.T) { onBothStores(t, testPrivateAgentEntriesSealed) }

func testPrivateAgentEntriesSealed(t *testing.T, a *Authority) {
	ctx := t.Context()
	sign := func(id string, vis store.Visibility) {
		t.Helper()
		req := SignRequest{Card: registryCard(t), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"}, RequestID: "reg-" + id}
		if id != "" {
			req.Registration = &Registration{AgentID: id, Visibility: vis}
		}
		if _, err := a.Sign(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	sign("open-agent", store.Public)
	sign("secret-agent", store.Private)
	sign("", "")
	sign("secret-agent", "") // a new version: still private, still sealed
	pendingKey(t, a)
	runDuties(t, a)
	a.cfg.LogOpenPrivate = true
	a.registry = newRegistry(a) // built from the configuration
	sign("other-private", store.Private)

	readerTok := "reader-token-0123456789"
	auth := access.New([]access.Token{{Name: "reader", SHA256: sha(readerTok), Roles: []access.Role{access.RoleReader}}}, nil)
	srv := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{Auth: auth}))
	defer srv.Close()
	saltOf := func(id, token string) ([]byte, int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/agents/"+id+"/log-salt", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Salt string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		salt, _ := hex.DecodeString(body.Salt)
		return salt, resp.StatusCode
	}
	if _, code := saltOf("secret-agent", ""); code != 404 {
		t.Fatalf("the salt to an anonymous caller: %d, want 404", code)
	}
	salt, code := saltOf("secret-agent", readerTok)
	if code != 200 || len(salt) != 32 {
		t.Fatalf("the salt to a reader: %d, %x", code, salt)
	}
	otherSalt, _ := saltOf("open-agent", readerTok)

	recs, entries := loggedRecords(t, a)
	sealed := 0
	for i, r := range recs {
		e, err := transparency.ParseEntry(entries[i])
		if err != nil {
			t.Fatal(err)
		}
		private := r.RequestID == "reg-secret-agent" || strings.HasPrefix(r.RequestID, "resign.secret-agent.")
		if r.Kind().IsAdmin() {
			// A key's record names no card (item 5); only signatures and
			// refusals carry a name and hosts to seal.
			if e.Sealed() {
				t.Errorf("record %d (%s): an administrative entry is sealed: %s", r.Seq, r.Outcome, entries[i])
			}
			continue
		}
		if !private {
			if e.Sealed() || e.Card.Name != "Secure Agent" || !e.MatchesHost("secure.example.com") {
				t.Errorf("record %d (%s, %s): entry %s; want it open", r.Seq, r.Caller, r.RequestID, entries[i])
			}
			continue
		}
		sealed++
		for _, shown := range []string{"Secure Agent", "secure.example.com", r.Caller} {
			if strings.Contains(string(entries[i]), shown) {
				t.Errorf("record %d (%s): the private agent's entry shows %q: %s", r.Seq, r.RequestID, shown, entries[i])
			}
		}
		if !e.Sealed() || !transparency.MatchesSealed(e, "Secure Agent", [][]byte{salt}) || !transparency.MatchesSealed(e, "secure.example.com", [][]byte{salt}) ||
			!e.OpensCaller(salt, r.Caller) {
			t.Errorf("record %d (%s): the owner's salt does not find or open the sealed entry %s", r.Seq, r.RequestID, entries[i])
		}
		if transparency.MatchesSealed(e, "secure.example.com", [][]byte{otherSalt}) {
			t.Errorf("record %d: another agent's salt opens the sealed entry", r.Seq)
		}
	}
	// A store copy appends the records as read back to another store: its
	// leaves must be the same bytes.
	dst, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "copy.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := dst.AppendAudit(ctx, recs); err != nil {
		t.Fatal(err)
	}
	copied, err := dst.LogEntries(ctx, 0, int64(len(recs)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range entries {
		if string(copied[i]) != string(entries[i]) {
			t.Fatalf("leaf %d of a copy:\n%s\nwant\n%s", i, copied[i], entries[i])
		}
	}
	if sealed != 4 { // two registrations, two re-signatures (one per signature: active + pending)
		t.Errorf("%d sealed entries, want 4", sealed)
	}
}

// TestPrivateAgentAdminEntriesSealed: the log entries of a private agent's
// card revocation and removal commit to their caller under the agent's
// salt, like the agent's other entries, instead of showing who acted on
// the card whose SHA-256 those entries show; a public agent's show the
// caller. The store reads them back so that each entry is made again from
// its record byte for byte.
func TestPrivateAgentAdminEntriesSealed(t *testing.T) {
	onBothStores(t, testPrivateAgentAdminEntriesSealed)
}

func testPrivateAgentAdminEntriesSealed(t *testing.T, a *Authority) {
	ctx := t.Context()
	for _, ag := range []struct {
		id  string
		vis store.Visibility
	}{{"secret-agent", store.Private}, {"open-agent", store.Public}} {
		if _, err := a.Sign(ctx, SignRequest{Card: registryCard(t), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"}, RequestID: "reg-" + ag.id,
			Registration: &Registration{AgentID: ag.id, Visibility: ag.vis}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Agents().RevokeAgentCard(ctx, ag.id, 0, "withdrawn in a test", "token:team-"+ag.id); err != nil {
			t.Fatal(err)
		}
		if err := a.registry.Remove(ctx, ag.id, "token:team-"+ag.id); err != nil {
			t.Fatal(err)
		}
	}
	salt, err := a.registry.Salt("secret-agent")
	if err != nil {
		t.Fatal(err)
	}
	recs, entries := loggedRecords(t, a)
	admin := map[string]int{}
	for i, r := range recs {
		if !r.Kind().IsRegistry() {
			continue
		}
		d, err := audit.DecodeAgentDetail(r.Detail)
		if err != nil {
			t.Fatal(err)
		}
		admin[d.Agent]++
		e, err := transparency.ParseEntry(entries[i])
		if err != nil {
			t.Fatal(err)
		}
		if d.Agent == "open-agent" {
			if e.Sealed() || e.Caller != "token:team-open-agent" {
				t.Errorf("record %d (%s of a public agent): entry %s; want it open", r.Seq, r.Outcome, entries[i])
			}
			continue
		}
		for _, shown := range []string{r.Caller, "team-secret", "secret-agent", "withdrawn"} {
			if strings.Contains(string(entries[i]), shown) {
				t.Errorf("record %d (%s of a private agent): the entry shows %q: %s", r.Seq, r.Outcome, shown, entries[i])
			}
		}
		if !e.OpensCaller(salt, "token:team-secret-agent") {
			t.Errorf("record %d (%s of a private agent): the agent's salt does not open the entry's caller: %s", r.Seq, r.Outcome, entries[i])
		}
	}
	if admin["secret-agent"] != 2 || admin["open-agent"] != 2 {
		t.Fatalf("registry administration records per agent: %v; want a revocation and a removal each", admin)
	}
}
