// Package httpapi is the HTTP side of the daemon's listener: the route
// table, connection limits, the refusal log and the small helpers the
// handlers share. The composition root (server) fills the table with its
// handlers; what is served where is decided here.
package httpapi

import (
	"net/http"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/transparency"
)

// DocumentsReadyPath answers 200 while this replica serves the JWKS, the
// revocation document and, with a catalog, the DID document, from the store
// or, while it is unreachable, from the last read (within their validity);
// 503 when it cannot serve one of them. It is the readiness of the public documents, apart from
// /readyz's readiness to sign: a load balancer in front of the documents
// (the Kubernetes readinessProbe) keeps a replica whose database is down.
const DocumentsReadyPath = "/readyz/documents"

// Routes are the handlers of the HTTP listener, one a route; NewMux puts
// each on its path. The composition root fills them; this package decides
// where each is served and which is guarded.
type Routes struct {
	// Metrics serves /metrics; NewMux guards it with the auditor role.
	Metrics http.Handler
	// JWKS and Revocations serve the public documents.
	JWKS, Revocations http.Handler
	// AgentCard and AgentLogSalt serve a registered agent's card and log
	// salt (GET only); they check the caller themselves (a public card
	// needs none).
	AgentCard, AgentLogSalt http.Handler
	// AICatalog serves the organisation's AI Catalog (public; it answers
	// 404 itself when the catalog is off).
	AICatalog http.Handler
	// LogKeys and Log serve the transparency log's verifier keys and its
	// checkpoint and tiles (Log below the log's path prefix, which NewMux
	// strips); both nil when the daemon keeps no log.
	LogKeys, Log http.Handler
	// DID serves the organisation's DID document (did:web) at
	// aicatalog.DIDPath, public like the JWKS (a 404 when no catalog is
	// configured).
	DID http.Handler
	// Ready serves /readyz (ready to sign) and DocumentsReady
	// DocumentsReadyPath (ready to serve the documents).
	Ready, DocumentsReady http.Handler
}

// MuxOptions configures the guard of the private routes.
type MuxOptions struct {
	// Auth, when enabled, guards /metrics: it names callers, so it needs
	// an identity with the auditor role (a bearer token, or a client
	// certificate when the listener asks for one). The JWKS, the
	// revocation document and the health endpoints stay public: verifiers
	// and load balancers have no credentials.
	Auth *access.Authenticator
	// AuthFailed, when set, counts each failed authentication.
	AuthFailed func(access.Credentials, error)
}

// NewMux serves routes on their paths, with /healthz (the process is up).
func NewMux(routes Routes, opts MuxOptions) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", RequireRole(opts.Auth, access.RoleAuditor, opts.AuthFailed, routes.Metrics))
	mux.Handle(jwks.JWKSPath, routes.JWKS)
	mux.Handle(jwks.RevocationsPath, routes.Revocations)
	mux.Handle(aicatalog.DIDPath, routes.DID)
	mux.Handle("GET "+registry.AgentCardPath, routes.AgentCard)
	mux.Handle("GET "+registry.AgentLogSaltPath, routes.AgentLogSalt)
	if routes.AICatalog != nil {
		mux.Handle(aicatalog.WellKnownPath, routes.AICatalog)
	}
	if routes.LogKeys != nil {
		// Public like the JWKS: anyone may check what was signed.
		mux.Handle(transparency.KeyPath, routes.LogKeys)
	}
	if routes.Log != nil {
		mux.Handle(transparency.PathPrefix, http.StripPrefix(transparency.PathPrefix, routes.Log))
	}
	mux.HandleFunc("/healthz", Healthz)
	mux.Handle(DocumentsReadyPath, routes.DocumentsReady)
	mux.Handle("/readyz", routes.Ready)
	return mux
}
