package backends

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// registry is the one piece of package-level mutable state: backends add
// themselves from init functions, and anything may look them up concurrently.
var registry struct {
	sync.RWMutex
	m map[string]Backend
}

// Register makes b the backend for URIs of the given scheme. It panics when
// the scheme is invalid, b is nil, or the scheme is already taken: these are
// programming errors, found the first time the binary starts.
func Register(scheme string, b Backend) {
	if !validScheme(scheme) || scheme != strings.ToLower(scheme) {
		panic(fmt.Sprintf("backends: Register: invalid scheme %q (want lower-case RFC 3986 scheme)", scheme))
	}
	if b == nil {
		panic("backends: Register: nil backend for scheme " + scheme)
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.m == nil {
		registry.m = make(map[string]Backend)
	}
	if _, dup := registry.m[scheme]; dup {
		panic("backends: Register called twice for scheme " + scheme)
	}
	registry.m[scheme] = b
}

// Lookup returns the backend registered for scheme. Schemes are
// case-insensitive (RFC 3986 §3.1).
func Lookup(scheme string) (Backend, bool) {
	registry.RLock()
	defer registry.RUnlock()
	b, ok := registry.m[strings.ToLower(scheme)]
	return b, ok
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.m))
	for s := range registry.m {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// UnknownSchemeError reports a key URI whose scheme no linked-in backend
// handles. Registered lists the schemes that are, because the usual cause is
// a backend that was not imported or a typo.
type UnknownSchemeError struct {
	Scheme     string
	Registered []string
}

func (e *UnknownSchemeError) Error() string {
	reg := "none"
	if len(e.Registered) > 0 {
		reg = strings.Join(e.Registered, ", ")
	}
	return fmt.Sprintf("backends: no backend for scheme %q (registered: %s)", e.Scheme, reg)
}
