package server

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jwks/jwksserve"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/registry/catalog"
	"github.com/cardsign/cardsign/server/httpapi"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency/tlogserve"
)

// HTTPOptions configures the HTTP listener's handler.
type HTTPOptions struct {
	// Stats are the key backends' own counters, exported on /metrics.
	Stats []StatsSource
	// Auth, when enabled, guards /metrics: it names callers, so it needs
	// an identity with the auditor role (a bearer token, or a client
	// certificate when the listener asks for one). The JWKS, the
	// revocation document and the health endpoints stay public: verifiers
	// and load balancers have no credentials.
	Auth *access.Authenticator
}

// NewHTTPHandler serves the JWKS, the revocation document, the transparency
// log (its keys, checkpoint and tiles), /healthz (the process is up),
// /readyz (the last readiness check passed) and /metrics: it says which of
// the authority's handlers serves each route of httpapi's table.
func NewHTTPHandler(a *Authority, opts HTTPOptions) http.Handler {
	a.metrics.Register(backendCollector{sources: opts.Stats})
	docs := a.docs.newDocumentHandlers()
	agents := registry.NewHandler(a.registry, func(r *http.Request) bool { return mayRead(r, opts.Auth, a.metrics) }, a.cfg.JWKSMaxAge).
		CacheCards(a.servedCardsVersion, servedCardsFresh, time.Now)
	routes := httpapi.Routes{
		Metrics:      a.metrics.Handler(),
		JWKS:         docs.jwks,
		Revocations:  docs.revocations,
		DID:          http.HandlerFunc(noDID),
		AgentCard:    agents.Card(),
		AgentLogSalt: agents.Salt(),
		AICatalog:    catalog.NewHandler(a.catalog.pub, a.cfg.JWKSMaxAge, func() time.Time { return a.now() }),
		Ready:        readyHandler(a),
		DocumentsReady: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			code, body := docs.ready(r.Context(), a)
			writeJSON(w, code, body)
		}),
	}
	if docs.did != nil {
		routes.DID = docs.did
	}
	if a.tlog != nil {
		routes.LogKeys = tlogserve.KeysHandler(a.cfg.Log.VerifierKeys(), a.cfg.JWKSMaxAge)
		var src tlogserve.Source = a.tlog
		if a.witnesses != nil {
			src = a.witnesses.view // the cosigned checkpoint
		}
		routes.Log = tlogserve.NewHandler(src, a.log)
	}
	return httpapi.NewMux(routes, httpapi.MuxOptions{Auth: opts.Auth, AuthFailed: a.metrics.authFailed})
}

// readyHandler answers /readyz: 200 while the last readiness check passed,
// 503 with a generic reason otherwise.
func readyHandler(a *Authority) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { serveReady(w, a) }
}

func serveReady(w http.ResponseWriter, a *Authority) {
	err := a.Ready()
	var alarm string
	if a.witnesses != nil {
		// Signing goes on through a split-view alarm (it is evidence
		// about the log's key, not this replica's health), but the
		// details say it.
		alarm = a.witnesses.alarm()
	}
	if err == nil {
		body := map[string]any{"status": "ready"}
		if alarm != "" {
			body["log_witness_alarm"] = alarm
		}
		writeJSON(w, http.StatusOK, body)
		return
	}
	// The reason is generic: this endpoint is public; the log has the
	// details (WatchReadiness logs each failure).
	reason := "key store unavailable"
	switch {
	case errors.Is(err, ErrDraining):
		reason = "shutting down"
	case errors.Is(err, ErrNotChecked):
		reason = "starting"
	case errors.Is(err, errStale):
		reason = "readiness check overdue"
	case errors.Is(err, ErrNoActiveKey):
		reason = "no active signing key"
	case errors.Is(err, store.ErrFull):
		// The volume of the embedded database: the log names it.
		reason = "disk full"
	case errors.Is(err, store.ErrUnavailable):
		// The database (PostgreSQL down or restarting): say so, not
		// "key backend", whichever read failed first.
		reason = "store unavailable"
	case errors.As(err, new(*KeyUnavailableError)):
		reason = "signing key cannot be opened"
	case errors.Is(err, backends.ErrUnavailable), errors.As(err, new(*UnavailableError)):
		reason = "key backend unavailable"
		var ue *UnavailableError
		if errors.As(err, &ue) && (ue.What == "audit log" || ue.What == "key store") {
			reason = ue.What + " unavailable"
		}
	}
	body := map[string]any{"status": "not ready", "reason": reason}
	if alarm != "" {
		body["log_witness_alarm"] = alarm
	}
	if a.docs.stale.jwks.Load() != nil || a.docs.stale.revocations.Load() != nil || a.docs.stale.did.Load() != nil {
		// Signing stopped, but verifiers still get the keys.
		body["documents"] = "served from the last read while the store is unavailable: see " + DocumentsReadyPath
	}
	writeJSON(w, http.StatusServiceUnavailable, body)
}

// DocumentsReadyPath is httpapi's: the readiness of the public documents.
const DocumentsReadyPath = httpapi.DocumentsReadyPath

// ready reports whether the documents (the DID document too, with a
// catalog) can be served now and how; it takes
// what a request would be served (rendered at most once per change, or per
// documentStaleRetry while the store is unreachable).
func (d documentHandlers) ready(ctx context.Context, a *Authority) (int, map[string]any) {
	if errors.Is(a.Ready(), ErrDraining) {
		// Shutting down: let endpoints drop the replica while it serves.
		return http.StatusServiceUnavailable, map[string]any{"status": "not ready", "reason": "shutting down"}
	}
	code := http.StatusOK
	body := map[string]any{"status": "ready"}
	for _, doc := range []struct {
		name  string
		h     *jwksserve.CachedHandler
		stale *atomic.Pointer[staleDocument]
	}{{"jwks", d.jwks, &a.docs.stale.jwks}, {"revocations", d.revocations, &a.docs.stale.revocations}, {"did", d.did, &a.docs.stale.did}} {
		if doc.h == nil {
			continue // no catalog, no DID document
		}
		if _, err := doc.h.Current(ctx); err != nil {
			code, body["status"] = http.StatusServiceUnavailable, "not ready"
			body[doc.name] = map[string]any{"state": "unavailable"}
			continue
		}
		if s := doc.stale.Load(); s != nil {
			body[doc.name] = map[string]any{"state": "last read", "since": s.Since.UTC(), "read": s.Read.UTC(), "until": s.Until.UTC()}
		} else {
			body[doc.name] = map[string]any{"state": "current"}
		}
	}
	return code, body
}

// writeJSON and httpCredentials are httpapi's, for the registry's handlers.
func writeJSON(w http.ResponseWriter, code int, v any)   { httpapi.WriteJSON(w, code, v) }
func httpCredentials(r *http.Request) access.Credentials { return httpapi.Credentials(r) }

// readerRoles may read a private card, over HTTP as over gRPC.
var readerRoles = []access.Role{access.RoleReader, access.RoleAuditor, access.RoleAdmin}

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
