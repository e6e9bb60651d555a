package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
)

// soakDuration is how long the soak test loads the daemon: 40s by default
// (CI), longer with CARDSIGN_SOAK=5m.
func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("CARDSIGN_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CARDSIGN_SOAK: %v", err)
		}
		return d
	}
	return 40 * time.Second
}

// Bounds the soak test holds the daemon to. A leak of one goroutine or a few
// KiB per request would cross them within the default run (tens of
// thousands of requests).
const (
	soakGoroutineSlack = 25       // goroutines after the load, beyond those before it
	soakHeapSlack      = 24 << 20 // bytes the heap may grow from the first half of the load to the second
)

// TestDaemonSoak runs concurrent callers against a daemon with mTLS, tokens,
// a signing policy and a rate limit: valid cards, malformed and lint-failing
// cards, cards the policy refuses, unknown tokens, and one caller far over
// its rate. Afterwards every signature a caller received has its audit
// record, every policy refusal has its refused record, the chain verifies,
// goroutines and heap stayed bounded, and the daemon stops cleanly.
func TestDaemonSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test: run without -short")
	}
	s := startSecureDaemon(t, "limits:\n  rate: 100\n  burst: 100")
	good, _ := os.ReadFile(cardFile("security.json"))
	evil := []byte(strings.ReplaceAll(string(good), "https://secure.example.com/a2a", "https://attacker.net/a2a"))

	goroutines := func() float64 {
		_, body := s.httpsGet(t, "/metrics", s.auditorTok)
		return metric(t, body, "go_goroutines", nil)
	}
	heap := func() float64 {
		_, body := s.httpsGet(t, "/metrics", s.auditorTok)
		return metric(t, body, "go_memstats_heap_alloc_bytes", nil)
	}
	g0 := goroutines()

	var (
		signed, invalid, refused, limited, unauth, other atomic.Int64
		mu                                               sync.Mutex
		received                                         = map[int64]string{} // audit sequence → signature
		refusedSeqs                                      = map[int64]bool{}
	)
	conns := []*grpc.ClientConn{
		s.conn(t, s.signerTok, s.pki.clientCert, s.pki.clientKey),
		s.conn(t, s.floodTok, s.pki.clientCert, s.pki.clientKey),
		s.conn(t, "cst_unknown", s.pki.clientCert, s.pki.clientKey),
		s.conn(t, "", s.pki.clientCert, s.pki.clientKey),
	}
	signer, flood, stranger, byCert := pb.NewSigningServiceClient(conns[0]), pb.NewSigningServiceClient(conns[1]),
		pb.NewSigningServiceClient(conns[2]), pb.NewSigningServiceClient(conns[3])

	call := func(c pb.SigningServiceClient, card []byte) {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		res, err := c.SignCard(ctx, &pb.SignCardRequest{Card: card})
		switch st := status.Convert(err); {
		case err == nil:
			var sc struct{ Signatures []struct{ Signature string } }
			if err := json.Unmarshal(res.GetSignedCard(), &sc); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for i, sig := range res.GetSignatures() {
				received[sig.GetAuditSequence()] = sc.Signatures[i].Signature
			}
			mu.Unlock()
			signed.Add(1)
		case st.Code() == codes.InvalidArgument:
			invalid.Add(1)
		case st.Code() == codes.PermissionDenied:
			refused.Add(1)
			var seq int64
			if _, err := fmt.Sscanf(st.Message()[strings.LastIndex(st.Message(), "(audit record "):], "(audit record %d)", &seq); err != nil {
				t.Errorf("refusal without its audit record: %s", st.Message())
				return
			}
			mu.Lock()
			refusedSeqs[seq] = true
			mu.Unlock()
		case st.Code() == codes.ResourceExhausted:
			limited.Add(1)
		case st.Code() == codes.Unauthenticated:
			unauth.Add(1)
		default:
			other.Add(1)
			t.Errorf("unexpected answer: %v", err)
		}
	}
	// A valid card with a fresh version each time, so every record differs.
	fresh := func(r *rand.Rand) []byte {
		return []byte(strings.Replace(string(good), `"version": "`, fmt.Sprintf(`"version": "%d.`, r.IntN(1e9)), 1))
	}
	hostile := [][]byte{
		[]byte(`{"name":`),
		[]byte(`{"name":"a","name":"b"}`),
		[]byte(`[1,2,3]`),
		[]byte(strings.Replace(string(good), `"tags": [`, `"tags": [], "x": [`, 1)),
		append([]byte(`{"name":"`), append([]byte(strings.Repeat("x", 300<<10)), '"', '}')...),
		[]byte(strings.Repeat("[", 100000)),
		[]byte("{\"name\":\"\xff\"}"),
	}

	duration := soakDuration(t)
	stop := time.Now().Add(duration)
	var wg sync.WaitGroup
	worker := func(seed uint64, f func(r *rand.Rand)) {
		t.Helper()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, seed))
			for time.Now().Before(stop) {
				f(r)
			}
		}()
	}
	for i := range 4 { // steady signers: mostly valid, some refused, some hostile
		worker(uint64(i), func(r *rand.Rand) {
			c := signer
			if r.IntN(2) == 0 {
				c = byCert
			}
			switch n := r.IntN(10); {
			case n < 7:
				call(c, fresh(r))
			case n < 8:
				call(c, evil)
			default:
				call(c, hostile[r.IntN(len(hostile))])
			}
			time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
		})
	}
	for i := range 4 { // one identity far over its rate
		worker(uint64(100+i), func(r *rand.Rand) {
			call(flood, fresh(r))
			time.Sleep(time.Millisecond)
		})
	}
	worker(200, func(r *rand.Rand) { // unknown token
		call(stranger, fresh(r))
		time.Sleep(10 * time.Millisecond)
	})

	// Sample the heap during the load: a leak shows as growth from the
	// first half to the second.
	var firstHalf, secondHalf float64
	for start := time.Now(); time.Now().Before(stop); time.Sleep(time.Second) {
		h := heap()
		if time.Since(start) < duration/2 {
			firstHalf = max(firstHalf, h)
		} else {
			secondHalf = max(secondHalf, h)
		}
	}
	wg.Wait()
	t.Logf("soak %s: %d signed, %d invalid, %d policy-refused, %d rate-limited, %d unauthenticated; heap max %.1f MiB → %.1f MiB",
		duration, signed.Load(), invalid.Load(), refused.Load(), limited.Load(), unauth.Load(), firstHalf/(1<<20), secondHalf/(1<<20))
	if signed.Load() < 100 || invalid.Load() == 0 || refused.Load() == 0 || limited.Load() == 0 || unauth.Load() == 0 {
		t.Fatal("the mix did not run: every kind of request must have happened")
	}
	if secondHalf > firstHalf+soakHeapSlack {
		t.Errorf("heap grew from %.1f MiB to %.1f MiB under steady load (bound %d MiB)", firstHalf/(1<<20), secondHalf/(1<<20), soakHeapSlack>>20)
	}

	// Every signature received, and every refusal, is in the audit log.
	audited := map[int64]struct{ Outcome, Signature string }{}
	list := s.cliAs(t, s.auditorFile, "audit", "list", "--json")
	if list.Code != 0 {
		t.Fatalf("audit list: %s", list.Stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(list.Stdout), "\n") {
		var rec struct {
			Seq       int64 `json:"sequence"`
			Outcome   string
			Signature string
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		audited[rec.Seq] = struct{ Outcome, Signature string }{rec.Outcome, rec.Signature}
	}
	for seq, sig := range received {
		if a, ok := audited[seq]; !ok || a.Outcome != "signed" || a.Signature != sig {
			t.Fatalf("signature returned with audit record %d is not in the audit log as such: %+v", seq, a)
		}
	}
	for seq := range refusedSeqs {
		if audited[seq].Outcome != "refused" {
			t.Fatalf("refusal %d is not audited as refused: %+v", seq, audited[seq])
		}
	}
	if r := s.cliAs(t, s.auditorFile, "audit", "verify"); r.Code != 0 {
		t.Fatalf("audit verify: %s%s", r.Stdout, r.Stderr)
	}

	// Connections made for the load are gone; so must their goroutines be.
	for _, c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	g1 := goroutines()
	for g1 > g0+soakGoroutineSlack && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		g1 = goroutines()
	}
	t.Logf("goroutines: %v before, %v after", g0, g1)
	if g1 > g0+soakGoroutineSlack {
		t.Errorf("goroutines: %v before the load, %v after it (bound +%d)", g0, g1, soakGoroutineSlack)
	}
	s.stop() // no crash: a clean exit on SIGTERM
}
