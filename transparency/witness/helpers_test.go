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

// memStore keeps cosignatures as store.Cosignatures documents it. The SQL
// stores implement that role on the store branch; the collector's tests
// are about the witnesses, so a map stands in until it is merged.
type memStore struct {
	mu   sync.Mutex
	rows map[int64]map[string]transparency.Cosignature
	puts int
}

func newMemStore() *memStore {
	return &memStore{rows: map[int64]map[string]transparency.Cosignature{}}
}

func (m *memStore) PutCosignatures(_ context.Context, cs []transparency.Cosignature) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.puts++
	for _, c := range cs {
		if m.rows[c.Size] == nil {
			m.rows[c.Size] = map[string]transparency.Cosignature{}
		}
		m.rows[c.Size][c.Witness] = c
	}
	return nil
}

func (m *memStore) Cosignatures(_ context.Context, from int64, limit int) ([]transparency.Cosignature, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []transparency.Cosignature
	for size, ws := range m.rows {
		if size < from {
			continue
		}
		for _, c := range ws {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b transparency.Cosignature) int {
		if a.Size != b.Size {
			return int(b.Size - a.Size)
		}
		return cmpString(a.Witness, b.Witness)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m *memStore) WitnessSizes(context.Context) (map[string]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int64{}
	for size, ws := range m.rows {
		for w := range ws {
			out[w] = max(out[w], size)
		}
	}
	return out, nil
}

func (m *memStore) PruneCosignatures(ctx context.Context, below int64) error {
	largest, _ := m.WitnessSizes(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	for size, ws := range m.rows {
		for w := range ws {
			if size < below && largest[w] != size {
				delete(ws, w)
			}
		}
		if len(ws) == 0 {
			delete(m.rows, size)
		}
	}
	return nil
}

// of returns the witnesses with a stored cosignature of size, sorted.
func (m *memStore) of(size int64) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for w := range m.rows[size] {
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}

// all is every stored cosignature.
func (m *memStore) all(t *testing.T) []transparency.Cosignature {
	t.Helper()
	cs, err := m.Cosignatures(context.Background(), 0, 0)
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
func checkWitnessed(t *testing.T, l *testLog, st *memStore, p transparency.WitnessPolicy, size int64) {
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
