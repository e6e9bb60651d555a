package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/internal/witnesstest"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
)

// The witness scenarios of issue 29, with real litewitness processes
// (internal/witnesstest) and real cardsignd processes: a witness killed
// under load, a witness that starts late, a forked log, replicas on
// PostgreSQL sharing one set of cosignatures.

const witnessOrigin = "cardsign.test/witnessed-log"

// witnessedLog is a log key made with the CLI, and witnesses that know it.
type witnessedLog struct {
	keyFile string
	vkey    string
	keys    []transparency.Verifier
	ws      []*witnesstest.Witness
}

// newWitnessedLog makes a log key in dir and starts n litewitnesses that
// know the log (registered at size 0).
func newWitnessedLog(t *testing.T, dir string, n int) *witnessedLog {
	t.Helper()
	l := &witnessedLog{keyFile: filepath.Join(dir, "log-key.pem")}
	l.vkey = strings.TrimSpace(mustCLI(t, dir, "log", "key", "create", "--origin", witnessOrigin, l.keyFile).Stdout)
	keys, err := transparency.ParseVerifierKeys(l.vkey)
	if err != nil {
		t.Fatal(err)
	}
	l.keys = keys
	for i := range n {
		w := witnesstest.Start(t, fmt.Sprintf("w%d.witness.test", i+1))
		w.AddLog(witnessOrigin, l.vkey)
		l.ws = append(l.ws, w)
	}
	return l
}

// config is the log section naming the witnesses, with quorum and wait.
func (l *witnessedLog) config(quorum int, mode, timeout string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "log:\n  origin: %s\n  keys: [%q]\n  witnesses:\n", witnessOrigin, "file:"+l.keyFile)
	for _, w := range l.ws {
		fmt.Fprintf(&b, "    - url: %s\n      key: %s\n", w.URL, w.VKey)
	}
	fmt.Fprintf(&b, "  witness_policy:\n    quorum: %d\n  witness_wait:\n    mode: %s\n    timeout: %s\n", quorum, mode, timeout)
	return b.String()
}

// policy is quorum of l's witnesses.
func (l *witnessedLog) policy(t *testing.T, quorum int) transparency.WitnessPolicy {
	t.Helper()
	var keys []string
	for _, w := range l.ws {
		keys = append(keys, w.VKey)
	}
	p, err := transparency.NewWitnessPolicy(keys, quorum)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// cardVouches returns, for each signature of the signed card, the witnesses
// whose valid cosignatures its proof's checkpoint carries, after checking
// the proof against the log keys.
func (l *witnessedLog) cardVouches(t *testing.T, p transparency.WitnessPolicy, signed []byte) [][]string {
	t.Helper()
	var card struct {
		Signatures []struct {
			Header map[string]string `json:"header"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(signed, &card); err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for i, s := range card.Signatures {
		proof, err := transparency.ParseProof(s.Header[transparency.HeaderMember])
		if err != nil {
			t.Fatalf("signature %d: %v", i, err)
		}
		if _, _, err := proof.Verify(l.keys); err != nil {
			t.Fatalf("signature %d: proof: %v", i, err)
		}
		var names []string
		for _, v := range p.Vouches(proof.Checkpoint) {
			names = append(names, v.Witness)
		}
		out = append(out, names)
	}
	return out
}

// signCards signs n cards through c from workers goroutines, returning
// each signed card; fails on any error.
func signCards(t *testing.T, c pb.SigningServiceClient, n, workers int) [][]byte {
	return signCardsThen(t, c, n, workers, 0, nil)
}

// signCardsThen is signCards calling then once, from the worker that
// completes the at-th card, while the other workers go on signing.
func signCardsThen(t *testing.T, c pb.SigningServiceClient, n, workers, at int, then func()) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	errs := make(chan error, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	var done atomic.Int64
	for range workers {
		wg.Go(func() {
			for i := range next {
				res, err := c.SignCard(t.Context(), &pb.SignCardRequest{Card: logCard(fmt.Sprint("agent-", i), fmt.Sprintf("a%d.example.com", i))})
				if err != nil {
					errs <- fmt.Errorf("card %d: %w", i, err)
					continue
				}
				out[i] = res.GetSignedCard()
				if done.Add(1) == int64(at) && then != nil {
					then()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// requireWitnessed fails unless every signature of every card carries a
// proof whose checkpoint meets p; it returns how often each witness
// vouched.
func (l *witnessedLog) requireWitnessed(t *testing.T, p transparency.WitnessPolicy, cards [][]byte) map[string]int {
	t.Helper()
	count := map[string]int{}
	for i, c := range cards {
		for j, vs := range l.cardVouches(t, p, c) {
			if len(vs) < p.Quorum {
				t.Fatalf("card %d signature %d: its checkpoint carries cosignatures from %v, fewer than the quorum %d", i, j, vs, p.Quorum)
			}
			for _, v := range vs {
				count[v]++
			}
		}
	}
	return count
}

// waitFor polls cond until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s; %s", within, what, state())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWitnessesQuorumOneKilledUnderLoad: three real witnesses, quorum 2,
// mode require: cards signed under load all carry a checkpoint two or more
// witnesses cosigned, also after one witness is killed mid-load; the killed
// witness catches up once it is back; the cosigned cards verify with the CLI
// (--witness, --witness-quorum) and with @a2a-js/sdk; /log/checkpoint is
// cosigned.
func TestWitnessesQuorumOneKilledUnderLoad(t *testing.T) {
	dir := t.TempDir()
	l := newWitnessedLog(t, dir, 3)
	cfg := filepath.Join(dir, "cardsignd.yaml")
	writeFile(t, cfg, "limits: {rate: 0}\n"+l.config(2, "require", "10s"))
	d := startDaemon(t, filepath.Join(dir, "data"), "--config", cfg)
	c := dialDaemon(t, d.grpc)
	p := l.policy(t, 2)

	// w3 is killed (SIGKILL) when 40 of the 100 cards are signed, the
	// other workers signing on.
	cards := signCardsThen(t, c, 100, 8, 40, func() { l.ws[2].Kill() })
	second := cards[60:]
	count := l.requireWitnessed(t, p, cards)
	if count["w1.witness.test"] == 0 || count["w2.witness.test"] == 0 {
		t.Errorf("vouches per witness %v: the two live witnesses should vouch for the cards signed after the kill", count)
	}
	// Every card's proof verifies with the CLI against the witnesses'
	// keys; one proof whose checkpoint lacks w3 fails a quorum of 3.
	jwksFile := filepath.Join(dir, "jwks.json")
	_, body := httpGet(t, d.jwksURL())
	writeFile(t, jwksFile, string(body))
	logKeyFile := filepath.Join(dir, "log-key.txt")
	writeFile(t, logKeyFile, l.vkey+"\n")
	last := filepath.Join(dir, "last.json")
	writeFile(t, last, string(second[len(second)-1]))
	args := []string{"verify", "--jwks", jwksFile, "--log-key", logKeyFile}
	for _, w := range l.ws {
		args = append(args, "--witness", w.VKey)
	}
	r := cli(t, dir, nil, append(append(args, "--witness-quorum", "2"), last)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "witnessed") {
		t.Fatalf("verify --witness-quorum 2: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if vs := l.cardVouches(t, p, second[len(second)-1]); len(vs[0]) < 3 {
		if r := cli(t, dir, nil, append(append(args, "--witness-quorum", "3"), last)...); r.Code == 0 {
			t.Fatalf("verify --witness-quorum 3 accepted a card vouched for by %v only:\n%s", vs[0], r.Stdout)
		}
	}
	verifyJS(t, jwksFile, last)

	// The killed witness comes back and catches up with the log.
	l.ws[2].Restart()
	more := signCards(t, c, 4, 2)
	waitFor(t, 20*time.Second, "the restarted witness catches up with the log", func() bool {
		_, cp := httpGet(t, "http://"+d.http+"/log/checkpoint")
		return len(p.Vouches(cp)) == 3 && l.ws[2].Size(witnessOrigin) > 100
	}, func() string {
		_, cp := httpGet(t, "http://"+d.http+"/log/checkpoint")
		return fmt.Sprintf("w3 at %d; served checkpoint %q; daemon log:\n%s", l.ws[2].Size(witnessOrigin), cp, d.log.String())
	})
	l.requireWitnessed(t, p, more)
	_, metrics := httpGet(t, "http://"+d.http+"/metrics")
	for _, want := range []string{`cardsign_witness_requests_total{outcome="cosigned",witness="w3.witness.test"}`, `cardsign_witness_requests_total{outcome="failed",witness="w3.witness.test"}`, "cardsign_log_witnessed_size"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestWitnessesDownAndLate: with every witness down, mode wait returns
// cards after the timeout without the quorum and counts them, mode require
// refuses with UNAVAILABLE (the signature logged, not returned); a witness
// that starts late catches up with the whole log and cosigns it.
func TestWitnessesDownAndLate(t *testing.T) {
	for _, tc := range []struct{ mode string }{{"wait"}, {"require"}} {
		t.Run(tc.mode, func(t *testing.T) {
			// A log of its own: two daemons under one log key over two
			// databases are a fork, which the witnesses refuse.
			dir := t.TempDir()
			l := newWitnessedLog(t, dir, 2)
			for _, w := range l.ws {
				w.Kill()
			}
			p := l.policy(t, 1)
			cfg := filepath.Join(dir, tc.mode+".yaml")
			writeFile(t, cfg, "limits: {rate: 0}\n"+l.config(1, tc.mode, "300ms"))
			d := startDaemon(t, filepath.Join(dir, "data-"+tc.mode), "--config", cfg)
			c := dialDaemon(t, d.grpc)
			start := time.Now()
			res, err := c.SignCard(t.Context(), &pb.SignCardRequest{Card: logCard("down", "down.example.com")})
			took := time.Since(start)
			switch tc.mode {
			case "wait":
				if err != nil {
					t.Fatalf("mode wait with the witnesses down: %v", err)
				}
				if vs := l.cardVouches(t, p, res.GetSignedCard()); len(vs[0]) != 0 {
					t.Errorf("vouched by %v with every witness down", vs[0])
				}
				if took < 300*time.Millisecond {
					t.Errorf("returned after %s, before log.witness_wait.timeout", took)
				}
				_, metrics := httpGet(t, "http://"+d.http+"/metrics")
				if !strings.Contains(string(metrics), `cardsign_log_unwitnessed_proofs_total{mode="wait"} 1`) {
					t.Errorf("the un-witnessed proof is not counted:\n%s", grepLines(string(metrics), "unwitnessed"))
				}
			case "require":
				if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "not returned") || !strings.Contains(err.Error(), "audit record") {
					t.Fatalf("mode require with the witnesses down: %v, want UNAVAILABLE naming the audit record", err)
				}
			}
			// A witness that starts late (after its backoff, within
			// seconds) catches up with the whole log and cosigns it; the
			// next card is witnessed at once.
			l.ws[0].Restart()
			defer l.ws[0].Kill()
			size := d.logSize(t)
			waitFor(t, 20*time.Second, "the late witness knows the whole log", func() bool { return l.ws[0].Size(witnessOrigin) >= size },
				func() string {
					return fmt.Sprintf("witness at %d, log at %d\n%s", l.ws[0].Size(witnessOrigin), size, d.log.String())
				})
			res, err = c.SignCard(t.Context(), &pb.SignCardRequest{Card: logCard("late", "late.example.com")})
			if err != nil {
				t.Fatalf("%v\n%s", err, d.log.String())
			}
			if vs := l.cardVouches(t, p, res.GetSignedCard()); len(vs[0]) != 1 || vs[0][0] != "w1.witness.test" {
				t.Errorf("after the late witness came: vouched by %v", vs[0])
			}
		})
	}
}

// logSize is the size of d's log: as many leaves as audit records.
func (d *daemon) logSize(t *testing.T) int64 {
	t.Helper()
	var n int64
	for _, line := range strings.Split(mustCLI(t, t.TempDir(), "audit", "list", "--json", "--server", d.grpc).Stdout, "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n
}

func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestWitnessesRefuseAForkedLog: two cardsignd under the same log origin
// and key, over two databases, sign two histories. The witnesses saw the
// first: they refuse the second's checkpoints (a split-view alarm on its
// /readyz, in its metrics and its log), so its cards fail --witness-quorum
// while the first's pass.
func TestWitnessesRefuseAForkedLog(t *testing.T) {
	dir := t.TempDir()
	l := newWitnessedLog(t, dir, 3)
	p := l.policy(t, 2)
	cfgA := filepath.Join(dir, "a.yaml")
	writeFile(t, cfgA, "limits: {rate: 0}\n"+l.config(2, "wait", "2s"))
	a := startDaemon(t, filepath.Join(dir, "data-a"), "--config", cfgA)
	honest := signCards(t, dialDaemon(t, a.grpc), 5, 2)
	l.requireWitnessed(t, p, honest)

	cfgB := filepath.Join(dir, "b.yaml")
	writeFile(t, cfgB, "limits: {rate: 0}\n"+l.config(2, "wait", "1s"))
	b := startDaemon(t, filepath.Join(dir, "data-b"), "--config", cfgB)
	forked := signCards(t, dialDaemon(t, b.grpc), 3, 1)
	for i, c := range forked {
		if vs := l.cardVouches(t, p, c); len(vs[0]) != 0 {
			t.Errorf("forked card %d: vouched by %v", i, vs[0])
		}
	}
	// The CLI refuses a forked card with a quorum, and names why.
	jwksFile := filepath.Join(dir, "jwks-b.json")
	_, body := httpGet(t, b.jwksURL())
	writeFile(t, jwksFile, string(body))
	card := filepath.Join(dir, "forked.json")
	writeFile(t, card, string(forked[0]))
	args := []string{"verify", "--jwks", jwksFile, "--log-key", l.vkey}
	if r := cli(t, dir, nil, append(args, card)...); r.Code != 0 {
		t.Fatalf("the forked card's proof should verify against the log key alone (that is the attack): %s%s", r.Stdout, r.Stderr)
	}
	for _, w := range l.ws {
		args = append(args, "--witness", w.VKey)
	}
	r := cli(t, dir, nil, append(args, "--witness-quorum", "2", card)...)
	if r.Code != 1 || !strings.Contains(r.Stdout, "not witnessed") {
		t.Fatalf("verify --witness-quorum 2 of a forked card: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	waitFor(t, 10*time.Second, "the forked daemon reports the split view", func() bool {
		_, ready := httpGet(t, "http://"+b.http+"/readyz")
		return strings.Contains(string(ready), "log_witness_alarm")
	}, func() string {
		_, ready := httpGet(t, "http://"+b.http+"/readyz")
		return string(ready) + "\n" + b.log.String()
	})
	_, metrics := httpGet(t, "http://"+b.http+"/metrics")
	if !strings.Contains(string(metrics), `cardsign_witness_conflicts_total{witness="w1.witness.test"}`) ||
		strings.Contains(string(metrics), `cardsign_witness_conflicts_total{witness="w1.witness.test"} 0`) {
		t.Errorf("no conflict counted:\n%s", grepLines(string(metrics), "conflicts"))
	}
	if !strings.Contains(b.log.String(), "SPLIT VIEW ALARM") {
		t.Errorf("the forked daemon did not log the alarm")
	}
	// The honest daemon goes on being witnessed.
	l.requireWitnessed(t, p, signCards(t, dialDaemon(t, a.grpc), 2, 1))
}

// TestWitnessesReplicasOnPostgreSQL: two replicas on one PostgreSQL
// database share one log and one set of cosignatures: one replica (the
// duties lease holder) asks the witnesses, and the cards both return carry
// cosigned checkpoints.
func TestWitnessesReplicasOnPostgreSQL(t *testing.T) {
	url := newPGDatabase(t)
	dir := t.TempDir()
	l := newWitnessedLog(t, dir, 3)
	p := l.policy(t, 2)
	rs := startReplicas(t, url, 2, replicaOptions{config: l.config(2, "require", "10s")})
	for _, d := range rs.ds {
		l.requireWitnessed(t, p, signCards(t, dialDaemon(t, d.grpc), 20, 4))
	}
	asked := 0
	for _, d := range rs.ds {
		_, metrics := httpGet(t, "http://"+d.http+"/metrics")
		for _, line := range strings.Split(string(metrics), "\n") {
			if strings.HasPrefix(line, `cardsign_witness_requests_total{outcome="cosigned"`) && !strings.HasSuffix(line, " 0") {
				asked++
				break
			}
		}
	}
	if asked != 1 {
		t.Errorf("%d replicas asked the witnesses, want exactly 1 (the duties lease holder)", asked)
	}
	// Both serve the same witnessed view.
	waitFor(t, 10*time.Second, "both replicas serve a checkpoint with the quorum", func() bool {
		for _, d := range rs.ds {
			_, cp := httpGet(t, "http://"+d.http+"/log/checkpoint")
			if len(p.Vouches(cp)) < 2 {
				return false
			}
		}
		return true
	}, func() string { return "" })
}

// TestWitnessesProofRefresh: a card returned without the quorum (witnesses
// down, mode wait) fails --witness-quorum; once the witnesses are back,
// cardsign log proof refresh gives it a proof in the witnessed checkpoint,
// changing nothing else, and it verifies. log checkpoint and log monitor
// report which witnesses vouched, and exit 4 while the quorum is missing.
func TestWitnessesProofRefresh(t *testing.T) {
	dir := t.TempDir()
	l := newWitnessedLog(t, dir, 2)
	for _, w := range l.ws {
		w.Kill()
	}
	cfg := filepath.Join(dir, "cardsignd.yaml")
	writeFile(t, cfg, "limits: {rate: 0}\n"+l.config(2, "wait", "200ms"))
	d := startDaemon(t, filepath.Join(dir, "data"), "--config", cfg)
	res, err := dialDaemon(t, d.grpc).SignCard(t.Context(), &pb.SignCardRequest{Card: logCard("refresh", "refresh.example.com")})
	if err != nil {
		t.Fatal(err)
	}
	card := filepath.Join(dir, "card.json")
	writeFile(t, card, string(res.GetSignedCard()))
	jwksFile := filepath.Join(dir, "jwks.json")
	_, body := httpGet(t, d.jwksURL())
	writeFile(t, jwksFile, string(body))
	logURL := "http://" + d.http + "/log/"
	var wflags []string
	for _, w := range l.ws {
		wflags = append(wflags, "--witness", w.VKey)
	}
	verify := func(file string) result {
		return cli(t, dir, nil, append(append([]string{"verify", "--jwks", jwksFile, "--log-key", l.vkey}, wflags...), file)...)
	}
	if r := verify(card); r.Code != 1 || !strings.Contains(r.Stdout, "not witnessed") {
		t.Fatalf("an un-witnessed card: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	logArgs := func(sub ...string) []string {
		return append(append(append([]string{"log"}, sub...), "--url", logURL, "--log-key", l.vkey), wflags...)
	}
	// No checkpoint has the quorum yet: the log serves none (503) rather
	// than one the first witnessed checkpoint would seem to roll back.
	if r := cli(t, dir, nil, logArgs("checkpoint")...); r.Code != 1 || !strings.Contains(r.Stderr, "quorum yet") {
		t.Fatalf("log checkpoint with the witnesses down: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := cli(t, dir, nil, append(logArgs("proof", "refresh"), card)...); r.Code != 1 {
		t.Fatalf("proof refresh with the witnesses down: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	for _, w := range l.ws {
		w.Restart()
	}
	p := l.policy(t, 2)
	waitFor(t, 30*time.Second, "the witnesses come back and cosign", func() bool {
		_, cp := httpGet(t, logURL+"checkpoint")
		return len(p.Vouches(cp)) == 2
	}, func() string { return d.log.String() })
	r := cli(t, dir, nil, logArgs("checkpoint")...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "witnessed by w1.witness.test, w2.witness.test") {
		t.Fatalf("log checkpoint: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := cli(t, dir, nil, append([]string{"audit", "verify", "--server", d.grpc, "--log", logURL, "--log-key", l.vkey}, wflags...)...); r.Code != 0 || !strings.Contains(r.Stdout, "witnessed by w1.witness.test, w2.witness.test") {
		t.Fatalf("audit verify --log --witness: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	state := filepath.Join(dir, "monitor-state.json")
	if r := cli(t, dir, nil, append(logArgs("monitor"), "--state", state, "--json")...); r.Code != 0 || !strings.Contains(r.Stdout, `"event":"witnesses"`) || !strings.Contains(r.Stdout, `"witnessed":true`) {
		t.Fatalf("log monitor: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	refreshed := filepath.Join(dir, "refreshed.json")
	if r := cli(t, dir, nil, append(logArgs("proof", "refresh"), "--out", refreshed, card)...); r.Code != 0 {
		t.Fatalf("proof refresh: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := verify(refreshed); r.Code != 0 || !strings.Contains(r.Stdout, "witnessed by") {
		t.Fatalf("the refreshed card: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// Nothing but the proofs changed: putting the old proofs back gives
	// the card as it was, byte for byte.
	before, after := readFile(t, card), readFile(t, refreshed)
	oldProofs, err := signer.Proofs(before, strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := signer.ReplaceProofs(after, strictjson.Limits{}, oldProofs)
	if err != nil || string(back) != string(before) {
		t.Fatalf("the refreshed card differs in more than its proofs (%v):\nbefore %s\nafter  %s", err, before, after)
	}
	verifyJS(t, jwksFile, refreshed)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
