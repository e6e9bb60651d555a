package server

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/awskms"
	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
)

// registerAgents signs the security card for each agent id, registered.
func registerAgents(t *testing.T, a *Authority, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := a.Sign(context.Background(), SignRequest{Card: registryCard(t), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"},
			RequestID: "reg-" + id, Registration: &Registration{AgentID: id}}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkRegistry requires every registered card to carry exactly kids and to
// verify against the authority's published keys.
func checkRegistry(t *testing.T, a *Authority, step string, kids ...string) {
	t.Helper()
	ctx := context.Background()
	cards, err := a.registry.List(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(kids)
	for _, c := range cards {
		if got := slices.Sorted(slices.Values(c.KIDs)); !slices.Equal(got, kids) {
			t.Errorf("%s: agent %s version %d carries %v, want %v", step, c.ID, c.Version, got, kids)
		}
		v, err := a.Verify(ctx, c.Signed, "")
		if err != nil || !v.Valid(true) {
			t.Errorf("%s: agent %s version %d does not verify against the published keys: %v %+v", step, c.ID, c.Version, err, v)
		}
	}
}

// TestResignOnKeyEvents: registered cards follow the signing keys through a
// rotation (active + pending), the activation (the new key alone) and the
// revocation of a pending key, each re-signature audited as the registry's
// with its reason.
func TestResignOnKeyEvents(t *testing.T) { onBothStores(t, testResignOnKeyEvents) }

// onBothStores runs fn against an authority on SQLite and one on a
// throw-away PostgreSQL database (one cluster per test binary).
func onBothStores(t *testing.T, fn func(t *testing.T, a *Authority)) {
	t.Run("sqlite", func(t *testing.T) {
		a, _ := newAuthority(t)
		fn(t, a)
	})
	t.Run("postgres", func(t *testing.T) {
		a := newAuthorityOn(t, sharedPostgres(t), t.TempDir())
		awaitActive(t, a)
		fn(t, a)
	})
}

// awaitActive waits (2 s at most) until a sees its first key active: it
// activates at the database's now, which this process's estimate of that
// clock may trail by part of a round trip.
func awaitActive(t *testing.T, a *Authority) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		views, err := a.admin.Keys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := jwks.Active(views); ok || time.Now().After(deadline) {
			return
		}
	}
}

func testResignOnKeyEvents(t *testing.T, a *Authority) {
	ctx := context.Background()
	k1 := activeKID(t, a)
	registerAgents(t, a, "alpha", "beta", "gamma")
	runDuties(t, a)
	checkRegistry(t, a, "start", k1)

	hour := time.Hour
	k2 := pendingKey(t, a)
	runDuties(t, a)
	checkRegistry(t, a, "rotation (k2 pending)", k1, k2)

	if _, err := a.admin.ActivateKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	runDuties(t, a)
	checkRegistry(t, a, "activation of k2", k2)

	k3v, err := a.admin.RotateKey(ctx, "", &hour)
	if err != nil {
		t.Fatal(err)
	}
	runDuties(t, a)
	checkRegistry(t, a, "rotation (k3 pending)", k2, k3v.KID)
	if _, err := a.admin.RevokeKey(ctx, k3v.KID, "compromised in a test", false); err != nil {
		t.Fatal(err)
	}
	runDuties(t, a)
	checkRegistry(t, a, "revocation of k3", k2)

	// Every version is audited; the re-signatures as the registry's, with
	// the agent, the version replaced and the keys added and dropped.
	hist, err := a.registry.History(ctx, "beta")
	if err != nil || len(hist) != 5 {
		t.Fatalf("beta has %d versions, %v; want 5 (registered, +k2, k2 alone, +k3, -k3)", len(hist), err)
	}
	recs, err := a.store.ListAudit(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, r := range recs {
		if r.Caller == registry.ResignCaller && strings.HasPrefix(r.RequestID, "resign.beta.") {
			reasons = append(reasons, r.RequestID)
		}
	}
	for _, want := range []string{"resign.beta.v1.add." + k2, "resign.beta.v2.drop." + k1, "resign.beta.v3.add." + k3v.KID, "resign.beta.v4.drop." + k3v.KID} {
		if !slices.Contains(reasons, want) {
			t.Errorf("no audit record %q among the registry's re-signatures of beta: %v", want, reasons)
		}
	}
	// Nothing to do: the next round signs nothing.
	before, _, _ := a.store.AuditHead(ctx)
	runDuties(t, a)
	if after, _, _ := a.store.AuditHead(ctx); after != before {
		t.Fatalf("a round with nothing to re-sign wrote %d audit records", after-before)
	}
}

// TestResignIgnoresPolicy: the registry re-signs a card its caller was
// allowed to register, whatever the policy says about the registry itself.
func TestResignIgnoresPolicy(t *testing.T) {
	a, _ := newAuthority(t)
	ctx := context.Background()
	registerAgents(t, a, "alpha")
	pol, probs := policy.Compile(policy.Config{Rules: []policy.Rule{{Name: "ci-only", Identities: []string{"token:ci"}, CardNames: []string{"*"}, Hosts: []string{"*"}}}})
	if probs != nil {
		t.Fatal(probs)
	}
	a.cfg.Policy = pol
	pendingKey(t, a)
	if err := a.dutyRound(ctx); err != nil {
		t.Fatalf("the registry's re-signature was refused: %v", err)
	}
	if c, _ := a.registry.Card(ctx, "alpha", 0); len(c.KIDs) != 2 {
		t.Fatalf("alpha carries %v after the rotation", c.KIDs)
	}
}

// TestResignHoldsRetiredKey: a retired key that a live card still carries
// (its re-signing fails) stays published past its grace, and the failure is
// reported.
func TestResignHoldsRetiredKey(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	const grace = 2 * time.Second
	a := NewAuthority(Config{
		KeyBackend: "file", KeyDir: filepath.Join(dir, "keys"), DefaultAlg: jose.ES256,
		Prepublish: time.Hour, RetireGrace: grace, Limits: strictjson.Limits{},
		JWKSMaxAge: time.Second, RevocationTTL: time.Hour, AuditBatch: 64,
	}, st, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { a.Close() })
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	k1 := activeKID(t, a)
	registerAgents(t, a, "alpha")
	// A card that cannot be signed again: its stored options are broken.
	c, _ := a.registry.Card(ctx, "alpha", 0)
	c.Options = []byte("{broken")
	if _, err := st.PutAgentCard(ctx, c, 0); err != nil {
		t.Fatal(err)
	}
	rotateActivate(t, a)
	// Three graces pass in rounds of a fifth of one, on the authority's
	// clock: without the hold, k1 would expire after the first grace.
	advance := manualClock(a)
	for range 15 {
		if err := a.dutyRound(ctx); err == nil || !strings.Contains(err.Error(), "agent alpha") {
			t.Fatalf("duty round with a card that cannot be re-signed: %v", err)
		}
		advance(grace / 5)
	}
	views, err := a.admin.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.KID == k1 && v.State != jwks.StateRetired {
			t.Fatalf("k1 is %s three graces after its retirement, while a live card still carries it; want retired (published)", v.State)
		}
	}
	if c, _ := a.registry.Card(ctx, "alpha", 0); !slices.Contains(c.KIDs, k1) {
		t.Fatalf("alpha carries %v", c.KIDs)
	}
}

// TestResignResumes: a re-signing pass cut short (the holder crashed or lost
// its context) leaves the rest to the next round, which finishes without
// signing a card again (only a card cut between its audit record and its
// registry write can be signed twice).
func TestResignResumes(t *testing.T) {
	a, _ := newAuthority(t)
	ctx := context.Background()
	const n = 60
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "agent-" + strings.Repeat("0", 3-len(itoa(i))) + itoa(i)
	}
	registerAgents(t, a, ids...)
	k1 := activeKID(t, a)
	hour := time.Hour
	k2, err := a.admin.RotateKey(ctx, "", &hour)
	if err != nil {
		t.Fatal(err)
	}
	start, _, _ := a.store.AuditHead(ctx)
	cut, cancel := context.WithCancel(ctx)
	go func() {
		for cut.Err() == nil {
			if seq, _, _ := a.store.AuditHead(ctx); seq >= start+20 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if err := a.registry.Resign(cut); err == nil {
		t.Fatal("a pass cut short reported success")
	}
	cancel()
	mid, _, _ := a.store.AuditHead(ctx)
	// Two signatures (k1 and k2), so two audit records, per card.
	if mid-start >= 2*n {
		t.Fatalf("the pass was not cut short (%d audit records)", mid-start)
	}
	if err := resignAll(ctx, a); err != nil {
		t.Fatal(err)
	}
	checkRegistry(t, a, "after resuming", k1, k2.KID)
	end, _, _ := a.store.AuditHead(ctx)
	if recs := end - start; recs < 2*n || recs > 2*n+2 {
		t.Fatalf("%d audit records for re-signing %d cards; want %d (one card more at most, cut mid-write)", recs, n, 2*n)
	}
	for _, id := range ids {
		if h, _ := a.registry.History(ctx, id); len(h) != 2 {
			t.Errorf("agent %s has %d versions, want 2", id, len(h))
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestResignRefreshes: with a signature lifetime, every signature carries
// exp, and a registered card older than refresh_at of the lifetime is
// signed again with the same keys before it expires.
func TestResignRefreshes(t *testing.T) {
	a, dir := newAuthority(t)
	a.cfg.Lifetime, a.cfg.RefreshAt = time.Hour, 0.5
	ctx := context.Background()
	registerAgents(t, a, "alpha", "beta")
	first, _ := a.registry.Card(ctx, "alpha", 0)
	var signed struct {
		Signatures []struct{ Protected string } `json:"signatures"`
	}
	if err := json.Unmarshal(first.Signed, &signed); err != nil || len(signed.Signatures) == 0 {
		t.Fatalf("signed card: %v", err)
	}
	hdr, _ := base64.RawURLEncoding.DecodeString(signed.Signatures[0].Protected)
	if !strings.Contains(string(hdr), `"exp":`) || !strings.Contains(string(hdr), `"iat":`) {
		t.Fatalf("protected header %s has no iat/exp with signing.lifetime set", hdr)
	}
	runDuties(t, a)
	if c, _ := a.registry.Card(ctx, "alpha", 0); c.Version != 1 {
		t.Fatalf("a fresh card was signed again (version %d)", c.Version)
	}
	// alpha's version was stored 31 minutes ago (behind the store's back).
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "cardsign.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE agent_cards SET stored_at = ? WHERE id = 'alpha'`, time.Now().Add(-31*time.Minute).UnixNano()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	a.registry = newRegistry(a) // as after a minute, or a new duty holder: a full pass (and the lifetime set above)
	runDuties(t, a)
	alpha, _ := a.registry.Card(ctx, "alpha", 0)
	beta, _ := a.registry.Card(ctx, "beta", 0)
	if alpha.Version != 2 || beta.Version != 1 {
		t.Fatalf("after the refresh: alpha version %d (want 2), beta version %d (want 1)", alpha.Version, beta.Version)
	}
	recs, _ := a.store.ListAudit(ctx, 0, 0)
	if last := recs[len(recs)-1]; last.Caller != registry.ResignCaller || last.RequestID != "resign.alpha.v1.refresh" {
		t.Fatalf("the refresh's audit record: %s %s", last.Caller, last.RequestID)
	}
	v, err := a.Verify(ctx, alpha.Signed, "")
	if err != nil || !v.Valid(true) {
		t.Fatalf("the refreshed card does not verify: %v %+v", err, v)
	}
}

// TestResignNeverOverwrites: a re-signature started from a version the owner
// has since replaced, or of an agent removed since, writes nothing.
func TestResignNeverOverwrites(t *testing.T) {
	a, _ := newAuthority(t)
	ctx := context.Background()
	registerAgents(t, a, "alpha")
	v1, _ := a.registry.Card(ctx, "alpha", 0)
	registerAgents(t, a, "alpha") // the owner registers again: version 2
	if err := resignCard(ctx, a, v1, activeKID(t, a)); !errors.Is(err, store.ErrSuperseded) {
		t.Fatalf("re-signing version 1 after version 2: err = %v, want ErrSuperseded", err)
	}
	if c, _ := a.registry.Card(ctx, "alpha", 0); c.Version != 2 {
		t.Fatalf("the newest version is %d, want 2", c.Version)
	}
	v2, _ := a.registry.Card(ctx, "alpha", 0)
	if err := a.registry.Remove(ctx, "alpha", "token:admin"); err != nil {
		t.Fatal(err)
	}
	if err := resignCard(ctx, a, v2, activeKID(t, a)); !errors.Is(err, store.ErrSuperseded) {
		t.Fatalf("re-signing a removed agent: err = %v, want ErrSuperseded", err)
	}
	if _, err := a.registry.Card(ctx, "alpha", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the removed agent came back: %v", err)
	}
}

// resignCard signs registered card c again for the signing keys want, as
// the registry's duty does.
func resignCard(ctx context.Context, a *Authority, c store.AgentCard, want ...string) error {
	rs, err := registry.NewResignature(c, want)
	if err != nil {
		return err
	}
	return registryPort{a}.SignAgain(ctx, rs)
}

// TestAgentCardWithoutRevokedSignatures: from the moment a key is revoked,
// and before the re-signing duty runs, the registry serves its cards
// without that key's signatures; a card left with none of its own is not
// served at all (503, Retry-After) until it is signed again.
func TestAgentCardWithoutRevokedSignatures(t *testing.T) {
	a, _ := newAuthority(t)
	ctx := t.Context()
	k1 := activeKID(t, a)
	if _, err := a.Sign(ctx, SignRequest{Card: registryCard(t), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"}, RequestID: "r",
		Registration: &Registration{AgentID: "alpha", Visibility: store.Public}}); err != nil {
		t.Fatal(err)
	}
	k2 := pendingKey(t, a)
	runDuties(t, a)
	checkRegistry(t, a, "rotation (k2 pending)", k1, k2)
	srv := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{}))
	defer srv.Close()
	get := func() (*http.Response, []byte) {
		t.Helper()
		return httpGet(t, srv.URL+"/agents/alpha/agent-card.json")
	}
	kidsOf := func(body []byte) []string {
		t.Helper()
		v, err := a.Verify(ctx, body, "")
		if err != nil {
			t.Fatal(err)
		}
		var kids []string
		for _, c := range v.Checks {
			kids = append(kids, c.KID)
		}
		if !v.Valid(true) {
			t.Errorf("the served card does not verify with every signature: %+v", v.Checks)
		}
		return kids
	}
	resp, body := get()
	if resp.StatusCode != 200 || !slices.Equal(slices.Sorted(slices.Values(kidsOf(body))), slices.Sorted(slices.Values([]string{k1, k2}))) {
		t.Fatalf("before any revocation: %d, kids %v", resp.StatusCode, kidsOf(body))
	}
	etag := resp.Header.Get("ETag")

	// The pending key is revoked; the duty has not run.
	if _, err := a.admin.RevokeKey(ctx, k2, "compromised in a test", false); err != nil {
		t.Fatal(err)
	}
	if c, _ := a.registry.Card(ctx, "alpha", 0); !slices.Contains(c.KIDs, k2) {
		t.Fatalf("the stored card no longer carries k2 (%v): the test does not test the moment before re-signing", c.KIDs)
	}
	resp, body = get()
	if resp.StatusCode != 200 {
		t.Fatalf("with k2 revoked: %d %s", resp.StatusCode, body)
	}
	if kids := kidsOf(body); !slices.Equal(kids, []string{k1}) {
		t.Fatalf("with k2 revoked, the served card carries %v, want only %s", kids, k1)
	}
	if resp.Header.Get("ETag") == etag || resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Errorf("the card without k2's signature is served with the old ETag or a wrong length: %v", resp.Header)
	}
	if _, err := card.Parse(body, strictjson.Limits{}); err != nil {
		t.Fatalf("the served card is not a card: %v", err)
	}
	// The gRPC API serves the live card the same way (history as signed):
	// TestGetAgentCardWithoutRevokedSignatures.
	// Now the active key too: the card carries nothing it may be served
	// with until it is signed again.
	if _, err := a.admin.RevokeKey(ctx, k1, "compromised in a test", true); err != nil {
		t.Fatal(err)
	}
	resp, body = get()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "signed again") {
		t.Fatalf("with every key it carries revoked: %d %v %s; want 503 with Retry-After", resp.StatusCode, resp.Header, body)
	}
}

// TestAgentCardWithoutRevokedSignaturesLimits (review #11): a card within
// the configured value limits (signing.max_card_values raised), over the
// defaults, is still served after a key revocation, without that key's
// signature, rather than 503 until it is signed again.
func TestAgentCardWithoutRevokedSignaturesLimits(t *testing.T) {
	a, _ := newAuthority(t)
	a.cfg.Limits = strictjson.Limits{MaxBytes: 4 << 20, MaxValues: 60000}
	a.registry = newRegistry(a) // built from the configuration
	ctx := t.Context()
	v, err := card.Parse(registryCard(t), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var skills []strictjson.Value
	for i := range 12 { // 12 × 4,000 tags: over the default 20,000 values, even doubled
		tags := make([]strictjson.Value, 4000)
		for j := range tags {
			tags[j] = strictjson.StringValue(strconv.Itoa(j))
		}
		id := "bulk" + strconv.Itoa(i)
		skills = append(skills, strictjson.ObjectValue(strictjson.Member{Key: "id", Val: strictjson.StringValue(id)}, strictjson.Member{Key: "name", Val: strictjson.StringValue(id)},
			strictjson.Member{Key: "description", Val: strictjson.StringValue("d")}, strictjson.Member{Key: "tags", Val: strictjson.ArrayValue(tags...)}))
	}
	for i, m := range v.Obj {
		if m.Key == "skills" {
			v.Obj[i].Val = strictjson.ArrayValue(append(m.Val.Arr, skills...)...)
		}
	}
	k1 := activeKID(t, a)
	if _, err := a.Sign(ctx, SignRequest{Card: v.Compact(), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"}, RequestID: "r",
		Registration: &Registration{AgentID: "big", Visibility: store.Public}}); err != nil {
		t.Fatal(err)
	}
	hour := time.Hour
	k2, err := a.admin.RotateKey(ctx, "", &hour)
	if err != nil {
		t.Fatal(err)
	}
	runDuties(t, a)
	if c, _ := a.registry.Card(ctx, "big", 0); !slices.Contains(c.KIDs, k2.KID) {
		t.Fatalf("the card is not signed by the pending key too (%v)", c.KIDs)
	}
	if _, err := a.admin.RevokeKey(ctx, k2.KID, "compromised in a test", false); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{}))
	defer srv.Close()
	resp, body := httpGet(t, srv.URL+"/agents/big/agent-card.json")
	if resp.StatusCode != 200 {
		t.Fatalf("with k2 revoked: %d %.300s", resp.StatusCode, body)
	}
	res, err := a.Verify(ctx, body, "")
	if err != nil || len(res.Checks) == 0 || !res.Valid(true) {
		t.Fatalf("the served card: %v, %v", res, err)
	}
	for _, c := range res.Checks {
		if c.KID != k1 {
			t.Fatalf("the served card carries a signature by %s, want only %s", c.KID, k1)
		}
	}
}

// signatureKIDs lists the kids in the protected headers of a signed card's
// signatures, in order.
func signatureKIDs(t *testing.T, signed []byte) []string {
	t.Helper()
	var kids []string
	if _, err := signer.DropSignatures(signed, strictjson.Limits{}, func(kid string) bool { kids = append(kids, kid); return false }); err != nil {
		t.Fatal(err)
	}
	return kids
}

// TestKeptSignaturesOfRevokedKeys: a card registered with keep_signatures
// may carry an earlier signature by one of our keys that is not among the
// kids of its sign call (here by the retired key k1). Once k1 is revoked,
// the registry serves the card without it, before any re-signing; the
// re-signing duty does not keep it again, and neither does a registration
// after the revocation.
func TestKeptSignaturesOfRevokedKeys(t *testing.T) {
	a, _ := newAuthority(t)
	ctx := t.Context()
	k1 := activeKID(t, a)
	signed, err := a.Sign(ctx, SignRequest{Card: registryCard(t), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"}, RequestID: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Hour
	k2 := pendingKey(t, a)
	if _, err := a.admin.ActivateKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	register := func(id string) store.AgentCard {
		t.Helper()
		if _, err := a.Sign(ctx, SignRequest{Card: signed.Card, KeepSignatures: true, Caller: "token:ci", Identity: access.Identity{Name: "token:ci"}, RequestID: "reg-" + id,
			Registration: &Registration{AgentID: id, Visibility: store.Public}}); err != nil {
			t.Fatal(err)
		}
		c, err := a.registry.Card(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := register("kept")
	if !slices.Equal(c.KIDs, []string{k2}) || !slices.Contains(signatureKIDs(t, c.Signed), k1) {
		t.Fatalf("registered with kids %v, signatures by %v; want k2 only and the kept k1 signature", c.KIDs, signatureKIDs(t, c.Signed))
	}

	srv := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{}))
	defer srv.Close()
	served := func() []string {
		t.Helper()
		resp, b := httpGet(t, srv.URL+"/agents/kept/agent-card.json")
		if resp.StatusCode != 200 {
			t.Fatalf("GET: %d %s", resp.StatusCode, b)
		}
		return signatureKIDs(t, b)
	}
	if kids := served(); !slices.Contains(kids, k1) {
		t.Fatalf("before the revocation the kept k1 signature is not served: %v", kids)
	}

	if _, err := a.admin.RevokeKey(ctx, k1, "compromised in a test", false); err != nil {
		t.Fatal(err)
	}
	if kids := served(); slices.Contains(kids, k1) || !slices.Contains(kids, k2) {
		t.Fatalf("with k1 revoked, the served card carries signatures by %v; want k2's, not k1's", kids)
	}
	if kids := signatureKIDs(t, register("kept-later").Signed); slices.Contains(kids, k1) {
		t.Errorf("a registration with keep_signatures after k1's revocation keeps its signature: %v", kids)
	}

	// A new pending key: the duty signs the card again from its input, with
	// keep_signatures, and leaves k1's signature out.
	k3v, err := a.admin.RotateKey(ctx, "", &hour)
	if err != nil {
		t.Fatal(err)
	}
	runDuties(t, a)
	c, err = a.registry.Card(ctx, "kept", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.KIDs, k3v.KID) {
		t.Fatalf("the duty did not sign the card again: kids %v", c.KIDs)
	}
	if kids := signatureKIDs(t, c.Signed); slices.Contains(kids, k1) {
		t.Errorf("the card signed again by the duty keeps k1's signature: %v", kids)
	}
}

// httpGet fetches url and reads the whole answer.
func httpGet(t testing.TB, url string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return httpDo(t, http.DefaultClient, req)
}

// httpDo sends req with client and reads the whole answer.
func httpDo(t testing.TB, client *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// newAWSAuthority is the test authority with its keys in the AWS KMS fake at
// url, through the real SDK client (static credentials, no client-side
// rate limit: the registry paces), its config changed by each of opts.
func newAWSAuthority(tb testing.TB, url string, opts ...func(*Config)) *Authority {
	tb.Helper()
	reg := backends.NewRegistry()
	if err := reg.Add(file.Scheme, file.Constructor, backends.Config{}); err != nil {
		tb.Fatal(err)
	}
	err := reg.Add(awskms.Scheme, awskms.Constructor, backends.Config{Settings: awskms.Config{
		Endpoint: url, RateLimit: math.Inf(1), Logger: slog.New(slog.DiscardHandler),
		AWSConfig: &aws.Config{Region: awskmsfake.DefaultRegion, Credentials: credentials.NewStaticCredentialsProvider("AKIARESIGNTEST", "resign-test-secret", "")},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = reg.Close() })
	dir := tb.TempDir()
	return newAuthorityWith(tb, openStore(tb, dir), dir, slog.New(slog.DiscardHandler), append([]func(*Config){func(c *Config) {
		c.Backends, c.KeyBackend = reg, awskms.Scheme
	}}, opts...)...)
}

// stormKeys rotates the active key, activates the new one and revokes the
// old one (a storm: every registered card is to be signed again by the new
// key alone); it returns the new key's kid.
func stormKeys(t testing.TB, a *Authority) string {
	t.Helper()
	old := activeKID(t, a)
	k2 := rotateActivate(t, a)
	if _, err := a.admin.RevokeKey(t.Context(), old, "a re-signing storm", false); err != nil {
		t.Fatal(err)
	}
	return k2
}

// rotateActivate rotates the active key and activates the new one at once;
// it returns the new key's kid.
func rotateActivate(t testing.TB, a *Authority) string {
	t.Helper()
	hour := time.Hour
	k2, err := a.admin.RotateKey(t.Context(), "", &hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.ActivateKey(t.Context(), k2.KID); err != nil {
		t.Fatal(err)
	}
	return k2.KID
}

// TestResignThrottledByKMS: re-signing against the AWS KMS fake's sign
// quota, through the real SDK client: the quota's ThrottlingExceptions
// become backoff inside the backend, not failures; the registry sees them
// (the backends' throttling count) and narrows its window; every card ends
// with the new key alone, each re-signature audited.
func TestResignThrottledByKMS(t *testing.T) {
	fake, err := awskmsfake.Start(awskmsfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	a := newAWSAuthority(t, fake.URL(), func(c *Config) { c.RegistryResignConcurrency = 16 })
	const cards = 40
	registerStorm(t, a, cards)
	k2 := stormKeys(t, a)
	fake.SetLatency(5 * time.Millisecond)
	fake.SetSignQuota(40, 2) // 16 in flight at 5 ms ask for far more
	runDuties(t, a)
	if got := cardsCarryingOnly(t, a, k2); got != cards {
		t.Fatalf("%d of %d cards carry %s alone", got, cards, k2)
	}
	throttled := uint64(fake.Throttled())
	if throttled == 0 {
		t.Fatal("the quota throttled nothing: the test does not test throttling")
	}
	if seen := (registryPort{a}).throttles(); seen != throttled {
		t.Errorf("the registry saw %d throttled requests, the fake answered %d", seen, throttled)
	}
	if w := a.registry.Pace().Window(); w >= 16 {
		t.Errorf("re-signing window %d after throttling, want it narrowed below 16", w)
	}
	recs, err := a.store.ListAudit(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	resigned := 0
	for _, r := range recs {
		if r.Caller == registry.ResignCaller && r.KID == k2 {
			resigned++
		}
	}
	if resigned != cards {
		t.Errorf("%d audited re-signatures by %s, want %d", resigned, k2, cards)
	}
}

// TestResignLeavesPipelineSigns: while a pass runs against a slow KMS (100
// ms answers, re-signing at 10 signatures a second), pipeline signs are
// neither queued behind it nor kept waiting for its rate: each completes
// within a few KMS answers, before the pass ends.
func TestResignLeavesPipelineSigns(t *testing.T) {
	fake, err := awskmsfake.Start(awskmsfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	a := newAWSAuthority(t, fake.URL(), func(c *Config) { c.RegistryResignRate, c.RegistryResignConcurrency = 10, 4 })
	const cards = 20
	registerStorm(t, a, cards)
	k2 := stormKeys(t, a)
	fake.SetLatency(100 * time.Millisecond)
	passed := make(chan error, 1)
	go func() { passed <- a.dutyRound(context.WithoutCancel(t.Context())) }()
	time.Sleep(300 * time.Millisecond) // the pass is under way
	for i := range 5 {
		start := time.Now()
		if _, err := a.Sign(t.Context(), SignRequest{Card: registryCard(t), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"}, RequestID: "pipeline"}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("pipeline sign %d took %v during the pass", i, took)
		}
	}
	select {
	case err := <-passed:
		t.Fatalf("the pass ended (%v) before the pipeline signs: the test does not test them during one", err)
	default:
	}
	if err := <-passed; err != nil {
		t.Fatal(err)
	}
	if got := cardsCarryingOnly(t, a, k2); got != cards {
		t.Fatalf("%d of %d cards carry %s alone", got, cards, k2)
	}
}

// resignAll calls the registry's re-signing until its pass is whole (a
// pass longer than registry.ResignSlice takes several calls), as the
// duties' rounds do.
func resignAll(ctx context.Context, a *Authority) error {
	for {
		err := a.registry.Resign(ctx)
		if !errors.Is(err, registry.ErrResignUnfinished) {
			return err
		}
	}
}
