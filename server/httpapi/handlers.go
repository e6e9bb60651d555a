package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/cardsign/cardsign/access"
)

// RequireRole guards h with a role when authentication is on. Refusals say
// nothing about what was wrong, as on the gRPC side; failed, when set,
// counts each failed authentication.
func RequireRole(auth *access.Authenticator, role access.Role, failed func(access.Credentials, error), h http.Handler) http.Handler {
	if auth == nil || !auth.Enabled() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		creds := Credentials(r)
		id, err := auth.Authenticate(r.Context(), creds)
		if err != nil {
			if failed != nil {
				failed(creds, err)
			}
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

// WriteJSON answers with v as JSON, never cached.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Credentials is what an HTTP request presents: its bearer and its
// verified client certificate. Two Authorization headers make an invalid
// bearer: refused rather than one picked.
func Credentials(r *http.Request) access.Credentials {
	creds := access.Credentials{Authorization: r.Header.Get("Authorization")}
	if len(r.Header.Values("Authorization")) > 1 {
		creds.Authorization = "invalid"
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		creds.CertIdentity = access.CertificateIdentity(r.TLS.VerifiedChains[0][0])
	}
	return creds
}

// Healthz answers that the process is up.
func Healthz(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}
