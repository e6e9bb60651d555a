package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Cache and fetch limits.
const (
	// DefaultKeyMaxAge is how long a JWKS is used without asking the issuer
	// again when its response carries no Cache-Control max-age; the discovery
	// document is kept as long. Keys seen before stay usable past it while
	// the issuer is unreachable.
	DefaultKeyMaxAge = time.Hour
	// maxKeyMaxAge caps a server's max-age, so that a removed (compromised)
	// key is forgotten within a day however the issuer sets its headers.
	maxKeyMaxAge = 24 * time.Hour
	// DefaultMinRefreshInterval is the least time between two fetches of an
	// issuer's keys. Tokens with unknown kids are free for anyone to make;
	// without a floor each would cost the issuer (and us) a round trip.
	DefaultMinRefreshInterval = 30 * time.Second
	// fetchTimeout bounds one discovery-plus-JWKS fetch.
	fetchTimeout = 10 * time.Second
	// maxDocumentBytes caps a discovery document or JWKS.
	maxDocumentBytes = 1 << 20
	// MaxJWKSKeys caps the entries of an issuer's JWKS: issuers publish a
	// handful. A set with more is refused whole (the keys cached before
	// stay in use), so a hostile or broken issuer cannot make every fetch
	// parse, check and report thousands of keys.
	MaxJWKSKeys = 100
	// maxIgnoredKeysNamed is how many unusable keys the one warning per
	// fetch names; it counts the rest.
	maxIgnoredKeysNamed = 3
)

// keySet is one issuer's keys: fetched lazily (never in New, so that
// cardsignd starts while an issuer is down), cached, refreshed when stale or
// on an unknown kid at most once per minRefresh, and kept through outages.
type keySet struct {
	issuer     string
	client     *http.Client
	now        func() time.Time
	minRefresh time.Duration
	log        *slog.Logger

	// sem lets one goroutine fetch at a time; the others wait (or give up
	// with their context) and then use what it fetched.
	sem chan struct{}

	mu          sync.Mutex
	jwksURI     string    // from discovery; "" until discovered or after a failure
	discovered  time.Time // when jwksURI was learnt
	keys        []jose.JSONWebKey
	fetched     time.Time     // last successful JWKS fetch; zero: never
	maxAge      time.Duration // of the keys fetched last
	lastAttempt time.Time     // last fetch attempt, successful or not
	attempted   bool
	lastErr     error  // of the last attempt; nil after a success
	gen         uint64 // counts attempts, so waiters see one finished
}

func newKeySet(issuer string, client *http.Client, now func() time.Time, minRefresh time.Duration, log *slog.Logger) *keySet {
	return &keySet{
		issuer:     issuer,
		client:     client,
		now:        now,
		minRefresh: minRefresh,
		log:        log,
		sem:        make(chan struct{}, 1),
	}
}

// keysFor returns the keys that may have signed a token with kid (every key
// when kid is empty), fetching when the cache is stale or lacks kid and the
// rate limit allows.
func (ks *keySet) keysFor(ctx context.Context, kid string) ([]jose.JSONWebKey, *Error) {
	ks.mu.Lock()
	found := ks.match(kid)
	now := ks.now()
	fresh := !ks.fetched.IsZero() && now.Sub(ks.fetched) < ks.maxAge
	allowed := !ks.attempted || now.Sub(ks.lastAttempt) >= ks.minRefresh
	gen, lastErr := ks.gen, ks.lastErr
	ks.mu.Unlock()

	switch {
	case len(found) > 0 && (fresh || !allowed):
		return found, nil
	case len(found) == 0 && !allowed:
		return nil, ks.missing(lastErr, true)
	}

	if err := ks.refresh(ctx, gen); err != nil {
		// Only our own context ended while waiting for another fetch.
		return nil, &Error{Reason: ReasonIssuerUnavailable, Err: err}
	}
	ks.mu.Lock()
	found, lastErr = ks.match(kid), ks.lastErr
	ks.mu.Unlock()
	if len(found) > 0 {
		// Possibly stale keys after a failed refresh: the issuer being down
		// must not stop tokens it signed with keys we already know.
		return found, nil
	}
	return nil, ks.missing(lastErr, false)
}

// missing is the refusal for a kid not in the cache.
func (ks *keySet) missing(lastErr error, limited bool) *Error {
	if lastErr != nil {
		return &Error{Reason: ReasonIssuerUnavailable, Err: fmt.Errorf("no cached key for the token's kid and the issuer's keys could not be fetched: %w", lastErr)}
	}
	if limited {
		return refuse(ReasonUnknownKID, "no key with the token's kid (keys were fetched less than %v ago)", ks.minRefresh)
	}
	return refuse(ReasonUnknownKID, "no key with the token's kid in the issuer's JWKS")
}

// match returns the cached keys with kid (all when kid is ""). ks.mu held.
func (ks *keySet) match(kid string) []jose.JSONWebKey {
	if kid == "" {
		return ks.keys
	}
	var out []jose.JSONWebKey
	for _, k := range ks.keys {
		if k.KeyID == kid {
			out = append(out, k)
		}
	}
	return out
}

// refresh fetches the keys unless another goroutine has attempted a fetch
// since generation gen. It returns an error only when ctx ends while
// waiting; the fetch's own outcome is in ks.lastErr.
func (ks *keySet) refresh(ctx context.Context, gen uint64) error {
	select {
	case ks.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the issuer's keys: %w", ctx.Err())
	}
	defer func() { <-ks.sem }()

	ks.mu.Lock()
	if ks.gen != gen {
		ks.mu.Unlock()
		return nil // fetched (or tried) while we waited: use that
	}
	now := ks.now()
	ks.lastAttempt, ks.attempted = now, true
	jwksURI := ks.jwksURI
	if now.Sub(ks.discovered) >= DefaultKeyMaxAge {
		jwksURI = ""
	}
	ks.mu.Unlock()

	// The fetch outlives a caller who gives up: its result serves everyone,
	// and a cancelled fetch would still count against the rate limit.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	discovered := jwksURI == ""
	var err error
	if discovered {
		jwksURI, err = ks.discover(fctx)
	}
	var (
		keys   []jose.JSONWebKey
		maxAge time.Duration
	)
	if err == nil {
		keys, maxAge, err = ks.fetchJWKS(fctx, jwksURI)
	}

	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.gen++
	if err != nil {
		ks.lastErr = err
		ks.jwksURI = "" // rediscover next time: the JWKS may have moved
		ks.log.Warn("oidc: cannot fetch the issuer's keys; using cached keys", "issuer", ks.issuer, "cached_keys", len(ks.keys), "err", err)
		return nil
	}
	if discovered {
		ks.jwksURI, ks.discovered = jwksURI, now
	}
	ks.keys, ks.fetched, ks.maxAge, ks.lastErr = keys, now, maxAge, nil
	ks.log.Debug("oidc: fetched the issuer's keys", "issuer", ks.issuer, "keys", len(keys), "max_age", maxAge)
	return nil
}

// discover reads the discovery document and returns its jwks_uri.
func (ks *keySet) discover(ctx context.Context) (string, error) {
	u := strings.TrimSuffix(ks.issuer, "/") + "/.well-known/openid-configuration"
	body, _, err := ks.get(ctx, u)
	if err != nil {
		return "", err
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("discovery document %s: %w", u, err)
	}
	// OIDC Discovery §4.3: the issuer in the document must be exactly the
	// one we asked about, or a server could speak for another issuer.
	if doc.Issuer != ks.issuer {
		return "", fmt.Errorf("discovery document %s names issuer %q, not %q", u, doc.Issuer, ks.issuer)
	}
	ju, err := url.Parse(doc.JWKSURI)
	if err != nil || ju.Scheme != "https" || ju.Host == "" {
		return "", fmt.Errorf("discovery document %s: jwks_uri %q is not an https URL", u, doc.JWKSURI)
	}
	return doc.JWKSURI, nil
}

// fetchJWKS reads the signing keys. A key that does not parse, holds private
// material, is symmetric or is not for signatures is left out rather than
// failing the set (issuers publish keys of types we may not know), and
// reported in one warning per fetch: the issuer chooses how many there
// are.
func (ks *keySet) fetchJWKS(ctx context.Context, u string) ([]jose.JSONWebKey, time.Duration, error) {
	body, hdr, err := ks.get(ctx, u)
	if err != nil {
		return nil, 0, err
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, 0, fmt.Errorf("JWKS %s: %w", u, err)
	}
	if len(set.Keys) > MaxJWKSKeys {
		return nil, 0, fmt.Errorf("JWKS %s lists %d keys, more than the %d cardsignd reads from one issuer", u, len(set.Keys), MaxJWKSKeys)
	}
	var (
		keys    []jose.JSONWebKey
		ignored []string // the first maxIgnoredKeysNamed, for the warning
		nIgnore int
	)
	for i, raw := range set.Keys {
		var k jose.JSONWebKey
		var why string
		switch err := k.UnmarshalJSON(raw); {
		case err != nil:
			why = err.Error()
		case !k.IsPublic():
			why = "holds private or symmetric key material"
		case k.Use != "" && k.Use != "sig":
			why = fmt.Sprintf("use is %q", k.Use)
		case !k.Valid():
			why = "invalid key"
		}
		if why != "" {
			if nIgnore++; len(ignored) < maxIgnoredKeysNamed {
				ignored = append(ignored, fmt.Sprintf("keys[%d] (kid %q): %s", i, k.KeyID, why))
			}
			continue
		}
		keys = append(keys, k)
	}
	if nIgnore > len(ignored) {
		ignored = append(ignored, fmt.Sprintf("%d more", nIgnore-len(ignored)))
	}
	if len(keys) == 0 && len(set.Keys) > 0 {
		return nil, 0, fmt.Errorf("JWKS %s: none of its %d keys is usable: %s", u, len(set.Keys), strings.Join(ignored, "; "))
	}
	if nIgnore > 0 {
		ks.log.Warn("oidc: ignoring keys in the issuer's JWKS that are not public signing keys", "issuer", ks.issuer,
			"ignored", nIgnore, "keys", len(set.Keys), "which", strings.Join(ignored, "; "))
	}
	return keys, ks.cacheAge(hdr), nil
}

// cacheAge is how long the keys may be used before asking again: the
// response's max-age, bounded by minRefresh below and maxKeyMaxAge above.
func (ks *keySet) cacheAge(h http.Header) time.Duration {
	age := DefaultKeyMaxAge
	for _, d := range strings.Split(h.Get("Cache-Control"), ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
		switch strings.ToLower(name) {
		case "max-age":
			if n, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64); err == nil && n >= 0 {
				age = time.Duration(min(n, int64(maxKeyMaxAge/time.Second))) * time.Second
			}
		case "no-cache", "no-store":
			age = 0
		}
	}
	return min(max(age, ks.minRefresh), maxKeyMaxAge)
}

// get fetches u over HTTPS and returns a 200 response's body.
func (ks *keySet) get(ctx context.Context, u string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := ks.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if len(body) > maxDocumentBytes {
		return nil, nil, fmt.Errorf("GET %s: response larger than %d bytes", u, maxDocumentBytes)
	}
	return body, resp.Header, nil
}

// httpsOnly refuses redirects away from HTTPS: keys fetched over plain HTTP
// could have been replaced on the way.
func httpsOnly(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" {
			return errors.New("refusing a redirect to a non-https URL")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}
