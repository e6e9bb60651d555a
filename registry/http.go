package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/jwks/jwksserve"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
)

// AgentCardPath serves each registered agent's newest signed card.
const AgentCardPath = "/agents/{id}/agent-card.json"

// AgentLogSaltPath serves an agent's log salt to a reader: what its owner
// gives cardsign log monitor --salt to find the agent's sealed entries.
const AgentLogSaltPath = "/agents/{id}/log-salt"

// Handler serves the registry over HTTP: AgentCardPath and
// AgentLogSaltPath.
type Handler struct {
	reg *Registry
	// mayRead reports whether a request's credentials hold a reader role.
	mayRead func(r *http.Request) bool
	maxAge  time.Duration
	// cache holds the public cards served, ready to write; nil: every
	// request reads the store (NewHandler without CacheCards).
	cache *cardCache
	// hPublicCache is a public card's Cache-Control value, made once.
	hPublicCache []string
}

// NewHandler serves reg's cards over HTTP. mayRead reports whether a
// request may read private cards (a reader role); maxAge is how long a
// public card may be cached (as long as the JWKS).
func NewHandler(reg *Registry, mayRead func(r *http.Request) bool, maxAge time.Duration) *Handler {
	return &Handler{reg: reg, mayRead: mayRead, maxAge: maxAge,
		hPublicCache: []string{"public, max-age=" + strconv.Itoa(int(maxAge.Seconds()))}}
}

// CacheCards makes h serve public cards from memory, as rendered (bytes,
// entity tags and header values) at the last read, instead of reading the
// store on every request: a card is read again once version has moved
// since it was read (version must move at every change this process makes
// or hears of that a served card depends on: a registration, a re-signing,
// a removal, a card or key revocation) and at most fresh after the read
// (what another replica changed without telling this one). It returns h.
func (h *Handler) CacheCards(version func() uint64, fresh time.Duration, now func() time.Time) *Handler {
	h.cache = &cardCache{version: version, fresh: fresh, now: now}
	return h
}

// cardCache holds the public cards last served, by agent id. Only cards
// found and served 200 are held: an unknown, private, revoked or
// re-signing id is read every time (a cache of misses would grow with
// every probe).
type cardCache struct {
	version func() uint64
	fresh   time.Duration
	now     func() time.Time
	cards   sync.Map // agent id → *cachedCard
	// bytes is the size of the cards held; past maxCachedBytes the cache
	// starts over, so that the cards of agents removed, made private or
	// never asked for again do not accumulate.
	bytes atomic.Int64
}

// maxCachedBytes bounds the cards a cardCache holds (a card is at most
// signing.max_card_bytes, 256 KiB by default).
const maxCachedBytes = 32 << 20

// put holds e for id.
func (c *cardCache) put(id string, e *cachedCard) {
	n := int64(len(e.json.body))
	if old, loaded := c.cards.Swap(id, e); loaded {
		n -= int64(len(old.(*cachedCard).json.body))
	}
	if c.bytes.Add(n) > maxCachedBytes {
		c.cards.Clear()
		c.bytes.Store(0)
	}
}

// cachedCard is a public card as served: its two representations, valid
// while the version is the one it was read at and until until.
type cachedCard struct {
	version   uint64
	until     time.Time
	json, a2a servedCard
}

// servedCard is one representation of a card with its header values made
// once, each a slice of one set into the response's header map as it is
// (net/http only reads them; Header.Set replaces a slice, never writes
// into it).
type servedCard struct {
	body                         []byte
	etag                         string
	hETag, hType, hContentLength []string
}

func newServedCard(body []byte, tag, contentType string) servedCard {
	etag := `"` + tag + `"`
	return servedCard{body: body, etag: etag, hETag: []string{etag}, hType: []string{contentType},
		hContentLength: []string{strconv.Itoa(len(body))}}
}

// get returns id's cached card when it is still valid.
func (c *cardCache) get(id string) *cachedCard {
	v, ok := c.cards.Load(id)
	if !ok {
		return nil
	}
	e := v.(*cachedCard)
	if e.version != c.version() || !c.now().Before(e.until) {
		if c.cards.CompareAndDelete(id, v) {
			c.bytes.Add(-int64(len(e.json.body)))
		}
		return nil
	}
	return e
}

// Header values every public card shares.
var (
	hVaryAccept = []string{"Accept"}
)

// writeJSON answers with v and an uncacheable status.
func writeJSON(w http.ResponseWriter, code int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Card serves GET /agents/{id}/agent-card.json: a public card to anyone, a
// private one to a caller with a reader role. The body is the registered
// bytes, as application/json, or as CardMediaType when Accept asks for it
// (an AI Catalog entry's url names this path with that type): the same
// bytes, so the digest a catalog entry carries holds for both. A private card answers a
// caller without one as if it did not exist (404), so agent ids cannot be
// probed. The ETag follows the signed bytes (a re-signed card is a new
// entity); a public card may be cached as long as the JWKS, a private one
// is revalidated every time.
func (h *Handler) Card() http.Handler {
	reg := h.reg
	notFound := func(w http.ResponseWriter) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such agent card"})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if store.CheckAgentID(id) != nil {
			notFound(w)
			return
		}
		// Who asks is settled first, whatever the id, and a caller who may
		// not read private cards is served by a query that finds a private
		// agent no more than an unknown one: both answers, and the work
		// behind them, are the same (TestAgentCardProbeSameWork).
		reader := h.mayRead(r)
		var version uint64
		if h.cache != nil {
			// A public card is the same answer to a reader and to anyone
			// else (an unknown or private id is never held).
			if e := h.cache.get(id); e != nil {
				h.servePublic(w, r, e)
				return
			}
			// Read before the store: a change meanwhile makes what is
			// read now stale.
			version = h.cache.version()
		}
		var c store.AgentCard
		var err error
		if reader {
			c, err = reg.cfg.Agents.AgentCard(r.Context(), id, 0)
		} else {
			c, err = reg.cfg.Agents.PublicAgentCard(r.Context(), id)
		}
		if errors.Is(err, store.ErrNotFound) {
			notFound(w)
			return
		}
		if err != nil {
			reg.cfg.Log.Warn("registry read failed", "agent", id, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "registry unavailable"})
			return
		}
		revoked, err := reg.RevokedCards(r.Context())
		if err != nil {
			reg.cfg.Log.Warn("registry read failed", "agent", id, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "registry unavailable"})
			return
		}
		if CardRevoked(revoked, c) {
			// Gone, not missing: a sidecar pulling it should alert, not wait.
			writeJSON(w, http.StatusGone, map[string]any{"error": "this agent's card was revoked; register a new version"})
			return
		}
		cacheControl := "public, max-age=" + strconv.Itoa(int(h.maxAge.Seconds()))
		if c.Visibility != store.Public {
			cacheControl = "private, no-cache"
		}
		c, err = reg.Served(r.Context(), c)
		if errors.Is(err, ErrResigning) {
			// Only revoked keys' signatures: none may be served, not even
			// until the re-signing duty (already woken) signs it again.
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "this agent's card is being signed again after a key revocation; retry in a second"})
			return
		}
		if err != nil {
			reg.cfg.Log.Warn("registry read failed", "agent", id, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "registry unavailable"})
			return
		}
		sum := sha256.Sum256(c.Signed)
		if h.cache != nil && c.Visibility == store.Public {
			tag := hex.EncodeToString(sum[:16])
			e := &cachedCard{version: version, until: h.cache.now().Add(h.cache.fresh),
				json: newServedCard(c.Signed, tag, "application/json"),
				a2a:  newServedCard(c.Signed, tag+".a2a", CardMediaType)}
			h.cache.put(id, e)
			h.servePublic(w, r, e)
			return
		}
		// Two representations, two tags: a cache holding both (Vary:
		// Accept) must not take one's 304 for the other's.
		tag, contentType := hex.EncodeToString(sum[:16]), "application/json"
		if wantsCardType(r.Header["Accept"]) {
			tag, contentType = tag+".a2a", CardMediaType
		}
		etag := `"` + tag + `"`
		hd := w.Header()
		hd.Set("ETag", etag)
		hd.Set("Cache-Control", cacheControl)
		hd.Set("Vary", "Accept")
		if c.Visibility != store.Public {
			hd.Set("Vary", "Authorization, Accept")
		}
		if jwksserve.ETagListMatches(r.Header["If-None-Match"], etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		hd.Set("Content-Type", contentType)
		hd.Set("Content-Length", strconv.Itoa(len(c.Signed)))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(c.Signed)
		}
	})
}

// servePublic writes a cached public card as Card writes one it read:
// the same headers, values and statuses, without allocating.
func (h *Handler) servePublic(w http.ResponseWriter, r *http.Request, e *cachedCard) {
	rep := &e.json
	if wantsCardType(r.Header["Accept"]) {
		rep = &e.a2a
	}
	hd := w.Header()
	hd["Etag"] = rep.hETag
	hd["Cache-Control"] = h.hPublicCache
	hd["Vary"] = hVaryAccept
	if inm := r.Header["If-None-Match"]; len(inm) > 0 && jwksserve.ETagListMatches(inm, rep.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd["Content-Type"] = rep.hType
	hd["Content-Length"] = rep.hContentLength
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(rep.body)
	}
}

// ErrResigning: a registered card carries signatures by revoked keys
// only, and is waiting to be signed again.
var ErrResigning = errors.New("registry: the card carries only signatures by revoked keys")

// Served is a registered card as it may be served, over HTTP and gRPC:
// without signatures by keys revoked since it was signed (Signed and KIDs
// without them; DESIGN §11: never, not even for the moments before the
// re-signing duty signs it again). The signatures are judged by the kids in
// the card itself, not by KIDs (the signatures of the sign call): a card
// registered with keep_signatures may carry earlier signatures by our keys
// too. A card whose own signatures are all by revoked keys is
// ErrResigning.
func (r *Registry) Served(ctx context.Context, c store.AgentCard) (store.AgentCard, error) {
	revoked, some, err := r.RevokedKIDs(ctx)
	if err != nil {
		return store.AgentCard{}, err
	}
	if !some {
		return c, nil
	}
	dropped := false
	body, err := signer.DropSignatures(c.Signed, r.cfg.Limits, func(kid string) bool {
		d := revoked(kid)
		dropped = dropped || d
		return d
	})
	if err != nil {
		return store.AgentCard{}, err
	}
	if !dropped {
		return c, nil
	}
	r.cfg.Wake() // the duty holder re-signs it; this wakes it if it is us
	c.KIDs = slices.DeleteFunc(slices.Clone(c.KIDs), revoked)
	if len(c.KIDs) == 0 {
		return store.AgentCard{}, ErrResigning
	}
	c.Signed = body
	return c, nil
}

// RevokedKIDs reports, from the cached key records, whether a kid is one
// of this authority's revoked keys, and whether any key is revoked at all.
func (r *Registry) RevokedKIDs(ctx context.Context) (revoked func(kid string) bool, some bool, err error) {
	recs, err := r.cfg.Keys.Records(ctx)
	if err != nil {
		return nil, false, err
	}
	revoked = func(kid string) bool {
		for _, r := range recs {
			if r.KID == kid {
				return r.RevokedAt != nil
			}
		}
		return false
	}
	return revoked, slices.ContainsFunc(recs, func(r jwks.KeyRecord) bool { return r.RevokedAt != nil }), nil
}

// Salt serves GET /agents/{id}/log-salt: the salt of the agent's sealed
// log entries (transparency.AgentSalt), in hex, to a caller with a reader
// role, and a 404 to anyone else, for every id, known or not (a salt is
// derived, not stored, and tells nothing of whether the agent exists).
// With it, a private agent's entries can be checked and found, and their
// names and hosts guessed: it is as secret as the card.
func (h *Handler) Salt() http.Handler {
	reg := h.reg
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if store.CheckAgentID(id) != nil || !h.mayRead(r) {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such agent"})
			return
		}
		if reg.cfg.SealSecret == nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "this cardsignd keeps no transparency log"})
			return
		}
		salt, err := reg.Salt(id)
		if err != nil {
			reg.cfg.Log.Warn("log salt unavailable", "agent", id, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "log salt unavailable"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"agent_id": id, "salt": hex.EncodeToString(salt), "sealed": !reg.cfg.OpenPrivate})
	})
}
