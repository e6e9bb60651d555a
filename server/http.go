package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
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
// /readyz (the last readiness check passed) and /metrics.
func NewHTTPHandler(a *Authority, opts HTTPOptions) http.Handler {
	a.metrics.Register(backendCollector{sources: opts.Stats})
	mux := http.NewServeMux()
	mux.Handle("/metrics", requireRole(a.metrics, opts.Auth, access.RoleAuditor, a.metrics.Handler()))
	docs := a.newDocumentHandlers()
	mux.Handle(jwks.JWKSPath, docs.jwks)
	mux.Handle(jwks.RevocationsPath, docs.revocations)
	mux.Handle("GET "+AgentCardPath, a.agentCardHandler(opts.Auth))
	mux.Handle("GET "+AgentLogSaltPath, a.agentLogSaltHandler(opts.Auth))
	if a.tlog != nil {
		// Public like the JWKS: anyone may check what was signed.
		mux.Handle(jwks.LogKeyPath, a.logKeyHandler())
		mux.Handle(jwks.LogPrefix, http.StripPrefix(jwks.LogPrefix, transparency.NewHandler(a.tlog, a.log)))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := a.Ready(); err != nil {
			// The reason is generic: this endpoint is public; the log has
			// the details (WatchReadiness logs each failure).
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
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "reason": reason})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
	})
	return mux
}

// requireRole guards h with a role when authentication is on. Refusals say
// nothing about what was wrong, as on the gRPC side.
func requireRole(m *Metrics, auth *access.Authenticator, role access.Role, h http.Handler) http.Handler {
	if auth == nil || !auth.Enabled() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		creds := httpCredentials(r)
		id, err := auth.Authenticate(r.Context(), creds)
		if err != nil {
			m.authFailed(creds, err)
			w.Header().Set("WWW-Authenticate", `Bearer realm="cardsignd"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		if !id.Has(role) {
			http.Error(w, "permission denied", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// httpCredentials is what an HTTP request presents: its bearer and its
// verified client certificate. Two Authorization headers make an invalid
// bearer: refused rather than one picked.
func httpCredentials(r *http.Request) access.Credentials {
	creds := access.Credentials{Authorization: r.Header.Get("Authorization")}
	if len(r.Header.Values("Authorization")) > 1 {
		creds.Authorization = "invalid"
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		creds.CertIdentity = access.CertificateIdentity(r.TLS.VerifiedChains[0][0])
	}
	return creds
}
