package azurekvfake

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Server is a running fake vault and its token endpoint.
type Server struct {
	vault    *httptest.Server // HTTPS: azcore sends bearer tokens over TLS only
	identity *httptest.Server // plain HTTP, as App Service's endpoint
	certs    *certs
	client   *http.Client
	store    *store
	faults   *faults
	header   string // IDENTITY_HEADER
	done     chan struct{}
	once     sync.Once
}

// Start serves a fake vault over HTTPS and its token endpoint over HTTP,
// each on a free port of 127.0.0.1, with opts as the initial faults. The
// vault has no keys: create them with CreateKey or with the client.
func Start(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c, err := newCerts()
	if err != nil {
		return nil, fmt.Errorf("azurekvfake: TLS certificates: %w", err)
	}
	vaultLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("azurekvfake: listen: %w", err)
	}
	idLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		vaultLis.Close()
		return nil, fmt.Errorf("azurekvfake: listen: %w", err)
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret) // crypto/rand.Read never fails

	f := &faults{opts: opts, calls: map[string]int{}}
	toks := &tokens{issued: map[string]token{}}
	s := &Server{
		certs:  c,
		store:  newStore(vaultLis.Addr().String()),
		faults: f,
		header: hex.EncodeToString(secret),
		done:   make(chan struct{}),
	}
	s.client = &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12},
		Proxy:           nil, // loopback; an HTTPS_PROXY of the environment must not apply
	}}

	s.vault = httptest.NewUnstartedServer(&vault{store: s.store, tokens: toks, faults: f, done: s.done})
	s.vault.Listener.Close()
	s.vault.Listener = vaultLis
	s.vault.TLS = &tls.Config{Certificates: []tls.Certificate{c.leaf}, MinVersion: tls.VersionTLS12}
	s.vault.Config.ErrorLog = log.New(quietHandshakes{}, "", log.LstdFlags)
	s.vault.StartTLS()

	s.identity = httptest.NewUnstartedServer(&identity{header: s.header, tokens: toks, faults: f})
	s.identity.Listener.Close()
	s.identity.Listener = idLis
	s.identity.Start()
	return s, nil
}

// Close stops both servers. Calls waiting out a Latency are dropped at
// once; it waits for the others to finish.
func (s *Server) Close() error {
	s.once.Do(func() {
		close(s.done)
		s.vault.Close()
		s.identity.Close()
		s.client.CloseIdleConnections()
	})
	return nil
}

// Host is the vault's 127.0.0.1:PORT.
func (s *Server) Host() string { return s.store.host }

// URL is the vault URL, https://127.0.0.1:PORT, for azkeys.NewClient.
// azkeys needs ClientOptions.DisableChallengeResourceVerification: the
// challenge names https://vault.azure.net, which an IP address can never
// be a subdomain of.
func (s *Server) URL() string { return "https://" + s.store.host }

// CACertPEM is the PEM of the CA that signed the vault's certificate, for
// a client in another process.
func (s *Server) CACertPEM() []byte { return slices.Clone(s.certs.caPEM) }

// CertPool is a pool holding the vault's CA only.
func (s *Server) CertPool() *x509.CertPool { return s.certs.pool.Clone() }

// HTTPClient trusts the vault's CA, and reaches the token endpoint too. It
// is an azcore policy.Transporter, for ClientOptions.Transport; the same
// client is returned each time.
func (s *Server) HTTPClient() *http.Client { return s.client }

// IdentityEndpoint is the URL of the token endpoint, for IDENTITY_ENDPOINT.
func (s *Server) IdentityEndpoint() string { return s.identity.URL + identityPath }

// IdentityHeader is the secret the token endpoint wants in
// X-IDENTITY-HEADER, for IDENTITY_HEADER.
func (s *Server) IdentityHeader() string { return s.header }

// Update changes the options while the server runs. A change that makes
// them invalid (a throttle rate outside 0..1, a negative duration or
// count) is refused and nothing changes.
func (s *Server) Update(change func(*Options)) error { return s.faults.update(change) }

// Options returns the current options; Unavailable and InternalErrors
// count down as calls use them up.
func (s *Server) Options() Options { return s.faults.snapshot() }

// Calls returns how many calls of op reached the server: "CreateKey",
// "GetKey", "UpdateKey" and "Sign" count the authenticated calls,
// refused or faulted ones included; "Token" counts the tokens issued;
// "Challenge" counts the 401 answers, one for the first call of every
// azkeys client (which is sent without a token to learn the tenant and
// scope) and one for every token refused.
func (s *Server) Calls(op string) int { return s.faults.callCount(op) }

// CreateKey adds a new version of the key name (making the key if it is
// new) as the CreateKey operation does, and returns the version. kty is
// EC, EC-HSM, RSA or RSA-HSM; crvOrSize is the curve of an EC key (P-256,
// P-384, P-521; "" for P-256) or the bits of an RSA key (2048, 3072,
// 4096; "" for 2048).
func (s *Server) CreateKey(name, kty, crvOrSize string) (string, error) {
	p := createParams{Kty: kty}
	if strings.HasPrefix(kty, "RSA") && crvOrSize != "" {
		bits, err := strconv.Atoi(crvOrSize)
		if err != nil {
			return "", fmt.Errorf("azurekvfake: create key: RSA key size %q: %w", crvOrSize, err)
		}
		p.KeySize = &bits
	} else {
		p.Crv = crvOrSize
	}
	b, aerr := s.store.create(name, &p)
	if aerr != nil {
		return "", fmt.Errorf("azurekvfake: create key: %w", aerr)
	}
	return b.Key.KID[strings.LastIndexByte(b.Key.KID, '/')+1:], nil
}

// PublicKey returns the public key of a version (*ecdsa.PublicKey or
// *rsa.PublicKey); version "" is the latest.
func (s *Server) PublicKey(name, version string) (crypto.PublicKey, bool) {
	return s.store.publicKey(name, version)
}

// SetEnabled enables or disables a version ("" is the latest), as
// UpdateKey does.
func (s *Server) SetEnabled(name, version string, enabled bool) error {
	if aerr := s.store.setEnabled(name, version, enabled); aerr != nil {
		return fmt.Errorf("azurekvfake: set enabled: %w", aerr)
	}
	return nil
}

// Enabled reports whether a version ("" is the latest) exists and is
// enabled, as after an UpdateKey a backend made.
func (s *Server) Enabled(name, version string) bool { return s.store.enabled(name, version) }

// Versions returns the versions of the key name, oldest first; nil if
// there is no such key.
func (s *Server) Versions(name string) []string { return s.store.versions(name) }

// quietHandshakes drops the "TLS handshake error" lines of the vault's
// log: a client that does not trust the fake's CA, as a test of exactly
// that makes, is expected. Other lines go to the standard logger.
type quietHandshakes struct{}

func (quietHandshakes) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("TLS handshake error")) {
		_, _ = log.Writer().Write(p)
	}
	return len(p), nil
}
