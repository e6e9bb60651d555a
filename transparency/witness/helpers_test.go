package witness

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/witnesstest"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/store/storetest"
	"github.com/cardsign/cardsign/transparency"
)

const origin = "cardsign.example/witness-test"

// testLog is a real transparency log: a Checkpointer over a SQLite store
// whose audit appends grow the tree.
type testLog struct {
	*transparency.Checkpointer
	signer *transparency.Signer
	st     *sqlite.Store
	fork   string // distinguishes the leaves of a forked log
	n      int
}

// newLog is a log of origin signed with key; logs of one key and another
// fork are a split view.
func newLog(t *testing.T, key ed25519.PrivateKey, fork string) *testLog {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "log.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s, err := transparency.NewSigner(origin, key)
	if err != nil {
		t.Fatal(err)
	}
	return &testLog{Checkpointer: transparency.NewCheckpointer(s, st), signer: s, st: st, fork: fork}
}

func logKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// vkey is the log's verifier key, as witnesses register it.
func (l *testLog) vkey() string { return l.signer.SigningKeys()[0] }

// grow appends n audit records (n leaves).
func (l *testLog) grow(t *testing.T, n int) {
	t.Helper()
	recs := storetest.ChainedRecords(l.n + n)[l.n:]
	for i := range recs {
		recs[i].RequestID += l.fork
	}
	if _, err := l.st.AppendAudit(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	l.n += n
}

// witnesses starts litewitnesses named w1, w2, … with the log registered,
// and returns them with their endpoints and a policy of quorum q.
func witnesses(t *testing.T, l *testLog, n, q int) ([]*witnesstest.Witness, []Endpoint, transparency.WitnessPolicy) {
	t.Helper()
	var lws []*witnesstest.Witness
	var eps []Endpoint
	var keys []string
	for i := range n {
		w, ep := startWitness(t, l, "witness.example/w"+string(rune('1'+i)))
		lws = append(lws, w)
		eps = append(eps, ep)
		keys = append(keys, w.VKey)
	}
	p, err := transparency.NewWitnessPolicy(keys, q)
	if err != nil {
		t.Fatal(err)
	}
	return lws, eps, p
}

// startWitness starts a litewitness with the log registered.
func startWitness(t *testing.T, l *testLog, name string) (*witnesstest.Witness, Endpoint) {
	t.Helper()
	w := witnesstest.Start(t, name)
	w.AddLog(origin, l.vkey())
	return w, endpoint(t, w.VKey, w.URL)
}

func endpoint(t *testing.T, vkey, url string) Endpoint {
	t.Helper()
	w, err := transparency.ParseWitnessKey(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return Endpoint{Witness: w, URL: url}
}

// cosigStore is where the tests' collectors keep cosignatures: a real
// SQLite store of its own (store.Cosignatures), as cardsignd's.
type cosigStore struct{ *sqlite.Store }

func newCosigStore(t *testing.T) *cosigStore {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "cosignatures.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &cosigStore{st}
}

// of returns the witnesses with a stored cosignature of size, sorted.
func (m *cosigStore) of(size int64) []string {
	cs, err := m.Cosignatures(context.Background(), size, 1<<16)
	if err != nil {
		panic(err)
	}
	var out []string
	for _, c := range cs {
		if c.Size == size {
			out = append(out, c.Witness)
		}
	}
	slices.Sort(out)
	return out
}

// all is every stored cosignature.
func (m *cosigStore) all(t *testing.T) []transparency.Cosignature {
	t.Helper()
	cs, err := m.Cosignatures(context.Background(), 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// observer records what the collector reports.
type observer struct {
	mu        sync.Mutex
	answers   []answered
	conflicts []*ConflictError
	stored    []int64
	storedC   chan int64
}

type answered struct {
	witness string
	size    int64
	err     error
}

func newObserver() *observer { return &observer{storedC: make(chan int64, 1000)} }

func (o *observer) Answered(w string, size int64, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.answers = append(o.answers, answered{w, size, err})
}

func (o *observer) Conflict(c *ConflictError) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.conflicts = append(o.conflicts, c)
}

func (o *observer) Stored(size int64) {
	o.mu.Lock()
	o.stored = append(o.stored, size)
	o.mu.Unlock()
	o.storedC <- size
}

func (o *observer) conflictsOf() []*ConflictError {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.conflicts)
}

func (o *observer) answersOf() []answered {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.answers)
}

// collector is a collector of l's checkpoints for the endpoints.
func collector(t *testing.T, l *testLog, st Store, eps []Endpoint, p transparency.WitnessPolicy, o Options) *Collector {
	t.Helper()
	if o.Observer == nil {
		o.Observer = newObserver()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	c, err := NewCollector(l, st, eps, p, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkWitnessed checks that the cosignatures st holds of size make l's
// checkpoint of size pass p: they verify, and a quorum of them.
func checkWitnessed(t *testing.T, l *testLog, st *cosigStore, p transparency.WitnessPolicy, size int64) {
	t.Helper()
	cp, err := l.CheckpointAt(context.Background(), size)
	if err != nil {
		t.Fatal(err)
	}
	var cs []transparency.Cosignature
	for _, c := range st.all(t) {
		if c.Size == size {
			cs = append(cs, c)
		}
	}
	msg, err := transparency.AddCosignatures(cp, cs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Check(msg); err != nil {
		t.Fatalf("the stored cosignatures of size %d: %v", size, err)
	}
	if _, err := transparency.OpenCheckpoint(msg, l.signer.Verifiers()); err != nil {
		t.Fatalf("the cosigned checkpoint of size %d does not open: %v", size, err)
	}
}
