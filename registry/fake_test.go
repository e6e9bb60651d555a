package registry

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlite"
)

// countingAgents is a real store's agent rows, counting the RevokedCards
// reads: the registry is to read them once per KeyRefresh, not per request.
type countingAgents struct {
	store.Agents
	reads atomic.Int64
}

func (c *countingAgents) RevokedCards(ctx context.Context) ([]store.CardRevocation, error) {
	c.reads.Add(1)
	return c.Agents.RevokedCards(ctx)
}

// openStore opens a SQLite store in a temporary directory, closed when the
// test ends.
func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "cardsign.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// testKeys are ES256 keys by kid, made on first use: the cards the tests
// register carry real signatures.
type testKeys struct {
	mu   sync.Mutex
	keys map[string]signer.Key
}

func (k *testKeys) key(t testing.TB, kid string) signer.Key {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if key, ok := k.keys[kid]; ok {
		return key
	}
	priv, err := file.Generate(jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	if k.keys == nil {
		k.keys = map[string]signer.Key{}
	}
	k.keys[kid] = signer.Key{Signer: priv, Alg: jose.ES256, KID: kid}
	return k.keys[kid]
}

// sign prepares raw and signs it with kids.
func (k *testKeys) sign(t testing.TB, raw []byte, kids ...string) *signer.Result {
	t.Helper()
	var keys []signer.Key
	for _, kid := range kids {
		keys = append(keys, k.key(t, kid))
	}
	res, err := prepared(t, raw).Sign(t.Context(), keys, "")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// fakeKeys is the signing keys: signing sign now, revoked are revoked.
type fakeKeys struct {
	mu      sync.Mutex
	signing []string
	revoked []string
	held    map[string]bool // what HoldRetired was last given
}

func (k *fakeKeys) Records(context.Context) ([]jwks.KeyRecord, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var recs []jwks.KeyRecord
	now := time.Now()
	for _, kid := range k.signing {
		recs = append(recs, jwks.KeyRecord{KID: kid})
	}
	for _, kid := range k.revoked {
		recs = append(recs, jwks.KeyRecord{KID: kid, RevokedAt: &now})
	}
	return recs, nil
}

func (k *fakeKeys) SigningKIDs(context.Context, time.Time) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.signing), nil
}

func (k *fakeKeys) HoldRetired(_ context.Context, carried map[string]bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held = carried
	return nil
}

// fakeSigner signs again as the authority does: Prepare, sign with the
// signing keys, Register; fail names agents it refuses to sign.
type fakeSigner struct {
	t    testing.TB
	reg  *Registry
	keys *fakeKeys
	sign *testKeys
	mu   sync.Mutex
	done []Resignature
	fail map[string]error
	// before, when set, is called with the number of re-signatures asked
	// so far (this one included), before this one signs.
	before func(n int)
	// signedBy are the kids each agent's re-signatures were signed by.
	signedBy map[string][][]string
}

func (s *fakeSigner) SignAgain(ctx context.Context, rs Resignature) error {
	s.mu.Lock()
	s.done = append(s.done, rs)
	err := s.fail[rs.Registration.AgentID]
	n := len(s.done)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if s.before != nil {
		s.before(n)
	}
	kids, _ := s.keys.SigningKIDs(ctx, time.Now())
	s.mu.Lock()
	if s.signedBy == nil {
		s.signedBy = map[string][][]string{}
	}
	s.signedBy[rs.Registration.AgentID] = append(s.signedBy[rs.Registration.AgentID], kids)
	s.mu.Unlock()
	res := s.sign.sign(s.t, rs.Card, kids...)
	reg, _, err := s.reg.Prepare(ctx, rs.Registration, res.Loaded.Value, ResignCaller)
	if err != nil {
		return err
	}
	_, err = s.reg.Register(ctx, reg, res, rs.Options, ResignCaller, 1)
	return err
}

// testCard is a valid card to register.
func testCard(t testing.TB) []byte {
	t.Helper()
	return testsupport.Card(t, "security.json")
}

// prepared is raw prepared for signing.
func prepared(t testing.TB, raw []byte) *signer.Prepared {
	t.Helper()
	p, err := signer.Prepare(raw, signer.PrepareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testSecret is the seal secret of the tests with a transparency log.
const testSecret = "0123456789abcdef0123456789abcdef"

// withLog gives the registry a transparency log: private agents' entries
// are sealed with testSecret.
func withLog(c *Config) { c.SealSecret = func() ([]byte, error) { return []byte(testSecret), nil } }

// testRegistry is a registry over a SQLite store, with keys k1 signing.
type testRegistry struct {
	*Registry
	agents   *countingAgents
	keys     *fakeKeys
	signKeys *testKeys
	signer   *fakeSigner
	skew     atomic.Int64 // how far the registry's clock is ahead, in ns
	mu       sync.Mutex
	admin    []audit.Record // Committed
	revoked  int            // CardRevoked calls
	wakes    int
	outcomes map[string]int
}

func newTestRegistry(t testing.TB, edit func(*Config)) *testRegistry {
	tr := &testRegistry{agents: &countingAgents{Agents: openStore(t)}, keys: &fakeKeys{signing: []string{"k1"}},
		signKeys: &testKeys{}, outcomes: map[string]int{}}
	tr.signer = &fakeSigner{t: t, keys: tr.keys, sign: tr.signKeys, fail: map[string]error{}}
	cfg := Config{
		Agents: tr.agents, Keys: tr.keys, Signer: tr.signer,
		Now:     func() time.Time { return time.Now().Add(time.Duration(tr.skew.Load())) },
		ActorOf: func(context.Context) Actor { return Actor{Caller: "cardsignd", RequestID: "req"} },
		Log:     slog.New(slog.DiscardHandler),
		Committed: func(r audit.Record) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			tr.admin = append(tr.admin, r)
		},
		CardRevoked: func() { tr.mu.Lock(); tr.revoked++; tr.mu.Unlock() },
		Wake:        func() { tr.mu.Lock(); tr.wakes++; tr.mu.Unlock() },
		Resigned:    func(o string) { tr.mu.Lock(); tr.outcomes[o]++; tr.mu.Unlock() },
	}
	if edit != nil {
		edit(&cfg)
	}
	tr.Registry = New(cfg)
	tr.signer.reg = tr.Registry
	return tr
}

// later moves the registry's clock d ahead of the store's.
func (tr *testRegistry) later(d time.Duration) { tr.skew.Add(int64(d)) }

// register registers the test card, named id (so that each agent's card
// has content of its own), as agent id by caller, signed by kids.
func (tr *testRegistry) register(t testing.TB, id string, vis store.Visibility, caller string, kids ...string) (store.AgentCard, error) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(testCard(t), &doc); err != nil {
		t.Fatal(err)
	}
	doc["name"] = id
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	res := tr.signKeys.sign(t, raw, kids...)
	reg, _, err := tr.Prepare(t.Context(), &Registration{AgentID: id, Visibility: vis}, res.Loaded.Value, caller)
	if err != nil {
		return store.AgentCard{}, err
	}
	return tr.Register(t.Context(), reg, res, Options{}, caller, 1)
}
