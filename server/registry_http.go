package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/jwks/jwksserve"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
)

// AgentCardPath serves each registered agent's newest signed card.
const AgentCardPath = "/agents/{id}/agent-card.json"

// readerRoles may read a private card, over HTTP as over gRPC.
var readerRoles = []access.Role{access.RoleReader, access.RoleAuditor, access.RoleAdmin}

// agentCardHandler serves GET /agents/{id}/agent-card.json: a public card to
// anyone, a private one to a caller with a reader role. A private card
// answers a caller without one as if it did not exist (404), so agent ids
// cannot be probed. The ETag follows the signed bytes (a re-signed card is a
// new entity); a public card may be cached as long as the JWKS, a private one
// is revalidated every time.
func (a *Authority) agentCardHandler(auth *access.Authenticator) http.Handler {
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
		reader := mayRead(r, auth, a.metrics)
		var c store.AgentCard
		var err error
		if reader {
			c, err = a.store.AgentCard(r.Context(), id, 0)
		} else {
			c, err = a.store.PublicAgentCard(r.Context(), id)
		}
		if errors.Is(err, store.ErrNotFound) {
			notFound(w)
			return
		}
		if err != nil {
			a.log.Warn("registry read failed", "agent", id, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "registry unavailable"})
			return
		}
		revoked, err := a.revokedCards(r.Context())
		if err != nil {
			a.log.Warn("registry read failed", "agent", id, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "registry unavailable"})
			return
		}
		if cardRevoked(revoked, c) {
			// Gone, not missing: a sidecar pulling it should alert, not wait.
			writeJSON(w, http.StatusGone, map[string]any{"error": "this agent's card was revoked; register a new version"})
			return
		}
		cacheControl := "public, max-age=" + strconv.Itoa(int(a.cfg.JWKSMaxAge.Seconds()))
		if c.Visibility != store.Public {
			cacheControl = "private, no-cache"
		}
		c, err = a.servedCard(r.Context(), c)
		if errors.Is(err, errCardResigning) {
			// Only revoked keys' signatures: none may be served, not even
			// until the re-signing duty (already woken) signs it again.
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "this agent's card is being signed again after a key revocation; retry in a second"})
			return
		}
		if err != nil {
			a.log.Warn("registry read failed", "agent", id, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "registry unavailable"})
			return
		}
		sum := sha256.Sum256(c.Signed)
		etag := `"` + hex.EncodeToString(sum[:16]) + `"`
		h := w.Header()
		h.Set("ETag", etag)
		h.Set("Cache-Control", cacheControl)
		if c.Visibility != store.Public {
			h.Set("Vary", "Authorization")
		}
		if jwksserve.ETagListMatches(r.Header["If-None-Match"], etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(c.Signed)))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(c.Signed)
		}
	})
}

// errCardResigning: a registered card carries signatures by revoked keys
// only, and is waiting to be signed again.
var errCardResigning = errors.New("registry: the card carries only signatures by revoked keys")

// servedCard is a registered card as it may be served, over HTTP and gRPC:
// without signatures by keys revoked since it was signed (Signed and KIDs
// without them; DESIGN §11: never, not even for the moments before the
// re-signing duty signs it again). The signatures are judged by the kids in
// the card itself, not by KIDs (the signatures of the sign call): a card
// registered with keep_signatures may carry earlier signatures by our keys
// too. A card whose own signatures are all by revoked keys is
// errCardResigning.
func (a *Authority) servedCard(ctx context.Context, c store.AgentCard) (store.AgentCard, error) {
	revoked, some, err := a.revokedKIDs(ctx)
	if err != nil {
		return store.AgentCard{}, err
	}
	if !some {
		return c, nil
	}
	dropped := false
	body, err := signer.DropSignatures(c.Signed, a.cfg.Limits, func(kid string) bool {
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
	a.pokeDuties() // the duty holder re-signs it; this wakes it if it is us
	c.KIDs = slices.DeleteFunc(slices.Clone(c.KIDs), revoked)
	if len(c.KIDs) == 0 {
		return store.AgentCard{}, errCardResigning
	}
	c.Signed = body
	return c, nil
}

// revokedKIDs reports, from the cached key records, whether a kid is one
// of this authority's revoked keys, and whether any key is revoked at all.
func (a *Authority) revokedKIDs(ctx context.Context) (revoked func(kid string) bool, some bool, err error) {
	recs, err := a.keys.records(ctx, false)
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

// liveCard is servedCard for the gRPC API: a card waiting to be signed
// again is unavailable, to be retried.
func (a *Authority) liveCard(ctx context.Context, c store.AgentCard) (store.AgentCard, error) {
	c, err := a.servedCard(ctx, c)
	if errors.Is(err, errCardResigning) {
		return store.AgentCard{}, &UnavailableError{What: "agent card (being signed again after a key revocation)", Err: err}
	}
	if err != nil {
		return store.AgentCard{}, &UnavailableError{What: "registry", Err: err}
	}
	return c, nil
}

// AgentLogSaltPath serves an agent's log salt to a reader: what its owner
// gives cardsign log monitor --salt to find the agent's sealed entries.
const AgentLogSaltPath = "/agents/{id}/log-salt"

// agentLogSaltHandler serves GET /agents/{id}/log-salt: the salt of the
// agent's sealed log entries (transparency.AgentSalt), in hex, to a caller
// with a reader role, and a 404 to anyone else, for every id, known or not
// (a salt is derived, not stored, and tells nothing of whether the agent
// exists). With it, a private agent's entries can be checked and found,
// and their names and hosts guessed: it is as secret as the card.
func (a *Authority) agentLogSaltHandler(auth *access.Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if store.CheckAgentID(id) != nil || !mayRead(r, auth, a.metrics) {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such agent"})
			return
		}
		if a.cfg.Log == nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "this cardsignd keeps no transparency log"})
			return
		}
		salt, err := a.agentSalt(id)
		if err != nil {
			a.log.Warn("log salt unavailable", "agent", id, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "log salt unavailable"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"agent_id": id, "salt": hex.EncodeToString(salt), "sealed": !a.cfg.LogOpenPrivate})
	})
}

// mayRead reports whether the request's credentials hold a reader role (any
// caller when authentication is off: loopback only).
func mayRead(r *http.Request, auth *access.Authenticator, m *Metrics) bool {
	if auth == nil || !auth.Enabled() {
		return true
	}
	creds := httpCredentials(r)
	id, err := auth.Authenticate(r.Context(), creds)
	if err != nil {
		if creds.Authorization != "" || creds.CertIdentity != "" {
			m.authFailed(creds, err) // a reader with bad credentials, not an anonymous fetch
		}
		return false
	}
	for _, role := range readerRoles {
		if id.Has(role) {
			return true
		}
	}
	return false
}
