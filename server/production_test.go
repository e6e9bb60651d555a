package server

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/policy"
)

// slowSigner records how many signatures run at once.
type slowSigner struct {
	crypto.Signer
	running, peak atomic.Int32
}

func (s *slowSigner) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	n := s.running.Add(1)
	defer s.running.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	time.Sleep(5 * time.Millisecond)
	return s.Signer.Sign(r, d, o)
}

func TestLimitedSignerBoundsConcurrency(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	inner := &slowSigner{Signer: key}
	var observed atomic.Int32
	ls := &limitedSigner{inner: inner, slots: make(chan struct{}, 3), observe: func(time.Duration) { observed.Add(1) }}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			digest := make([]byte, 32)
			if _, err := ls.SignContext(context.Background(), rand.Reader, digest, crypto.SHA256); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if p := inner.peak.Load(); p > 3 || p < 2 {
		t.Fatalf("peak concurrency %d with 3 slots", p)
	}
	if observed.Load() != 20 {
		t.Fatalf("observed %d signatures, want 20", observed.Load())
	}
	// A caller whose deadline passes while every slot is taken gives up.
	for range 3 {
		ls.slots <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := ls.SignContext(ctx, rand.Reader, make([]byte, 32), crypto.SHA256); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a slot past the deadline: %v", err)
	}
}

func TestReadinessIsTheLastCanary(t *testing.T) {
	ctx := context.Background()
	a, _ := newAuthority(t)
	if err := a.Ready(); !errors.Is(err, ErrNotChecked) {
		t.Fatalf("before any check: %v", err)
	}
	if err := a.CheckReadiness(ctx); err != nil {
		t.Fatalf("canary: %v", err)
	}
	if err := a.Ready(); err != nil {
		t.Fatalf("after a good canary: %v", err)
	}
	// The key file disappears and the cached signer is dropped, as after a
	// restart: the next canary fails and readiness follows it, not before.
	kid := activeKID(t, a)
	a.mu.Lock()
	uri := a.signers[kid].URI
	delete(a.signers, kid)
	a.mu.Unlock()
	if err := os.Remove(filepath.Clean(uri[len("file:"):])); err != nil {
		t.Fatal(err)
	}
	if err := a.Ready(); err != nil {
		t.Fatalf("readiness changed without a check: %v", err)
	}
	if err := a.CheckReadiness(ctx); err == nil {
		t.Fatal("canary passed without the key file")
	}
	if err := a.Ready(); err == nil {
		t.Fatal("ready after a failed canary")
	}
	a.Drain()
	if err := a.Ready(); !errors.Is(err, ErrDraining) {
		t.Fatalf("draining: %v", err)
	}
}

func TestPolicyRefusalIsAudited(t *testing.T) {
	ctx := context.Background()
	a, _ := newAuthority(t)
	pol, probs := policy.Compile(policy.Config{Rules: []policy.Rule{{
		Name: "team-a", Identities: []string{"token:team-a"}, CardNames: []string{"*"}, Hosts: []string{"*.team-a.example.com"},
	}}})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	a.cfg.Policy = pol
	card := []byte(`{"name":"A","description":"d","supportedInterfaces":[{"url":"https://evil.example.net/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)
	id := access.Identity{Name: "token:team-a", Method: access.MethodToken, Roles: []access.Role{access.RoleSigner}}
	_, err := a.Sign(ctx, SignRequest{Card: card, Caller: id.Name, Identity: id, RequestID: "r1"})
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Refusal.Rule != "team-a" || refused.Seq != 1 {
		t.Fatalf("want a refusal by team-a audited as record 1, got %v", err)
	}
	recs, err := a.store.ListAudit(ctx, 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("audit: %v %v", recs, err)
	}
	r := recs[0]
	if r.Outcome != audit.OutcomeRefused || r.Caller != "token:team-a" || r.RequestID != "r1" || r.CardName != "A" || r.KID != "" || len(r.CanonicalSHA256) != 32 || r.Reason != refused.Error() {
		t.Fatalf("refused record: %+v", r)
	}
	// The same card for a host the rule allows is signed and chained after.
	ok := []byte(strings.Replace(string(card), "evil.example.net", "api.team-a.example.com", 1))
	res, err := a.Sign(ctx, SignRequest{Card: ok, Caller: id.Name, Identity: id})
	if err != nil || res.Audit[0].Seq != 2 {
		t.Fatalf("allowed card: %v", err)
	}
}
