package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
)

// TestRegistryResignSurvivesKill: cardsignd killed (SIGKILL) while the
// registry re-signs 600 cards after a rotation finishes the pass after a
// restart: every card ends up carrying both keys, and none is stored twice.
func TestRegistryResignSurvivesKill(t *testing.T) {
	const cards = 600
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	config := "limits:\n  rate: 0\n"
	d := runDaemon(t, daemonBin, data, config)
	cl := dialOne(t, d.grpc)
	card, err := os.ReadFile(filepath.Join(repoRoot, "testdata/cards/security.json"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range cards {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			cctx, cancel := cl.ctx(ctx)
			defer cancel()
			if _, err := cl.signing.SignCard(cctx, &pb.SignCardRequest{Card: card, Register: true, AgentId: fmt.Sprintf("agent-%04d", i)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	cctx, cancel := cl.ctx(ctx)
	rot, err := cl.keys.RotateKey(cctx, &pb.RotateKeyRequest{PrepublishSeconds: proto.Int64(3600)})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	k2 := rot.GetKey().GetKid()
	// Kill while the pass runs: wait until some cards carry the new key.
	deadline := time.Now().Add(30 * time.Second)
	for carried(t, cl, k2) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no card re-signed 30s after the rotation")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	d2 := runDaemon(t, daemonBin, data, config)
	cl2 := dialOne(t, d2.grpc)
	t.Logf("killed; after the restart %d of %d cards carry the new key", carried(t, cl2, k2), cards)
	deadline = time.Now().Add(60 * time.Second)
	for carried(t, cl2, k2) < cards {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d cards carry the new key 60s after the restart", carried(t, cl2, k2), cards)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range cards {
		cctx, cancel := cl2.ctx(ctx)
		h, err := cl2.agents.AgentHistory(cctx, &pb.AgentHistoryRequest{AgentId: fmt.Sprintf("agent-%04d", i)})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if n := len(h.GetVersions()); n != 2 {
			t.Errorf("agent-%04d has %d versions, want 2 (registered, re-signed once)", i, n)
		}
	}
}

// carried counts the registered cards whose newest version carries kid.
func carried(t *testing.T, cl *client, kid string) int {
	t.Helper()
	n := 0
	for after := ""; ; {
		cctx, cancel := cl.ctx(t.Context())
		res, err := cl.agents.ListAgents(cctx, &pb.ListAgentsRequest{AfterAgentId: after})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range res.GetAgents() {
			if slices.Contains(a.GetKids(), kid) {
				n++
			}
		}
		if after = res.GetNextAfterAgentId(); after == "" {
			return n
		}
	}
}
