package server_test

import (
	"bytes"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cardsign/cardsign/access"
	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/store"
)

// TestGetAgentCardWithoutRevokedSignatures: GetAgentCard serves the live
// card as /agents/ does, without the signatures of a key revoked since and
// before the re-signing duty runs; a version asked for by number as it was
// signed; a card left with no signature it may be served with is
// UNAVAILABLE (the HTTP side: TestAgentCardWithoutRevokedSignatures).
func TestGetAgentCardWithoutRevokedSignatures(t *testing.T) {
	a, _ := server.NewTestAuthority(t)
	ctx := t.Context()
	k1 := server.ActiveView(t, a).KID
	id := access.Identity{Name: "token:ci"}
	if _, err := a.Sign(ctx, server.SignRequest{Card: server.RegistryCard(t), Caller: id.Name, Identity: id, RequestID: "r",
		Registration: &registry.Registration{AgentID: "alpha", Visibility: store.Public}}); err != nil {
		t.Fatal(err)
	}
	hour := time.Hour
	k2v, err := a.Admin().RotateKey(ctx, "", &hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DutyRound(ctx); err != nil { // signs the card with k2 too
		t.Fatal(err)
	}
	if _, err := a.Admin().RevokeKey(ctx, k2v.KID, "compromised in a test", false); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.NewHTTPHandler(a, server.HTTPOptions{}))
	defer srv.Close()
	_, body := server.HTTPGet(t, srv.URL+"/agents/alpha/agent-card.json")

	agents := pb.NewAgentServiceClient(serveGRPC(t, a))
	live, err := agents.GetAgentCard(ctx, &pb.GetAgentCardRequest{AgentId: "alpha"})
	if err != nil || !bytes.Equal(live.GetCard().GetSignedCard(), body) || !slices.Equal(live.GetCard().GetKids(), []string{k1}) {
		t.Fatalf("GetAgentCard with k2 revoked: kids %v, same bytes as HTTP %v, %v", live.GetCard().GetKids(), bytes.Equal(live.GetCard().GetSignedCard(), body), err)
	}
	if old, err := agents.GetAgentCard(ctx, &pb.GetAgentCardRequest{AgentId: "alpha", Version: live.GetCard().GetVersion()}); err != nil || len(old.GetCard().GetKids()) != 2 {
		t.Fatalf("GetAgentCard of a version by number: %v, %v; want it as signed", old.GetCard().GetKids(), err)
	}
	if _, err := a.Admin().RevokeKey(ctx, k1, "compromised in a test", true); err != nil {
		t.Fatal(err)
	}
	if _, err := agents.GetAgentCard(ctx, &pb.GetAgentCardRequest{AgentId: "alpha"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("GetAgentCard with every key it carries revoked: %v; want UNAVAILABLE", err)
	}
}
