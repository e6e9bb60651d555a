package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jwks"
)

// NewHTTPHandler serves the JWKS, the revocation document, /healthz (the
// process is up), /readyz (it can sign: store readable, an active key, key
// backends healthy) and /metrics (key backend counters).
func NewHTTPHandler(a *Authority, stats ...StatsSource) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(stats))
	mux.Handle(jwks.JWKSPath, jwks.Handler(a.JWKS))
	mux.Handle(jwks.RevocationsPath, jwks.RevocationHandler(a.Revocations))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := a.Ready(ctx); err != nil {
			// The reason is generic: this endpoint is public; the log has details.
			reason := "key store unavailable"
			switch {
			case errors.Is(err, ErrDraining):
				reason = "shutting down"
			case errors.Is(err, ErrNoActiveKey):
				reason = "no active signing key"
			case errors.Is(err, backends.ErrUnavailable), errors.As(err, new(*UnavailableError)):
				reason = "key backend unavailable"
				a.log.Warn("not ready", "err", err)
			default:
				a.log.Warn("not ready", "err", err)
			}
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "reason": reason})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Ready reports whether the authority can sign now: the store answers and a
// key is active.
func (a *Authority) Ready(ctx context.Context) error {
	if a.draining.Load() {
		return ErrDraining
	}
	if _, err := a.records(ctx, true); err != nil {
		return err
	}
	// Opening the signing keys (cached after the first time) proves their
	// backend can reach them: an HSM absent since start is not ready.
	if _, err := a.signingKeys(ctx); err != nil {
		return err
	}
	for _, scheme := range backends.Schemes() {
		b, _ := backends.Lookup(scheme)
		if hc, ok := b.(backends.HealthChecker); ok {
			if err := hc.Healthy(ctx); err != nil {
				return fmt.Errorf("%w: %s: %v", backends.ErrUnavailable, scheme, err)
			}
		}
	}
	return nil
}
