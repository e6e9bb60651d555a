package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
)

// DocumentName is the catalog's name in the store (store.Documents).
const DocumentName = "ai-catalog"

// Caller is the caller the audit records of the catalog's signatures name,
// and Profile their profile.
const (
	Caller  = "cardsignd/catalog"
	Profile = "ai-catalog"
)

// DefaultLifetime is a signature's lifetime (expiresAt - issuedAt) when
// signing.lifetime is not configured.
const DefaultLifetime = 24 * time.Hour

// fullPass is how often the duty holder builds the catalog from the
// registry even when nothing it watches changed.
const fullPass = time.Minute

// Errors Document returns, which the route answers with 503.
var (
	// ErrNoSigner: no ES256 (P-256) key is active or pending, so no
	// manifest can be signed under did-web-v1.
	ErrNoSigner = errors.New("catalog: no ES256 (P-256) key is active or pending to sign the AI Catalog under did:web: rotate in a P-256 key (cardsign keys rotate --alg ES256)")
	// ErrNotReady: the catalog is being made (none stored yet), or the one
	// stored may not be served (it lists a card revoked since, a key that
	// signed it was revoked, it expired) and the duty holder, woken,
	// makes a new one.
	ErrNotReady = errors.New("catalog: the AI Catalog is being signed; retry in a second")
)

// Store is what the publisher reads and writes: the registry's agents,
// the audit records of their registrations (their pipelines' provenance),
// the stored catalog and its sequence.
type Store interface {
	store.Documents
	NextSequence(ctx context.Context, name string) (int64, error)
	ListAgents(ctx context.Context, after string, limit int) ([]store.AgentCard, error)
	AgentHistory(ctx context.Context, id string) ([]store.AgentCard, error)
	ListAudit(ctx context.Context, afterSeq int64, limit int) ([]audit.Record, error)
	AuditHead(ctx context.Context) (seq int64, hash []byte, err error)
}

// Keys are the key records and the key that signs.
type Keys interface {
	// Records are the key records now (a recent read).
	Records(ctx context.Context) ([]jwks.KeyRecord, error)
	Policy() jwks.Policy
	// Open opens rec's key through its backend (file, PKCS#11, KMS); its
	// error names the key.
	Open(ctx context.Context, rec jwks.KeyRecord) (signer.Key, error)
}

// Registry is what the publisher asks the card registry.
type Registry interface {
	// Served is a card as the registry serves it (without signatures by
	// revoked keys; registry.ErrResigning when none is left).
	Served(ctx context.Context, c store.AgentCard) (store.AgentCard, error)
	RevokedCards(ctx context.Context) ([]store.CardRevocation, error)
}

// Config is what a publisher reads, signs with and writes to.
type Config struct {
	Settings Settings
	Store    Store
	Keys     Keys
	Registry Registry
	// Commit commits audit records and returns them once durable (the
	// transparency log hears of them as of every signature's).
	Commit func(ctx context.Context, recs []audit.Record) ([]audit.Record, error)
	// Lease reports whether this process holds the duties lease (and
	// which lease fences the write); only its holder signs.
	Lease func(ctx context.Context) (lease store.Lease, held bool, err error)
	// Unavailable wraps a failure of the store as the caller reports one.
	Unavailable func(what string, err error) error
	Now         func() time.Time
	Log         *slog.Logger
	// Lifetime is a signature's lifetime (signing.lifetime; 0:
	// DefaultLifetime); a manifest is signed again once half of it passed.
	Lifetime time.Duration
	// Refresh is how long a read of the stored catalog is reused.
	Refresh time.Duration
	// Limits bound the cards parsed (inline data, names).
	Limits strictjson.Limits
	// Wake asks for a duty round now; Signed counts signatures by kind
	// ("manifest", "snapshot"); SignerAvailable reports whether an ES256
	// key can sign. Nil hooks do nothing.
	Wake            func()
	Signed          func(kind string)
	SignerAvailable func(ok bool)
}

// Publisher keeps the signed catalog in the store: the holder of the
// duties lease builds it from the registry's public agents and signs what
// changed (Publish), every replica serves the stored bytes (Document), so
// all serve the same document and ETag.
type Publisher struct {
	cfg Config

	// signing serializes Publish; mu guards the rest.
	signing sync.Mutex
	mu      sync.Mutex
	cached  *stored // last read from or written to the store; nil: read again
	// good is the last stored catalog seen, kept when cached is forgotten:
	// served while the store is unreachable, until it expires.
	good       *stored
	dirty      bool      // told of a change since the last build
	builtAt    time.Time // the last build (wall clock)
	builtHead  int64     // the audit head read before it
	noSigner   bool      // the last build found no ES256 key (logged once)
	forgotAtNs atomic.Int64
	// passed is the last servable check that passed; Document serves
	// without checking again while nothing it read has changed.
	passed atomic.Pointer[servableMemo]
}

// servableMemo is a servable check that passed: of catalog s, against the
// key records and revoked cards it read (the keyring's and the registry's
// cached slices, replaced by new ones whenever either is read again, at a
// revocation at once), until until. The check is a function of those and
// of the time (a key's state follows its schedule), so a memo is kept for
// a moment only: serving the catalog then costs what serving the JWKS
// does.
type servableMemo struct {
	s       *stored
	recs    *jwks.KeyRecord
	nRecs   int
	revoked *store.CardRevocation
	nRev    int
	until   time.Time
}

// servableMemoFor is how long a passed check is reused: far below
// keys.refresh (how long another replica's revocation may take to be
// seen here), and a key's scheduled activation or expiry is noticed this
// much later at most.
const servableMemoFor = 100 * time.Millisecond

// New returns a publisher for cfg (Settings with their defaults).
func New(cfg Config) *Publisher {
	cfg.Settings = cfg.Settings.WithDefaults()
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = DefaultLifetime
	}
	if cfg.Wake == nil {
		cfg.Wake = func() {}
	}
	if cfg.Signed == nil {
		cfg.Signed = func(string) {}
	}
	if cfg.SignerAvailable == nil {
		cfg.SignerAvailable = func(bool) {}
	}
	return &Publisher{cfg: cfg, dirty: true}
}

// stored is the stored catalog with what it was made from.
type stored struct {
	doc   store.Document
	state catalogState
	etag  string
	// cards are the entries' agents by their cards' canonical SHA-256
	// (raw bytes as a string), for the revoked cards check at every serve.
	cards map[string]string
	// readAt: read from or written to the store then (wall clock)
	readAt time.Time
}

// newStored is doc made from st, read or written at readAt.
func newStored(doc store.Document, st catalogState, readAt time.Time) *stored {
	s := &stored{doc: doc, state: st, etag: jwks.ETagOf(doc.Body), readAt: readAt, cards: map[string]string{}}
	for _, e := range st.Entries {
		if sum, err := hex.DecodeString(e.CanonicalSHA256); err == nil {
			s.cards[string(sum)] = e.Agent
		}
	}
	return s
}

// catalogState is what a stored catalog was made from, kept beside it (the
// document's Meta): enough to tell what changed without parsing the
// catalog, and the signed manifests to reuse.
type catalogState struct {
	// KID signed every signature in the document.
	KID string `json:"kid"`
	// Content is the hex SHA-256 of the RFC 8785 form of the catalog
	// without its signature: a catalog built again with the same content
	// needs no new snapshot signature.
	Content   string    `json:"content"`
	IssuedAt  time.Time `json:"issued_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Earliest is the earliest expiresAt in the document (snapshot and
	// manifests): it is not served after it, nor cached past it.
	Earliest time.Time    `json:"earliest"`
	Entries  []entryState `json:"entries"`
}

// entryState is one entry of a stored catalog.
type entryState struct {
	Agent   string `json:"agent"`
	Version int64  `json:"version"`
	// CanonicalSHA256 (hex) is the card's: a stored catalog listing a card
	// revoked since is not served.
	CanonicalSHA256 string `json:"canonical_sha256"`
	// CardKIDs are the keys whose signatures the card listed carried: once
	// one is revoked the registry serves the card without it (other bytes,
	// another digest), so the stored catalog is not served.
	CardKIDs []string `json:"card_kids,omitempty"`
	// Unsigned is the hex SHA-256 of the RFC 8785 form of the manifest
	// before it was signed: the same manifest built again may reuse the
	// signed one.
	Unsigned  string    `json:"unsigned"`
	IssuedAt  time.Time `json:"issued_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Manifest is the signed manifest (JSON).
	Manifest json.RawMessage `json:"manifest"`
	// Pipeline: what the registration's audit record said of its
	// pipeline, kept for the agent's later versions the registry signs
	// again (their records name the registry).
	Source   string `json:"source,omitempty"`
	Commit   string `json:"commit,omitempty"`
	Workflow string `json:"workflow,omitempty"`
	Issuer   string `json:"issuer,omitempty"`
}

// refreshAt is when s is due for new signatures: half the lifetime before
// the earliest expiry in it.
func (s *stored) refreshAt(lifetime time.Duration) time.Time {
	return s.state.Earliest.Add(-lifetime / 2)
}

// Served is the catalog to serve.
type Served struct {
	Body []byte
	ETag string // strong, from the bytes
	// ExpiresAt is the earliest expiresAt in it: caches must not keep it
	// longer.
	ExpiresAt time.Time
}

// Document returns the stored catalog as it may be served: not expired,
// signed by no revoked key, listing no revoked card; otherwise ErrNotReady
// (or ErrNoSigner when no key can sign a new one), and the duty holder is
// woken to make a new one. While the store is unreachable, the last
// catalog read is served until it expires.
func (p *Publisher) Document(ctx context.Context) (Served, error) {
	now := p.cfg.Now()
	s, err := p.stored(ctx)
	if err != nil {
		p.mu.Lock()
		good := p.good
		p.mu.Unlock()
		if good != nil && fallBack(err) && now.Before(good.state.Earliest) {
			return good.served(), nil
		}
		return Served{}, err
	}
	if s == nil {
		p.cfg.Wake()
		return Served{}, p.notReady()
	}
	if err := p.servable(ctx, s, now); err != nil {
		if fallBack(err) && now.Before(s.state.Earliest) {
			// The key records or revoked cards cannot be read: serve what
			// was stored, within its validity, as while the store is down.
			return s.served(), nil
		}
		p.cfg.Wake()
		if errors.Is(err, ErrNotReady) {
			return Served{}, p.notReady()
		}
		return Served{}, err
	}
	return s.served(), nil
}

// notReady is ErrNoSigner when the last build found no key to sign, else
// ErrNotReady.
func (p *Publisher) notReady() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.noSigner {
		return ErrNoSigner
	}
	return ErrNotReady
}

func (s *stored) served() Served {
	return Served{Body: s.doc.Body, ETag: s.etag, ExpiresAt: s.state.Earliest}
}

// fallBack reports whether a read that failed with err may be answered
// from the last catalog read: the store is unreachable, not a refusal.
func fallBack(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// servable reports why s may not be served at now (nil: it may): it
// expired, the key that signed it is no longer published in did.json
// (revoked, expired or retired past its grace: verifiers cannot resolve it;
// DESIGN §11: never served, not even until the next duty round), a card it
// lists was signed by a key revoked since (the card URL now serves other
// bytes than the digest listed), or it lists a card revoked since.
func (p *Publisher) servable(ctx context.Context, s *stored, now time.Time) error {
	if !now.Before(s.state.Earliest) {
		return fmt.Errorf("%w (the stored one expired at %s)", ErrNotReady, s.state.Earliest.UTC().Format(time.RFC3339))
	}
	recs, err := p.cfg.Keys.Records(ctx)
	if err != nil {
		return err
	}
	revoked, err := p.cfg.Registry.RevokedCards(ctx)
	if err != nil {
		return p.cfg.Unavailable("revoked cards", err)
	}
	memo := &servableMemo{s: s, recs: unsafe.SliceData(recs), nRecs: len(recs), revoked: unsafe.SliceData(revoked), nRev: len(revoked)}
	if m := p.passed.Load(); m != nil && now.Before(m.until) && m.s == memo.s && m.recs == memo.recs && m.nRecs == memo.nRecs &&
		m.revoked == memo.revoked && m.nRev == memo.nRev {
		return nil
	}
	if err := p.check(s, now, recs, revoked); err != nil {
		return err
	}
	memo.until = now.Add(servableMemoFor)
	p.passed.Store(memo)
	return nil
}

// check is servable's check of s against the key records and revoked
// cards, at now.
func (p *Publisher) check(s *stored, now time.Time, recs []jwks.KeyRecord, revoked []store.CardRevocation) error {
	if !didPublished(jwks.Derive(now, recs, p.cfg.Keys.Policy()), s.state.KID) {
		return fmt.Errorf("%w (the stored one is signed by key %s, which did.json no longer lists)", ErrNotReady, strictjson.QuoteForMessage(s.state.KID))
	}
	revokedKID := map[string]bool{}
	for _, r := range recs {
		if r.RevokedAt != nil {
			revokedKID[r.KID] = true
		}
	}
	for _, e := range s.state.Entries {
		for _, kid := range e.CardKIDs {
			if revokedKID[kid] {
				return fmt.Errorf("%w (the stored one lists agent %s's card signed by revoked key %s)", ErrNotReady, strictjson.QuoteForMessage(e.Agent), strictjson.QuoteForMessage(kid))
			}
		}
	}
	for _, r := range revoked {
		if agent, ok := s.cards[string(r.CanonicalSHA256)]; ok {
			return fmt.Errorf("%w (the stored one lists agent %s's revoked card)", ErrNotReady, agent)
		}
	}
	return nil
}

// Forget makes the next Document read the stored catalog again and the
// next Publish build it from the registry: something it is made from
// changed (a registration, a removal, a revocation, a key), here or, as a
// store notification says, on another replica.
func (p *Publisher) Forget() {
	p.mu.Lock()
	p.cached, p.dirty = nil, true
	p.mu.Unlock()
	p.forgotAtNs.Store(time.Now().UnixNano())
}

// Reread reads the stored catalog again when the last read is older than
// the refresh period, so that a replica that does not sign it has it at
// hand should the store go away.
func (p *Publisher) Reread(ctx context.Context) error {
	_, err := p.stored(ctx)
	return err
}

// stored returns the stored catalog (nil when there is none), read again
// when the last read is older than the refresh period or was forgotten.
func (p *Publisher) stored(ctx context.Context) (*stored, error) {
	p.mu.Lock()
	cached := p.cached
	p.mu.Unlock()
	if cached != nil && time.Since(cached.readAt) < p.cfg.Refresh {
		return cached, nil
	}
	start := time.Now()
	doc, err := p.cfg.Store.Document(ctx, DocumentName)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, p.cfg.Unavailable("AI Catalog", err)
	}
	var st catalogState
	if err := json.Unmarshal(doc.Meta, &st); err != nil {
		// Written by this code only; unreadable means edited by hand: not
		// served (Earliest is zero), and signed again.
		p.cfg.Log.Warn("stored AI Catalog has unreadable metadata; signing it again", "seq", doc.Seq, "err", err)
		st = catalogState{}
	}
	s := newStored(doc, st, start)
	p.keep(s, start)
	return s, nil
}

// keep caches s, read or written at start, unless a change was announced
// after start.
func (p *Publisher) keep(s *stored, start time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if start.UnixNano() >= p.forgotAtNs.Load() && (p.cached == nil || !p.cached.readAt.After(start) || p.cached.doc.Seq < s.doc.Seq) {
		p.cached = s
	}
	if p.good == nil || p.good.doc.Seq <= s.doc.Seq {
		p.good = s
	}
}

// didPublished reports whether kid is among the keys did.json lists at the
// views' instant: published (pending, active, retired within its grace),
// ES256, with a kid that can be a DID URL fragment. A catalog signed by any
// other key cannot be verified, whatever made it leave (revocation, expiry,
// retirement).
func didPublished(views []jwks.View, kid string) bool {
	for _, v := range jwks.Published(views) {
		if v.KID == kid && v.Alg == jose.ES256 && aicatalog.CheckFragment(v.KID) == nil {
			return true
		}
	}
	return false
}

// SignerView picks the key that signs the catalog among views: the
// active key when it is ES256 (P-256), else the first ES256 key due to
// sign (pending), else none: did-web-v1 takes ES256 only. A key's JWKS kid
// is its fragment in the DID document, so a kid that cannot be one
// (aicatalog.CheckFragment: an imported key's own kid) does not sign.
func SignerView(views []jwks.View) (jwks.View, bool) {
	can := func(v jwks.View) bool { return v.Alg == jose.ES256 && aicatalog.CheckFragment(v.KID) == nil }
	if v, ok := jwks.Active(views); ok && can(v) {
		return v, true
	}
	for _, v := range jwks.Signing(views) {
		if v.State == jwks.StatePending && can(v) {
			return v, true
		}
	}
	return jwks.View{}, false
}

// Publish brings the stored catalog up to date, when this process holds
// the duties lease: it builds the catalog from the registry's public
// agents, reuses the stored manifests that did not change (same manifest,
// same key, more than half their lifetime left), signs the others and,
// when anything changed or half its lifetime passed, the snapshot; the
// signatures' audit records are committed before the catalog is stored.
// A round with no change signs nothing. It returns ErrNoSigner when no
// ES256 key can sign.
func (p *Publisher) Publish(ctx context.Context) error {
	p.signing.Lock()
	defer p.signing.Unlock()
	lease, leader, err := p.cfg.Lease(ctx)
	if err != nil {
		return fmt.Errorf("catalog: duties lease: %w", err)
	}
	now := p.cfg.Now()
	recs, err := p.cfg.Keys.Records(ctx)
	if err != nil {
		return err
	}
	signerView, ok := SignerView(jwks.Derive(now, recs, p.cfg.Keys.Policy()))
	p.reportSigner(ok, leader)
	if !leader {
		return p.Reread(ctx)
	}
	if !ok {
		return ErrNoSigner
	}
	prev, err := p.stored(ctx)
	if err != nil {
		return err
	}
	// Every change to the registry (on any replica) is audited: a head
	// that moved since the last build may be one this process was not
	// told of (a registration on another replica).
	head, _, err := p.cfg.Store.AuditHead(ctx)
	if err != nil {
		return p.cfg.Unavailable("audit log", err)
	}
	if !p.due(ctx, prev, signerView.KID, now, head) {
		return nil
	}
	// Cleared before the build: a change announced during it is built
	// next round.
	p.mu.Lock()
	p.dirty, p.builtAt, p.builtHead = false, time.Now(), head
	p.mu.Unlock()
	b, err := p.build(ctx, prev, signerView.KID, now)
	if err == nil && b.due(prev, now, p.cfg.Lifetime) {
		err = p.sign(ctx, lease, prev, b, signerView)
	}
	if err != nil {
		// Built again next round, not at the next full pass.
		p.mu.Lock()
		p.dirty = true
		p.mu.Unlock()
	}
	return err
}

// reportSigner records whether a key can sign; the lease holder, which
// would sign, logs a change.
func (p *Publisher) reportSigner(ok, leader bool) {
	p.cfg.SignerAvailable(ok)
	p.mu.Lock()
	was := p.noSigner
	p.noSigner = !ok
	p.mu.Unlock()
	switch {
	case !leader:
	case !ok && !was:
		p.cfg.Log.Error("AI Catalog not signed: no ES256 (P-256) key is active or pending; the catalog route answers 503 until one is", "err", ErrNoSigner)
	case ok && was:
		p.cfg.Log.Info("AI Catalog: an ES256 key can sign again")
	}
}

// due reports whether the catalog is to be built from the registry now:
// told of a change, the audit head moved (head), the periodic full pass,
// nothing stored, the stored one due for new signatures or signed by
// another key, or not servable.
func (p *Publisher) due(ctx context.Context, prev *stored, kid string, now time.Time, head int64) bool {
	p.mu.Lock()
	dirty, builtAt, builtHead := p.dirty, p.builtAt, p.builtHead
	p.mu.Unlock()
	switch {
	case dirty, head != builtHead, time.Since(builtAt) >= fullPass, prev == nil, prev.state.KID != kid,
		!now.Before(prev.refreshAt(p.cfg.Lifetime)):
		return true
	}
	return p.servable(ctx, prev, now) != nil
}

// built is the catalog as the registry makes it now.
type built struct {
	entries []plannedEntry
	// content is the hex SHA-256 of the catalog without its signature,
	// when every manifest was reused ("" otherwise: a new manifest is a
	// new catalog).
	content string
}

// plannedEntry is one entry: its manifest, reused or to sign.
type plannedEntry struct {
	entry    aicatalog.Entry // without trustManifests
	manifest aicatalog.Manifest
	state    entryState // Manifest set when reused
	signed   strictjson.Value
	reused   bool
	card     cardInfo
}

// cardInfo is what the audit record of a manifest says about its card.
type cardInfo struct {
	name, version string
	hosts         []string
}

// due reports whether b needs signatures: a manifest to sign, or a
// snapshot whose content, key or age changed.
func (b *built) due(prev *stored, now time.Time, lifetime time.Duration) bool {
	if b.content == "" || prev == nil || prev.state.Content != b.content {
		return true
	}
	// The snapshot's own expiry is among the earliest: due at half its
	// lifetime too.
	return !now.Before(prev.refreshAt(lifetime))
}

// catalogValue is the unsigned catalog of b's entries (with their signed
// manifests).
func (p *Publisher) catalogValue(b *built) aicatalog.Catalog {
	s := p.cfg.Settings
	c := aicatalog.Catalog{Host: aicatalog.Host{DisplayName: s.DisplayName, Identifier: s.DID()}}
	for _, e := range b.entries {
		entry := e.entry
		entry.TrustManifests = []strictjson.Value{e.signed}
		c.Entries = append(c.Entries, entry)
	}
	return c
}

// sign signs what b needs, commits the audit records and stores the
// catalog under lease.
func (p *Publisher) sign(ctx context.Context, lease store.Lease, prev *stored, b *built, view jwks.View) error {
	key, err := p.cfg.Keys.Open(ctx, view.KeyRecord)
	if err != nil {
		return err
	}
	sk := aicatalog.SigningKey{Signer: key.Signer, DID: p.cfg.Settings.DID(), Fragment: view.KID}
	now := p.cfg.Now()
	expires := now.Add(p.cfg.Lifetime)
	var recs []audit.Record
	var kinds []string
	for i := range b.entries {
		e := &b.entries[i]
		if e.reused {
			continue
		}
		signed, err := aicatalog.Sign(ctx, e.manifest.Value(), aicatalog.TypManifest, sk, now, expires)
		if err != nil {
			return fmt.Errorf("catalog: manifest of agent %s: %w", e.state.Agent, err)
		}
		e.signed = signed.Value
		e.state.Manifest = signed.Value.Compact()
		e.state.IssuedAt, e.state.ExpiresAt = now.Truncate(time.Second), expires.Truncate(time.Second)
		recs = append(recs, p.record(now, signed, view.KID, e.card, fmt.Sprintf("catalog.%s.v%d", e.state.Agent, e.state.Version)))
		kinds = append(kinds, "manifest")
	}
	cat := p.catalogValue(b)
	unsigned, err := cat.Value().JCS()
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	snap, err := aicatalog.Sign(ctx, cat.Value(), aicatalog.TypCatalog, sk, now, expires)
	if err != nil {
		return fmt.Errorf("catalog: snapshot: %w", err)
	}
	recs = append(recs, p.record(now, snap, view.KID, cardInfo{name: DocumentName}, "catalog.snapshot"))
	kinds = append(kinds, "snapshot")
	// Audited (and so logged) before the catalog is stored: no signature
	// is ever served unaudited.
	if _, err := p.cfg.Commit(ctx, recs); err != nil {
		return fmt.Errorf("catalog: audit: %w", err)
	}
	for _, k := range kinds {
		p.cfg.Signed(k)
	}
	st := catalogState{KID: view.KID, Content: sum(unsigned), IssuedAt: now.Truncate(time.Second), ExpiresAt: expires.Truncate(time.Second)}
	st.Earliest = st.ExpiresAt
	for _, e := range b.entries {
		st.Entries = append(st.Entries, e.state)
		if e.state.ExpiresAt.Before(st.Earliest) {
			st.Earliest = e.state.ExpiresAt
		}
	}
	body := append(snap.Value.Indent(), '\n')
	return p.store(ctx, lease, prev, body, st, len(kinds)-1)
}

// store writes the signed catalog, fenced by lease, with the next sequence.
func (p *Publisher) store(ctx context.Context, lease store.Lease, prev *stored, body []byte, st catalogState, manifests int) error {
	meta, err := json.Marshal(st)
	if err != nil {
		return err
	}
	seq, err := p.cfg.Store.NextSequence(ctx, DocumentName)
	if err != nil {
		return p.cfg.Unavailable("AI Catalog sequence", err)
	}
	if prev != nil {
		seq = max(seq, prev.doc.Seq+1)
	}
	doc := store.Document{Name: DocumentName, Seq: seq, Body: body, Meta: meta}
	start := time.Now()
	if err := p.cfg.Store.PutDocument(ctx, lease, doc); err != nil {
		if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrStaleDocument) {
			p.Forget() // another replica took over and signed: serve its catalog
		}
		return p.cfg.Unavailable("AI Catalog", err)
	}
	p.keep(newStored(doc, st, start), start)
	p.cfg.Log.Info("AI Catalog signed", "seq", seq, "entries", len(st.Entries), "manifests_signed", manifests, "kid", st.KID, "expires", st.Earliest)
	return nil
}

// record is the audit record of one catalog signature: committed like a
// card's, so the transparency log has it as a leaf.
func (p *Publisher) record(now time.Time, s aicatalog.Signed, kid string, c cardInfo, requestID string) audit.Record {
	payload := sha256.Sum256(s.Payload)
	return audit.Record{
		Time: now, Caller: Caller, RequestID: requestID,
		CardName: c.name, CardVersion: c.version, CanonicalSHA256: payload[:],
		KID: kid, Alg: string(jose.ES256), Profile: Profile,
		Signature: base64.RawURLEncoding.EncodeToString(s.Signature),
		Outcome:   audit.OutcomeSigned, Hosts: c.hosts,
	}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// entryOf returns the stored entry of agent id, if any.
func (s *stored) entryOf(id string) (entryState, bool) {
	if s == nil {
		return entryState{}, false
	}
	i := slices.IndexFunc(s.state.Entries, func(e entryState) bool { return e.Agent == id })
	if i < 0 {
		return entryState{}, false
	}
	return s.state.Entries[i], true
}
