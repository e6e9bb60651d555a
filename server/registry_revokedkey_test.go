package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
)

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
	resp, err := http.Get(url)
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
