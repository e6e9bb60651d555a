package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
)

// memAgents is store.Agents in memory, with the rules the SQL stores keep:
// versions count up, a put replacing a version that is no longer the
// newest is store.ErrSuperseded, keep bounds the versions.
type memAgents struct {
	mu       sync.Mutex
	versions map[string][]store.AgentCard // oldest first
	revoked  []store.CardRevocation
	seq      int64
	reads    int // RevokedCards calls
}

func newMemAgents() *memAgents { return &memAgents{versions: map[string][]store.AgentCard{}} }

func (m *memAgents) PutAgentCard(_ context.Context, c store.AgentCard, keep int) (store.AgentCard, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.versions[c.ID]
	if c.Replaces != 0 && (len(vs) == 0 || vs[len(vs)-1].Version != c.Replaces) {
		return store.AgentCard{}, store.ErrSuperseded
	}
	c.Version = 1
	if len(vs) > 0 {
		c.Version = vs[len(vs)-1].Version + 1
	}
	c.StoredAt = time.Now()
	vs = append(vs, c)
	if len(vs) > keep {
		vs = vs[len(vs)-keep:]
	}
	m.versions[c.ID] = vs
	return c, nil
}

func (m *memAgents) AgentCard(_ context.Context, id string, v int64) (store.AgentCard, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.versions[id]
	for i := len(vs) - 1; i >= 0; i-- {
		if v == 0 || vs[i].Version == v {
			return vs[i], nil
		}
	}
	return store.AgentCard{}, store.ErrNotFound
}

func (m *memAgents) PublicAgentCard(ctx context.Context, id string) (store.AgentCard, error) {
	c, err := m.AgentCard(ctx, id, 0)
	if err == nil && c.Visibility != store.Public {
		return store.AgentCard{}, store.ErrNotFound
	}
	return c, err
}

func (m *memAgents) CountAgents(_ context.Context, caller, skip string) (total, byCaller int64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, vs := range m.versions {
		total++
		first := vs[0].Caller
		if first == caller && first != skip {
			byCaller++
		}
	}
	return total, byCaller, nil
}

func (m *memAgents) ListAgents(_ context.Context, after string, limit int) ([]store.AgentCard, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for id := range m.versions {
		if id > after {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	var out []store.AgentCard
	for _, id := range ids {
		vs := m.versions[id]
		out = append(out, vs[len(vs)-1])
	}
	return out, nil
}

func (m *memAgents) AgentHistory(_ context.Context, id string) ([]store.AgentCard, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.versions[id])
	slices.Reverse(out)
	return out, nil
}

func (m *memAgents) RemoveAgent(_ context.Context, id string, record func(newest store.AgentCard) (audit.Record, error)) (audit.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.versions[id]
	if len(vs) == 0 {
		return audit.Record{}, store.ErrNotFound
	}
	rec, err := record(vs[len(vs)-1])
	if err != nil {
		return audit.Record{}, err
	}
	m.seq++
	rec.Seq = m.seq
	delete(m.versions, id)
	return rec, nil
}

func (m *memAgents) RevokeCard(_ context.Context, c store.CardRevocation, rec audit.Record) (store.CardRevocation, audit.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c.RevokedAt = time.Now()
	m.revoked = append(m.revoked, c)
	m.seq++
	rec.Seq = m.seq
	return c, rec, nil
}

func (m *memAgents) RevokedCards(context.Context) ([]store.CardRevocation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	return slices.Clone(m.revoked), nil
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

// fakeSigner signs again as the authority does: Prepare, "sign" with the
// signing keys, Register; fail names agents it refuses to sign.
type fakeSigner struct {
	t    testing.TB
	reg  *Registry
	keys *fakeKeys
	mu   sync.Mutex
	done []Resignature
	fail map[string]error
}

func (s *fakeSigner) SignAgain(ctx context.Context, rs Resignature) error {
	s.mu.Lock()
	s.done = append(s.done, rs)
	err := s.fail[rs.Registration.AgentID]
	s.mu.Unlock()
	if err != nil {
		return err
	}
	kids, _ := s.keys.SigningKIDs(ctx, time.Now())
	res := signedResult(s.t, rs.Card, kids...)
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
	b, err := os.ReadFile("../testdata/cards/security.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signedResult is raw prepared and "signed" by kids: a card with one
// signature object per kid (the signature values are not real).
func signedResult(t testing.TB, raw []byte, kids ...string) *signer.Result {
	t.Helper()
	p, err := signer.Prepare(raw, signer.PrepareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(p.Loaded.Value.Compact(), &doc); err != nil {
		t.Fatal(err)
	}
	var sigs []any
	res := &signer.Result{Prepared: p}
	for _, kid := range kids {
		prot := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"` + kid + `"}`))
		sigs = append(sigs, map[string]any{"protected": prot, "signature": "AAAA"})
		res.Signatures = append(res.Signatures, signer.Signature{KID: kid, Alg: "ES256", Protected: prot, Value: "AAAA"})
	}
	doc["signatures"] = sigs
	if res.Card, err = json.MarshalIndent(doc, "", "  "); err != nil {
		t.Fatal(err)
	}
	return res
}

// testRegistry is a registry over memory, with keys k1 signing.
type testRegistry struct {
	*Registry
	agents   *memAgents
	keys     *fakeKeys
	signer   *fakeSigner
	mu       sync.Mutex
	admin    []audit.Record // Committed
	revoked  int            // CardRevoked calls
	wakes    int
	outcomes map[string]int
}

func newTestRegistry(t testing.TB, edit func(*Config)) *testRegistry {
	tr := &testRegistry{agents: newMemAgents(), keys: &fakeKeys{signing: []string{"k1"}}, outcomes: map[string]int{}}
	tr.signer = &fakeSigner{t: t, keys: tr.keys, fail: map[string]error{}}
	cfg := Config{
		Agents: tr.agents, Keys: tr.keys, Signer: tr.signer, Now: time.Now,
		ActorOf: func(context.Context) Actor { return Actor{Caller: "cardsignd", RequestID: "req"} },
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
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
	res := signedResult(t, raw, kids...)
	reg, _, err := tr.Prepare(context.Background(), &Registration{AgentID: id, Visibility: vis}, res.Loaded.Value, caller)
	if err != nil {
		return store.AgentCard{}, err
	}
	return tr.Register(context.Background(), reg, res, Options{}, caller, 1)
}
