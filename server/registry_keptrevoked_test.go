package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
)

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
	ctx := context.Background()
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
		resp, err := http.Get(srv.URL + "/agents/kept/agent-card.json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
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
