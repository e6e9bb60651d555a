// Package tlsreload serves TLS from certificate and key files that rotate
// underneath a running server (cert-manager, Vault agent, Kubernetes secret
// mounts), optionally verifying client certificates against a CA bundle file
// that rotates the same way.
//
// A Reloader holds the current material (certificate chain, key, client CA
// pool) behind an atomic pointer. Each new handshake takes whatever is current;
// established connections keep the keys they negotiated, so a reload never
// drops a connection. Reload re-reads the files at once (the daemon calls it on
// SIGHUP) and Watch polls them. Material that fails to load (unreadable, not
// PEM, key not matching the certificate, expired) is refused and the previous
// material keeps serving: a half-finished rotation must not take the server
// down.
package tlsreload

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/pemkey"
	"github.com/cardsign/cardsign/secretfile"
)

// DefaultInterval is how often Watch polls when Config.Interval is zero.
const DefaultInterval = 10 * time.Second

// maxFileSize bounds what is read from any one file. Real certificate chains
// and CA bundles are kilobytes (the Mozilla bundle is ~200 KiB); the bound
// only stops a wrong path (a log, a device) from being slurped every poll.
const maxFileSize = 8 << 20

// Config names the files a Reloader serves from.
type Config struct {
	CertFile, KeyFile string        // PEM; the cert file may hold a chain (leaf first)
	ClientCAFile      string        // PEM bundle; empty = no client certificate verification
	Interval          time.Duration // how often Watch polls the files; 0 = 10s
	Logger            *slog.Logger  // nil = slog.Default()
}

// Reloader serves the current TLS material and swaps in new material when the
// files change. Its methods are safe for concurrent use.
type Reloader struct {
	cfg Config
	log *slog.Logger

	cur atomic.Pointer[material]

	reloads  atomic.Uint64
	failures atomic.Uint64

	// mu serialises loads (Reload from a signal handler racing a Watch poll),
	// so the compare-and-swap of material and the counters stay consistent.
	// Handshakes never take it.
	mu sync.Mutex
	// seen is what the files held the last time anyone looked, loaded or not,
	// and seenErr the read error if they could not be read. Watch acts only
	// when this changes, so a broken file is reported once, not every poll.
	seen    digest
	seenErr string
}

// material is one immutable, validated generation of TLS state.
type material struct {
	cert   *tls.Certificate
	certs  []tls.Certificate // cert, as tls.Config.Certificates wants it
	pool   *x509.CertPool    // nil when no ClientCAFile is configured
	nCAs   int
	digest digest
}

// digest fingerprints the bytes of the cert, key and client CA files, in
// that order (zero for an unset CA file).
type digest [3][sha256.Size]byte

// contents are the raw bytes of one read of all configured files.
type contents struct {
	cert, key, ca []byte
	keyMode       fs.FileMode
}

func (c *contents) digest() digest {
	var d digest
	d[0] = sha256.Sum256(c.cert)
	d[1] = sha256.Sum256(c.key)
	if c.ca != nil {
		d[2] = sha256.Sum256(c.ca)
	}
	return d
}

// New loads the files once and fails with an error naming the file and what
// is wrong with it if they are unusable.
func New(cfg Config) (*Reloader, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("tlsreload: both a cert file and a key file are required")
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("tlsreload: negative poll interval %v", cfg.Interval)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	r := &Reloader{cfg: cfg, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.Default()
	}
	c, err := r.read()
	if err != nil {
		return nil, err
	}
	m, err := r.parse(c)
	if err != nil {
		return nil, err
	}
	r.seen = m.digest
	r.cur.Store(m)
	r.checkKeyMode(c.keyMode)
	r.log.Info("tls material loaded", r.attrs(m)...)
	return r, nil
}

// ServerConfig returns a *tls.Config for a listener: TLS 1.2 or later, the
// current certificate for each new handshake, and nextProtos as ALPN (gRPC
// needs "h2"; an HTTP server "h2", "http/1.1").
//
// When ClientCAFile is configured, clientAuth applies with the CA pool current
// at each handshake: GetConfigForClient hands every handshake a fresh clone of
// the returned config, so a reloaded bundle applies to new handshakes. A
// resumed session cannot slip past a bundle change either: crypto/tls
// re-verifies the session's client chain against the handshake's pool (the
// tests check this). Set any other fields on the returned config before
// serving with it; later changes race with handshakes.
//
// Without a ClientCAFile, a clientAuth that verifies certificates
// (VerifyClientCertIfGiven, RequireAndVerifyClientCert) would make crypto/tls
// verify against the system roots, trusting every public CA. Instead it fails
// closed: the pool is empty, so every client certificate is refused, and an
// error is logged. The daemon should refuse such a configuration before it
// gets here.
func (r *Reloader) ServerConfig(clientAuth tls.ClientAuthType, nextProtos ...string) *tls.Config {
	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: slices.Clone(nextProtos),
		ClientAuth: clientAuth,
	}
	if r.cfg.ClientCAFile == "" {
		base.GetCertificate = r.getCertificate
		if clientAuth >= tls.VerifyClientCertIfGiven {
			r.log.Error("tls client certificate verification requested without a client CA file; refusing all client certificates",
				"client_auth", clientAuth.String())
			base.ClientCAs = x509.NewCertPool()
		}
		return base
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		// One snapshot, so the certificate and the CA pool of a handshake
		// always come from the same generation.
		m := r.cur.Load()
		c := base.Clone()
		c.GetConfigForClient = nil
		c.Certificates = m.certs
		c.ClientCAs = m.pool
		return c, nil
	}
	return base
}

func (r *Reloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cur.Load().cert, nil
}

// Reload re-reads all files now. On any error it keeps serving the previous
// material, counts a failure and returns the error for the caller to log. It
// returns changed=true when the material changed, and logs that at info.
func (r *Reloader) Reload() (changed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.read()
	if err != nil {
		r.seenErr = err.Error()
		r.failures.Add(1)
		return false, err
	}
	r.seen, r.seenErr = c.digest(), ""
	return r.apply(c, r.seen)
}

// Watch polls the files every Interval until ctx is done and reloads when the
// content of any of them changed. It compares SHA-256 digests of the bytes,
// not modification times: mtimes can be coarse, and Kubernetes rotates a
// secret by swapping a symlink to a new directory. It logs reloads at info
// and failures at warn, each failing state once rather than every poll.
func (r *Reloader) Watch(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.poll()
	}
}

func (r *Reloader) poll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.read()
	if err != nil {
		// A file missing for a moment mid-rotation, or for good: report
		// each distinct failure once.
		if err.Error() == r.seenErr {
			return
		}
		r.seenErr = err.Error()
		r.failures.Add(1)
		r.log.Warn("tls reload failed; still serving the previous certificate", "err", err)
		return
	}
	d := c.digest()
	if r.seenErr == "" && d == r.seen {
		return
	}
	r.seen, r.seenErr = d, ""
	if _, err := r.apply(c, d); err != nil {
		r.log.Warn("tls reload failed; still serving the previous certificate", "err", err)
	}
}

// apply installs c unless it matches what is serving. The caller holds mu.
func (r *Reloader) apply(c *contents, d digest) (bool, error) {
	if d == r.cur.Load().digest {
		return false, nil
	}
	m, err := r.parse(c)
	if err != nil {
		r.failures.Add(1)
		return false, err
	}
	r.cur.Store(m)
	r.reloads.Add(1)
	r.checkKeyMode(c.keyMode)
	r.log.Info("tls material reloaded", r.attrs(m)...)
	return true, nil
}

// Leaf returns the current leaf certificate (for expiry metrics and logs).
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().cert.Leaf }

// Reloads returns how many reloads succeeded and changed the material.
func (r *Reloader) Reloads() uint64 { return r.reloads.Load() }

// Failures returns how many reloads failed. Watch counts a broken state once,
// not once per poll, so the counter rises once per bad rotation.
func (r *Reloader) Failures() uint64 { return r.failures.Load() }

func (r *Reloader) attrs(m *material) []any {
	leaf := m.cert.Leaf
	a := []any{
		"cert_file", r.cfg.CertFile,
		"key_file", r.cfg.KeyFile,
		"subject", access.CertificateIdentity(leaf),
		"serial", hex.EncodeToString(leaf.SerialNumber.Bytes()),
		"not_after", leaf.NotAfter.UTC(),
		"chain_len", len(m.cert.Certificate),
	}
	if r.cfg.ClientCAFile != "" {
		a = append(a, "client_ca_file", r.cfg.ClientCAFile, "client_cas", m.nCAs)
	}
	return a
}

// checkKeyMode warns about a private key that other users can read. It does
// not refuse: Kubernetes mounts secrets 0644 unless told otherwise, and
// failing closed there would take the server down over a hardening issue.
func (r *Reloader) checkKeyMode(mode fs.FileMode) {
	if runtime.GOOS == "windows" || mode.Perm()&0o044 == 0 {
		return
	}
	r.log.Warn("tls key file is readable by group or others; restrict it to the server's user (chmod 600; a Kubernetes Secret volume read by a non-root pod is 0440 with fsGroup: then keep that group the pod's alone)",
		"key_file", r.cfg.KeyFile, "mode", mode.Perm().String())
}

// read reads every configured file once. Each file is read whole from one
// open descriptor, so its bytes and mode belong to the same file even while
// a rotation swaps paths.
func (r *Reloader) read() (*contents, error) {
	var c contents
	var err error
	if c.cert, _, err = readFile("cert file", r.cfg.CertFile); err != nil {
		return nil, err
	}
	if c.key, c.keyMode, err = readFile("key file", r.cfg.KeyFile); err != nil {
		return nil, err
	}
	if r.cfg.ClientCAFile != "" {
		// readFile returns non-nil bytes even for an empty file, so an empty
		// bundle still digests differently from an unset one.
		if c.ca, _, err = readFile("client CA file", r.cfg.ClientCAFile); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

func readFile(what, path string) ([]byte, fs.FileMode, error) {
	// Opened without blocking: a FIFO at the path would otherwise hang the
	// start, --check-config and every poll.
	f, fi, err := secretfile.Open(path, 0)
	var nr *secretfile.NotRegularError
	if errors.As(err, &nr) {
		return nil, 0, fmt.Errorf("tlsreload: %s %s: not a regular file (it is a %s)", what, path, secretfile.Kind(nr.Mode))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("tlsreload: %s %s: %w", what, path, unwrapPath(err))
	}
	defer f.Close()
	b, err := secretfile.ReadAll(f, fi, maxFileSize)
	var tl *secretfile.TooLargeError
	if errors.As(err, &tl) {
		return nil, 0, fmt.Errorf("tlsreload: %s %s: larger than %d bytes", what, path, maxFileSize)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("tlsreload: %s %s: %w", what, path, unwrapPath(err))
	}
	if b == nil {
		b = []byte{}
	}
	return b, fi.Mode(), nil
}

// unwrapPath drops the *fs.PathError wrapper, whose message repeats the path
// the caller already names, keeping the cause (fs.ErrNotExist etc.) for
// errors.Is.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// parse validates c and turns it into material. Errors name the file at
// fault; they may quote x509 parser errors but never key bytes.
func (r *Reloader) parse(c *contents) (*material, error) {
	now := time.Now()
	leaf, err := parseCertChain(r.cfg.CertFile, c.cert)
	if err != nil {
		return nil, err
	}
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("tlsreload: cert file %s: certificate %q expired at %s",
			r.cfg.CertFile, access.CertificateIdentity(leaf), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		// Clients will refuse it until then, but refusing it here would be
		// worse when the previous one has expired: only warn.
		r.log.Warn("tls certificate is not valid yet",
			"cert_file", r.cfg.CertFile, "not_before", leaf.NotBefore.UTC())
	}
	// checkKey only diagnoses: it names what is wrong with the key file
	// (encrypted, unsupported, absent, under the wrong label), which
	// tls.X509KeyPair's messages do not. X509KeyPair then pairs the chain
	// with that key and checks that they match.
	if err := checkKey(r.cfg.KeyFile, c.key); err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(c.cert, c.key)
	if err != nil {
		// Both files parsed above, so what is left is the pairing.
		return nil, fmt.Errorf("tlsreload: key file %s: private key does not match the certificate in %s: %w",
			r.cfg.KeyFile, r.cfg.CertFile, err)
	}
	cert.Leaf = leaf // X509KeyPair sets it too, unless GODEBUG x509keypairleaf=0
	m := &material{cert: &cert, certs: []tls.Certificate{cert}, digest: c.digest()}
	if r.cfg.ClientCAFile != "" {
		if m.pool, m.nCAs, err = parseCABundle(r.cfg.ClientCAFile, c.ca); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// parseCertChain parses every CERTIFICATE block in data and returns the
// first, the leaf. Every certificate must parse (tls.X509KeyPair parses only
// the leaf): a broken intermediate is refused here, naming it, rather than
// served. Other blocks are skipped so that a combined file (key and chain in
// one, CertFile == KeyFile) works.
func parseCertChain(path string, data []byte) (*x509.Certificate, error) {
	var leaf *x509.Certificate
	n := 0
	sawPEM := false
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		sawPEM = true
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("tlsreload: cert file %s: certificate %d: %w", path, n+1, err)
		}
		if leaf == nil {
			leaf = c
		}
		n++
	}
	switch {
	case !sawPEM:
		return nil, fmt.Errorf("tlsreload: cert file %s: no PEM data", path)
	case leaf == nil:
		return nil, fmt.Errorf("tlsreload: cert file %s: no CERTIFICATE block", path)
	}
	return leaf, nil
}

// checkKey checks that the first private key in data is one tls.X509KeyPair
// will take and that it parses in the format its label names (pemkey):
// PKCS#8 ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS#1 ("RSA PRIVATE
// KEY"), unencrypted. Other blocks (EC PARAMETERS from openssl ecparam,
// certificates in a combined file) are skipped, as X509KeyPair skips them.
func checkKey(path string, data []byte) error {
	sawPEM, sawCert := false, false
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		sawPEM = true
		switch {
		case b.Type == "ENCRYPTED PRIVATE KEY":
			return fmt.Errorf("tlsreload: key file %s: encrypted private keys are not supported", path)
		case b.Type == "CERTIFICATE":
			sawCert = true
			continue
		case !pemkey.Supported(b.Type):
			if strings.HasSuffix(b.Type, "PRIVATE KEY") {
				return fmt.Errorf("tlsreload: key file %s: unsupported key block %q", path, b.Type)
			}
			continue
		}
		_, err := pemkey.Parse(b.Type, b.Bytes)
		var fe *pemkey.FormatError
		var cs *pemkey.CannotSignError
		switch {
		case errors.As(err, &fe):
			return fmt.Errorf("tlsreload: key file %s: %s block: %w", path, b.Type, fe.Err)
		case errors.As(err, &cs):
			return fmt.Errorf("tlsreload: key file %s: %T cannot sign", path, cs.Key)
		case err != nil:
			return fmt.Errorf("tlsreload: key file %s: %w", path, err)
		}
		return nil
	}
	switch {
	case !sawPEM:
		return fmt.Errorf("tlsreload: key file %s: no PEM data", path)
	case sawCert:
		return fmt.Errorf("tlsreload: key file %s: holds a certificate but no private key", path)
	}
	return fmt.Errorf("tlsreload: key file %s: no PRIVATE KEY block", path)
}

// parseCABundle builds a pool from every CERTIFICATE block in data. Unlike
// CertPool.AppendCertsFromPEM it fails on a certificate it cannot parse: a
// silently shorter pool would refuse clients with no hint why.
func parseCABundle(path string, data []byte) (*x509.CertPool, int, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, 0, fmt.Errorf("tlsreload: client CA file %s: certificate %d: %w", path, n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, 0, fmt.Errorf("tlsreload: client CA file %s: holds no PEM certificate", path)
	}
	return pool, n, nil
}
