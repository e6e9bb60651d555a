package backends

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/cardsign/cardsign/signer"
)

// Config is what a Constructor builds its backend from.
type Config struct {
	// Settings is the backend's own configuration value (file.Config,
	// pkcs11.Config, gcpkms.Config, awskms.Config); nil means its zero
	// value. A constructor refuses a value of another type.
	Settings any
}

// Constructor builds a backend. It is called at most once per Registry
// entry, on first use or from Build.
type Constructor func(ctx context.Context, cfg Config) (Backend, error)

// Registry maps URI schemes to backends, each built by its constructor the
// first time it is needed. A process owns its Registry (the daemon's
// wiring, the CLI, a test): there is no package-level registry, so two
// configurations of one backend can live side by side.
type Registry struct {
	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	ctor Constructor
	cfg  Config
	// done, b and err are the outcome of the one construction.
	done bool
	b    Backend
	err  error
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{entries: map[string]*entry{}} }

// Add makes ctor the constructor for URIs of scheme (lower-case RFC 3986).
// Adding a scheme twice is an error: two backends for one scheme would make
// which one opens a key depend on the order of wiring.
func (r *Registry) Add(scheme string, ctor Constructor, cfg Config) error {
	if !validScheme(scheme) || scheme != strings.ToLower(scheme) {
		return fmt.Errorf("backends: invalid scheme %q (want a lower-case RFC 3986 scheme)", scheme)
	}
	if ctor == nil {
		return fmt.Errorf("backends: nil constructor for scheme %s", scheme)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.entries[scheme]; dup {
		return fmt.Errorf("backends: scheme %s added twice", scheme)
	}
	r.entries[scheme] = &entry{ctor: ctor, cfg: cfg}
	return nil
}

// Backend returns the backend for scheme (case-insensitive, RFC 3986 §3.1),
// building it on first use. A scheme nothing was added for is an
// *UnknownSchemeError; a constructor's failure is returned on every call.
func (r *Registry) Backend(ctx context.Context, scheme string) (Backend, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[strings.ToLower(scheme)]
	if !ok {
		return nil, &UnknownSchemeError{Scheme: scheme, Registered: r.schemesLocked()}
	}
	if !e.done {
		// Built under the lock: construction is rare (once per scheme) and
		// concurrent first uses must not build two (two HSM module loads).
		e.b, e.err = e.ctor(ctx, e.cfg)
		if e.err == nil && e.b == nil {
			e.err = fmt.Errorf("backends: constructor for %s returned no backend", scheme)
		}
		e.done = true
	}
	return e.b, e.err
}

// Build builds every backend added, so that a misconfigured one fails at
// start rather than at its first key.
func (r *Registry) Build(ctx context.Context) error {
	for _, s := range r.Schemes() {
		if _, err := r.Backend(ctx, s); err != nil {
			return fmt.Errorf("%s backend: %w", s, err)
		}
	}
	return nil
}

// Open resolves uri with the backend for its scheme (see OpenWith).
func (r *Registry) Open(ctx context.Context, uri string, opts OpenOptions) (signer.Key, error) {
	scheme, err := Scheme(uri)
	if err != nil {
		return signer.Key{}, err
	}
	b, err := r.Backend(ctx, scheme)
	if err != nil {
		return signer.Key{}, err
	}
	return OpenWith(ctx, b, uri, opts)
}

// Schemes returns the schemes added, sorted.
func (r *Registry) Schemes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.schemesLocked()
}

func (r *Registry) schemesLocked() []string {
	out := make([]string, 0, len(r.entries))
	for s := range r.entries {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Close closes every backend built that holds resources (io.Closer: HSM
// sessions, KMS connections), in reverse order of scheme, and returns their
// errors joined.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	schemes := r.schemesLocked()
	for i := len(schemes) - 1; i >= 0; i-- {
		if c, ok := r.entries[schemes[i]].b.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Settings returns cfg.Settings as T: its zero value when nil, an error
// naming the scheme when it is of another type (a wiring mistake).
func Settings[T any](scheme string, cfg Config) (T, error) {
	var zero T
	switch s := cfg.Settings.(type) {
	case nil:
		return zero, nil
	case T:
		return s, nil
	default:
		return zero, fmt.Errorf("backends: %s constructor given settings of type %T, want %T", scheme, cfg.Settings, zero)
	}
}

// Construct is the body of a backend's Constructor: it takes cfg.Settings
// as the backend's own settings type C (the zero C when there are none)
// and makes the backend with newBackend.
func Construct[C any, B Backend](ctx context.Context, scheme string, cfg Config, newBackend func(context.Context, C) (B, error)) (Backend, error) {
	c, err := Settings[C](scheme, cfg)
	if err != nil {
		return nil, err
	}
	b, err := newBackend(ctx, c)
	if err != nil {
		return nil, err // not b: a nil *T would make a non-nil Backend
	}
	return b, nil
}

// NotBuiltError is a scheme whose backend this binary was built without
// (CGO_ENABLED=0 or a build tag such as nopkcs11).
type NotBuiltError struct {
	Scheme string
	How    string // how to get it: "rebuild with cgo and without -tags nopkcs11"
}

func (e *NotBuiltError) Error() string {
	return fmt.Sprintf("backends: this build has no %s backend; %s", e.Scheme, e.How)
}

// AddBuilt is how a binary adds a backend that a build tag may leave out:
// notBuilt is the backend package's NotBuilt, empty when this build has the
// backend, and then ctor and cfg are added as Add does. Otherwise the scheme
// gets a Missing constructor saying how to get it (Rebuild), so a key URI
// naming it says what this build lacks instead of "unknown scheme".
func (r *Registry) AddBuilt(binary, scheme string, ctor Constructor, notBuilt string, cfg Config) error {
	if notBuilt != "" {
		return r.Add(scheme, Missing(scheme, Rebuild(binary, notBuilt)), Config{})
	}
	return r.Add(scheme, ctor, cfg)
}

// Rebuild is how to get a backend that binary was built without, given the
// backend package's NotBuilt: "rebuild cardsignd without -tags noawskms".
func Rebuild(binary, notBuilt string) string { return "rebuild " + binary + " " + notBuilt }

// Missing is the constructor a build without a backend adds for its scheme,
// so a key URI or a config section naming it says what this build lacks
// instead of "unknown scheme".
func Missing(scheme, how string) Constructor {
	return func(context.Context, Config) (Backend, error) {
		return nil, &NotBuiltError{Scheme: scheme, How: how}
	}
}

// UnknownSchemeError reports a key URI whose scheme no backend handles.
// Registered lists the schemes that are, because the usual cause is a
// backend left out of the configuration or a typo.
type UnknownSchemeError struct {
	Scheme     string
	Registered []string
}

func (e *UnknownSchemeError) Error() string {
	return fmt.Sprintf("backends: no backend for scheme %q (configured: %s)", e.Scheme, JoinOrNone(e.Registered))
}

// AsAny reports whether errors.As finds any of targets (each a pointer to
// an error type, as errors.As takes) in err's chain. Backends return their
// typed errors, which say what failed themselves, as they are rather than
// wrap them in more context.
func AsAny(err error, targets ...any) bool {
	for _, target := range targets {
		if errors.As(err, target) {
			return true
		}
	}
	return false
}

// JoinOrNone joins names with ", ", or is "none" for no names: how errors
// list what is configured, allowed or present, so that an empty list still
// reads as one.
func JoinOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
