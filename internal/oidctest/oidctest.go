// Package oidctest runs a real OpenID Connect issuer for tests: HTTPS on a
// loopback port with a certificate from a throw-away CA, a discovery document,
// a JWKS with RSA (RS256) and ECDSA P-256 (ES256) keys that can be rotated,
// an outage switch, fetch counters, a token minter with knobs for hostile
// tokens, claim sets shaped like GitHub Actions, GitLab CI and Kubernetes
// tokens, and a stand-in for the GitHub Actions ID-token endpoint.
//
// Tests talk to it over real TLS and HTTP, so the code under test uses its
// ordinary HTTP client (given Client or CAFile) rather than a fake transport.
// Every failure ends the calling test; nothing here is fit for production.
package oidctest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testpki"
)

// The paths the issuer serves below its URL.
const (
	DiscoveryPath    = "/.well-known/openid-configuration"
	JWKSPath         = "/jwks"
	ActionsTokenPath = "/_actions/idtoken"
)

// Issuer is a running OIDC issuer. Its methods are safe for concurrent use
// (the server answers from its own goroutines while a test rotates keys).
type Issuer struct {
	// URL is the issuer identifier: https://127.0.0.1:PORT, no trailing
	// slash, exactly what Mint puts in "iss".
	URL string
	// CAPEM is the throw-away root CA that issued the server certificate,
	// and CAFile the same PEM written to a file (for IssuerConfig.CAFile).
	CAPEM  []byte
	CAFile string
	// Pool trusts the CA, and Client is an HTTP client that uses it.
	Pool   *x509.CertPool
	Client *http.Client

	t   testing.TB
	srv *httptest.Server
	now func() time.Time

	discoveryFetches atomic.Int64
	jwksFetches      atomic.Int64
	actionsRequests  atomic.Int64
	down             atomic.Bool

	mu           sync.Mutex
	signing      *Key
	published    []*Key
	maxAge       int // Cache-Control max-age of the JWKS in seconds; <0: no header
	nextKID      int
	actionsToken string
	actionsBase  map[string]any
	// extra are raw JWKS entries served after the keys (PublishRaw).
	extra []any
}

// Option configures New.
type Option func(*settings)

type settings struct {
	alg string
	now func() time.Time
}

// WithAlgorithm makes the first signing key an RS256 or ES256 key (default
// RS256, the algorithm GitHub and GitLab sign with).
func WithAlgorithm(alg string) Option { return func(s *settings) { s.alg = alg } }

// WithClock sets the clock used for default iat/nbf/exp claims. The clock
// must be safe for concurrent use: the Actions endpoint mints from the
// server's goroutines. See Clock.
func WithClock(now func() time.Time) Option { return func(s *settings) { s.now = now } }

// New starts an issuer and stops it when the test ends.
func New(t testing.TB, opts ...Option) *Issuer {
	t.Helper()
	s := settings{alg: "RS256", now: time.Now}
	for _, o := range opts {
		o(&s)
	}

	ca := testpki.NewCA(t, "oidctest CA")
	certPEM, keyPEM := ca.Issue(t, testpki.ServerLeaf())
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("oidctest: server key pair: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	caFile := filepath.Join(t.TempDir(), "oidctest-ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM, 0o644); err != nil {
		t.Fatalf("oidctest: %v", err)
	}

	is := &Issuer{
		CAPEM:        ca.CertPEM,
		CAFile:       caFile,
		Pool:         pool,
		t:            t,
		now:          s.now,
		maxAge:       -1,
		actionsToken: "actions-request-token",
	}
	is.signing = is.NewKey(s.alg)
	is.published = []*Key{is.signing}

	mux := http.NewServeMux()
	mux.HandleFunc("GET "+DiscoveryPath, is.serveDiscovery)
	mux.HandleFunc("GET "+JWKSPath, is.serveJWKS)
	mux.HandleFunc("GET "+ActionsTokenPath, is.serveActionsToken)
	is.srv = httptest.NewUnstartedServer(is.outage(mux))
	// Clients that do not trust the CA are part of the tests; their
	// handshake failures are not news.
	is.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	is.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	is.srv.StartTLS()
	t.Cleanup(is.srv.Close)

	is.URL = is.srv.URL
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	is.Client = &http.Client{Transport: transport, Timeout: 10 * time.Second}
	t.Cleanup(transport.CloseIdleConnections)
	return is
}

// outage answers 503 to everything while the issuer is down. The counters
// still count, so a test can see that a client kept trying (or did not).
func (is *Issuer) outage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case DiscoveryPath:
			is.discoveryFetches.Add(1)
		case JWKSPath:
			is.jwksFetches.Add(1)
		case ActionsTokenPath:
			is.actionsRequests.Add(1)
		}
		if is.down.Load() {
			http.Error(w, "issuer down (oidctest)", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SetDown starts (true) or ends (false) an outage: while down, every
// request is answered 503 Service Unavailable.
func (is *Issuer) SetDown(down bool) { is.down.Store(down) }

// DiscoveryFetches and JWKSFetches count requests for the discovery document
// and the JWKS since the start (including those answered 503).
func (is *Issuer) DiscoveryFetches() int64 { return is.discoveryFetches.Load() }

// JWKSFetches: see DiscoveryFetches.
func (is *Issuer) JWKSFetches() int64 { return is.jwksFetches.Load() }

// JWKSURL is where the JWKS is served.
func (is *Issuer) JWKSURL() string { return is.URL + JWKSPath }

// SetCacheMaxAge makes the JWKS response carry "Cache-Control: max-age=N"
// (public); a negative value removes the header (the default).
func (is *Issuer) SetCacheMaxAge(seconds int) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.maxAge = seconds
}

// SigningKey returns the key Mint signs with.
func (is *Issuer) SigningKey() *Key {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.signing
}

// Rotate generates a key for alg ("" keeps the current key's algorithm),
// publishes it and makes it the signing key. With dropOld, every older key
// leaves the JWKS, as after an issuer retires them. It returns the new key.
func (is *Issuer) Rotate(alg string, dropOld bool) *Key {
	is.mu.Lock()
	if alg == "" {
		alg = is.signing.Alg
	}
	is.mu.Unlock()
	k := is.NewKey(alg)
	is.mu.Lock()
	defer is.mu.Unlock()
	if dropOld {
		is.published = nil
	}
	is.published = append(is.published, k)
	is.signing = k
	return k
}

// PublishRaw adds entries to the JWKS as they are, after the keys: broken,
// private or foreign keys, as a careless or hostile issuer may serve.
func (is *Issuer) PublishRaw(entries ...any) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.extra = append(is.extra, entries...)
}

// Publish adds k to the JWKS without making it the signing key.
func (is *Issuer) Publish(k *Key) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.published = append(is.published, k)
}

func (is *Issuer) serveDiscovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"issuer":                                is.URL,
		"jwks_uri":                              is.JWKSURL(),
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		"claims_supported":                      []string{"sub", "aud", "exp", "iat", "iss", "nbf"},
	})
}

func (is *Issuer) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	is.mu.Lock()
	keys := make([]any, 0, len(is.published)+len(is.extra))
	for _, k := range is.published {
		keys = append(keys, k.jwk())
	}
	keys = append(keys, is.extra...)
	maxAge := is.maxAge
	is.mu.Unlock()
	if maxAge >= 0 {
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", maxAge))
	}
	writeJSON(w, map[string]any{"keys": keys})
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// Clock is a settable clock safe for concurrent use, for WithClock and the
// verifier's Now option, so tokens and checks agree on the time.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock stopped at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
