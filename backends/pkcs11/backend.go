//go:build cgo && !nopkcs11

package pkcs11

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
	p11 "github.com/miekg/pkcs11"
)

// Backend opens and creates keys on PKCS#11 tokens. It is safe for
// concurrent use. A process should have one Backend per set of modules: the
// Backend initializes and, when it has to, re-initializes them.
type Backend struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex // guards the maps and closed; held while opening tokens
	modules map[string]*module
	tokens  map[tokenKey]*token
	closed  bool
}

// tokenKey identifies a token: its module and serial (the label only for
// tokens without a serial).
type tokenKey struct{ module, serial, label string }

var (
	_ backends.Backend       = (*Backend)(nil)
	_ backends.Creator       = (*Backend)(nil)
	_ backends.HealthChecker = (*Backend)(nil)
)

// New returns a Backend for cfg. Modules are loaded when a URI first needs
// them. A registry builds it through Constructor:
//
//	reg := backends.NewRegistry()
//	reg.Add(pkcs11.Scheme, pkcs11.Constructor, backends.Config{Settings: cfg})
//	defer reg.Close()
func New(cfg Config) (*Backend, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	return &Backend{
		cfg:     cfg,
		log:     cfg.Logger,
		modules: map[string]*module{},
		tokens:  map[tokenKey]*token{},
	}, nil
}

// Open finds the private key a pkcs11: URI names and returns a signer for
// it, with the JOSE alg derived from the key object: the curve for EC and
// Edwards keys; PS256 for RSA keys restricted to RSA-PSS, else RS256. The
// key signs once here, checked against its public key object, so a mismatched
// pair fails at Open rather than at the first card.
func (b *Backend) Open(ctx context.Context, uri string) (backends.Handle, error) {
	k, err := parseURI(uri)
	if err != nil {
		return backends.Handle{}, err
	}
	if !k.hasObject && !k.hasID {
		return backends.Handle{}, uriError(uri, "no object= or id= to pick the key")
	}
	if err := ctx.Err(); err != nil {
		return backends.Handle{}, fmt.Errorf("pkcs11: %w", err)
	}
	t, err := b.token(k)
	if err != nil {
		return backends.Handle{}, err
	}

	s := &signer{t: t, key: k.keyName()}
	s.name = t.name + " key " + s.key
	err = t.run(ctx, func(c *p11.Ctx, ses session) error {
		hs, err := findObjects(c, ses.h, privateTemplate(k.object, k.hasObject, k.id, k.hasID), 2)
		if err != nil {
			return err
		}
		switch len(hs) {
		case 0:
			return &KeyNotFoundError{Token: t.name, Key: s.key, Reason: "no private key with these attributes"}
		case 1:
		default:
			return errors.New("several private keys match; add id= to the URI")
		}
		ki, find, err := readKey(c, ses.h, hs[0], t.name, s.key)
		if err != nil {
			return err
		}
		s.ki, s.find, s.handle, s.gen = ki, find, hs[0], ses.gen
		return nil
	})
	if err != nil {
		return backends.Handle{}, wrapNamed("open "+s.name, err)
	}
	if _, err := jose.Sign(ctx, s, s.ki.alg, []byte("cardsign pkcs11 self-test")); err != nil {
		return backends.Handle{}, fmt.Errorf("pkcs11: open %s: self-test signature: %w", s.name, err)
	}
	// An RSA key not limited to PSS can sign RS256 and PS256 alike: it
	// claims no alg, so a record that says PS256 opens it (the registry's
	// default for RSA is RS256).
	alg := s.ki.alg
	if s.ki.anyRSA {
		alg = ""
	}
	return backends.Handle{Signer: s, Alg: alg}, nil
}

// wrapNamed adds "pkcs11: what: " to err unless it is one of the typed
// errors, which name the token and key themselves.
func wrapNamed(what string, err error) error {
	if backends.AsAny(err, new(*KeyNotFoundError), new(*UnsupportedKeyError), new(*PINError), new(*UnavailableError)) {
		return err
	}
	return fmt.Errorf("pkcs11: %s: %w", what, err)
}

// token returns the logged-in token a URI selects, loading its module and
// logging in on first use. The PIN is the URI's, else the configured one.
func (b *Backend) token(k *keyURI) (*token, error) {
	path, err := b.cfg.resolveModule(k.module)
	if err != nil {
		return nil, err
	}
	pin, err := k.pinFor(b.cfg.PIN, b.cfg.PINSourceDirs)
	if err != nil {
		return nil, err
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, &UnavailableError{Token: k.wantToken(), Err: ErrClosed}
	}
	m := b.modules[path]
	if m == nil {
		if m, err = loadModule(path, b.log); err != nil {
			return nil, err
		}
		b.modules[path] = m
	}

	m.rw.RLock()
	defer m.rw.RUnlock()
	ft, err := findToken(m.ctx, m.path, k.token, k.wantToken())
	if err != nil {
		// A token we know that is down right now is unavailable, not unknown.
		var nf *TokenNotFoundError
		if t := b.knownToken(m, k); t != nil && errors.As(err, &nf) {
			return t, t.samePIN(pin)
		}
		return nil, err
	}
	key := tokenKey{module: m.path, serial: ft.info.SerialNumber}
	if key.serial == "" {
		key.label = ft.info.Label
	}
	if t := b.tokens[key]; t != nil {
		return t, t.samePIN(pin)
	}
	t, err := newToken(m, ft, pin, b.cfg.PoolSize, b.log)
	if err != nil {
		return nil, err
	}
	b.tokens[key] = t
	return t, nil
}

// knownToken returns the one open token of m that k's token and serial
// attributes select, or nil. Only used when the token does not answer.
func (b *Backend) knownToken(m *module, k *keyURI) *token {
	if len(k.token) == 0 {
		return nil
	}
	var found *token
	for key, t := range b.tokens {
		if key.module != m.path {
			continue
		}
		ok := true
		for name, v := range k.token {
			switch name {
			case "token":
				ok = ok && t.label == v
			case "serial":
				ok = ok && t.serial == v
			default:
				ok = false // cannot be checked without the token
			}
		}
		if ok {
			if found != nil {
				return nil
			}
			found = t
		}
	}
	return found
}

// samePIN refuses a URI whose PIN differs from the one the token is logged
// in with. PKCS#11 login is per process, so the token would not check it.
func (t *token) samePIN(pin string) error {
	if subtle.ConstantTimeCompare([]byte(pin), []byte(t.pin)) != 1 {
		return &PINError{Token: t.name, Reason: "differs from the PIN this token is already logged in with"}
	}
	return nil
}

// Healthy reports whether every token opened so far answers and is logged
// in, for /readyz. A token that does not is re-initialized on the spot,
// within the backoff, so readiness probes also drive recovery. The error is
// an *UnavailableError naming the failing tokens.
func (b *Backend) Healthy(ctx context.Context) error {
	b.mu.Lock()
	closed := b.closed
	tokens := make([]*token, 0, len(b.tokens))
	for _, t := range b.tokens {
		tokens = append(tokens, t)
	}
	b.mu.Unlock()
	if closed {
		return &UnavailableError{Token: "(all)", Err: ErrClosed}
	}
	var failed []error
	var names string
	for _, t := range tokens {
		if err := ctx.Err(); err != nil {
			return &UnavailableError{Token: "(health check)", Err: err}
		}
		if err := t.check(ctx); err != nil {
			failed = append(failed, err)
			if names != "" {
				names += ", "
			}
			names += t.name
		}
	}
	switch len(failed) {
	case 0:
		return nil
	case 1:
		var u *UnavailableError
		if errors.As(failed[0], &u) {
			return u
		}
	}
	return &UnavailableError{Token: names, Err: errors.Join(failed...)}
}

// Close logs out of every token (by closing all sessions), finalizes the
// modules this Backend initialized and unloads them. Signers fail with
// *UnavailableError wrapping ErrClosed afterwards. Close waits for PKCS#11
// calls in progress.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	tokens := b.tokens
	modules := b.modules
	b.mu.Unlock()

	for _, t := range tokens {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
	}
	for _, m := range modules {
		m.rw.Lock()
		for _, t := range tokens {
			t.mu.Lock()
			if t.m == m && t.mgen == m.gen {
				_ = m.ctx.CloseAllSessions(t.slot)
			}
			t.mu.Unlock()
		}
		m.rw.Unlock()
		m.close()
	}
	b.log.Info("pkcs11: backend closed")
	return nil
}

// NotBuilt is empty: this build has the pkcs11 backend (no_pkcs11.go is
// the stub of a build without it).
const NotBuilt = ""

// Constructor builds this backend for a backends.Registry from a Config
// whose Settings is a Config.
func Constructor(ctx context.Context, cfg backends.Config) (backends.Backend, error) {
	return backends.Construct(ctx, Scheme, cfg, func(_ context.Context, c Config) (*Backend, error) { return New(c) })
}
