package oidc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/cardsign/cardsign/glob"
)

// Options are the Verifier's collaborators; the zero value is production.
type Options struct {
	// HTTPClient fetches discovery documents and JWKS; default a client with
	// a 10s timeout. Redirects to non-https URLs are refused either way. For
	// an issuer with a CAFile, the client's *http.Transport is cloned with
	// that bundle as its roots (another RoundTripper type is an error).
	HTTPClient *http.Client
	// Now is the clock for token times and cache ages; default time.Now.
	Now func() time.Time
	// Logger receives key-fetch failures (Warn) and fetches (Debug); default
	// discards.
	Logger *slog.Logger
	// MinRefreshInterval is the least time between two fetches of one
	// issuer's keys, including on unknown kids; default 30s.
	MinRefreshInterval time.Duration
}

// Verifier checks identity tokens against the configured issuers. It is safe
// for concurrent use.
type Verifier struct {
	cfg     Config // with defaults
	issuers map[string]*issuerState
	now     func() time.Time
}

type issuerState struct {
	cfg  IssuerConfig
	keys *keySet
}

// New builds a Verifier. It fetches nothing, so cardsignd starts while an
// issuer is down; keys are fetched at the first token of each issuer (or by
// Prefetch).
func New(ctx context.Context, cfg Config, opts Options) (*Verifier, error) {
	_ = ctx // reserved: New does no I/O beyond reading CAFiles
	if probs := cfg.Validate(); len(probs) > 0 {
		return nil, fmt.Errorf("oidc: invalid configuration:\n  %s", strings.Join(probs, "\n  "))
	}
	cfg = cfg.withDefaults()
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MinRefreshInterval <= 0 {
		opts.MinRefreshInterval = DefaultMinRefreshInterval
	}
	base := opts.HTTPClient
	if base == nil {
		base = &http.Client{Timeout: fetchTimeout}
	}

	v := &Verifier{cfg: cfg, issuers: map[string]*issuerState{}, now: opts.Now}
	for i, is := range cfg.Issuers {
		client, err := issuerClient(base, is.CAFile)
		if err != nil {
			return nil, fmt.Errorf("oidc: %s.issuers[%d]: %w", configPath, i, err)
		}
		v.issuers[is.Issuer] = &issuerState{
			cfg:  is,
			keys: newKeySet(is.Issuer, client, opts.Now, opts.MinRefreshInterval, opts.Logger.With("component", "oidc")),
		}
	}
	return v, nil
}

// issuerClient returns a copy of base that refuses redirects away from
// HTTPS and, with caFile, trusts only that bundle.
func issuerClient(base *http.Client, caFile string) (*http.Client, error) {
	c := *base
	c.CheckRedirect = httpsOnly(base.CheckRedirect)
	if caFile == "" {
		return &c, nil
	}
	pool, err := loadCAFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	var t *http.Transport
	switch rt := base.Transport.(type) {
	case nil:
		t = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		t = rt.Clone()
	default:
		return nil, fmt.Errorf("ca_file needs an *http.Transport to install it in, not %T", rt)
	}
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	t.TLSClientConfig.RootCAs = pool
	c.Transport = t
	return &c, nil
}

// Prefetch fetches every issuer's keys now (subject to the refresh rate
// limit) and returns the failures joined, for a daemon to log at start. A
// failure does not stop later verification: keys are fetched again on use.
func (v *Verifier) Prefetch(ctx context.Context) error {
	var errs []error
	for _, is := range v.cfg.Issuers {
		ks := v.issuers[is.Issuer].keys
		ks.mu.Lock()
		gen := ks.gen
		ks.mu.Unlock()
		if err := ks.refresh(ctx, gen); err != nil {
			errs = append(errs, err)
			continue
		}
		ks.mu.Lock()
		err := ks.lastErr
		ks.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", is.Issuer, err))
		}
	}
	return errors.Join(errs...)
}

// Verify checks raw, the bearer value without "Bearer ", and returns who it
// names and the roles it is granted. A token that passes every check but
// matches no RoleRule is returned with no Roles, not refused: the caller is
// authenticated and is then denied permission, which logs and audits better
// than an authentication failure. Every refusal is an *Error matching
// ErrInvalidToken.
//
// The checks run cheapest and most hostile-input-proof first, so that
// nothing about an unsigned token reaches the network: size; shape (three
// segments; five is a JWE); strict base64url and JSON (duplicate names
// refused); alg an asymmetric algorithm; no crit; iss a configured issuer;
// alg allowed for it; the key by kid (fetching if needed); the signature;
// exp, nbf and iat with ClockSkew; aud; the issuer's claim requirements; the
// subject.
func (v *Verifier) Verify(ctx context.Context, raw string) (*Token, error) {
	t, e := v.verify(ctx, raw)
	if e != nil {
		return nil, e
	}
	return t, nil
}

func (v *Verifier) verify(ctx context.Context, raw string) (*Token, *Error) {
	if len(raw) > v.cfg.MaxTokenBytes {
		return nil, refuse(ReasonTooLarge, "token is %d bytes, more than the %d allowed", len(raw), v.cfg.MaxTokenBytes)
	}
	p, e := parse(raw)
	if e != nil {
		return nil, e
	}

	iss, ok := p.claims["iss"].(string)
	if !ok {
		return nil, refuse(ReasonIssuerClaim, `no "iss" string claim`)
	}
	is := v.issuers[iss]
	if is == nil {
		return nil, refuse(ReasonUntrustedIssuer, "the token's issuer is not configured")
	}
	if !slices.Contains(is.cfg.Algorithms, p.header.alg) {
		return nil, refuse(ReasonAlg, "algorithm %s is not allowed for issuer %s", safeLabel(p.header.alg), iss)
	}

	keys, e := is.keys.keysFor(ctx, p.header.kid)
	if e != nil {
		e.Err = fmt.Errorf("issuer %s: %w", iss, e.Err)
		return nil, e
	}
	if e := verifySignature(raw, p.header.alg, keys); e != nil {
		e.Err = fmt.Errorf("issuer %s: %w", iss, e.Err)
		return nil, e
	}

	// The claims below are signed by a trusted issuer, but they still only
	// go into errors by name, not value: logs are not the place for them.
	exp, e := v.checkTimes(p.claims)
	if e != nil {
		return nil, e
	}
	if e := checkAudience(p.claims["aud"], is.cfg.Audience); e != nil {
		return nil, e
	}
	flat, strs, err := flatten(p.claims)
	if err != nil {
		return nil, refuse(ReasonDuplicateKey, "claims: %v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(is.cfg.Claims)) {
		val, ok := flat[name]
		if !ok || !glob.Match(is.cfg.Claims[name], val) {
			return nil, refuse(ReasonClaims, "claim %q does not meet issuer %s's requirement", name, iss)
		}
	}
	sub := flat[is.cfg.SubjectClaim]
	if !strs[is.cfg.SubjectClaim] || sub == "" {
		return nil, refuse(ReasonSubject, "subject claim %q is missing, empty or not a string", is.cfg.SubjectClaim)
	}

	return &Token{
		Issuer:  iss,
		Subject: sub,
		Claims:  flat,
		Roles:   v.roles(iss, flat),
		Expiry:  exp,
	}, nil
}

// verifySignature checks raw's signature with alg against keys (those with
// the token's kid). A key whose JWK names another algorithm is not used: the
// issuer said what the key is for.
func verifySignature(raw, alg string, keys []jose.JSONWebKey) *Error {
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.SignatureAlgorithm(alg)})
	if err != nil {
		return refuse(ReasonMalformed, "parsing the JWS: %v", err)
	}
	tried := 0
	for _, k := range keys {
		if k.Algorithm != "" && k.Algorithm != alg {
			continue
		}
		tried++
		if _, err := jws.Verify(k.Key); err == nil {
			return nil
		}
	}
	if tried == 0 {
		return refuse(ReasonAlg, "the issuer's key for the token's kid is not for algorithm %s", alg)
	}
	return refuse(ReasonSignature, "the signature does not verify with the issuer's key")
}

// checkTimes applies exp (required), nbf and iat with the clock skew and
// returns the expiry.
func (v *Verifier) checkTimes(claims map[string]any) (time.Time, *Error) {
	now, skew := v.now(), v.cfg.ClockSkew
	expV, ok := claims["exp"]
	if !ok {
		return time.Time{}, refuse(ReasonExpired, `no "exp" claim: a token that never expires is not accepted`)
	}
	exp, ok := numericDate(expV)
	if !ok {
		return time.Time{}, refuse(ReasonMalformed, `"exp" is not a NumericDate`)
	}
	if !now.Before(exp.Add(skew)) {
		return time.Time{}, refuse(ReasonExpired, "expired %v ago (clock skew allowed %v)", now.Sub(exp).Truncate(time.Second), skew)
	}
	for _, name := range []string{"nbf", "iat"} {
		val, ok := claims[name]
		if !ok {
			continue
		}
		t, ok := numericDate(val)
		if !ok {
			return time.Time{}, refuse(ReasonMalformed, "%q is not a NumericDate", name)
		}
		if t.After(now.Add(skew)) {
			return time.Time{}, refuse(ReasonNotYetValid, "%q is %v in the future (clock skew allowed %v)", name, t.Sub(now).Truncate(time.Second), skew)
		}
	}
	return exp, nil
}

// numericDate reads a JSON number of seconds since the epoch (RFC 7519 §2),
// fractions allowed, refusing negative, non-finite and absurdly distant
// values that would overflow time arithmetic.
func numericDate(v any) (time.Time, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || f < 0 || f > 1<<40 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

// checkAudience requires want among aud, a string or an array of strings.
func checkAudience(aud any, want string) *Error {
	switch a := aud.(type) {
	case string:
		if a == want {
			return nil
		}
	case []any:
		for _, x := range a {
			if s, ok := x.(string); ok && s == want {
				return nil
			}
		}
	case nil:
		return refuse(ReasonAudience, `no "aud" claim`)
	default:
		return refuse(ReasonAudience, `"aud" is neither a string nor an array`)
	}
	return refuse(ReasonAudience, "the token is not for this audience")
}

// roles is the sorted union of the roles of the rules for iss whose claim
// patterns all match.
func (v *Verifier) roles(iss string, flat map[string]string) []string {
	var out []string
	for _, r := range v.cfg.Rules {
		if r.Issuer != iss || !matchAll(r.Claims, flat) {
			continue
		}
		for _, role := range r.Roles {
			if !slices.Contains(out, role) {
				out = append(out, role)
			}
		}
	}
	slices.Sort(out)
	return out
}

func matchAll(patterns, flat map[string]string) bool {
	for name, pat := range patterns {
		val, ok := flat[name]
		if !ok || !glob.Match(pat, val) {
			return false
		}
	}
	return len(patterns) > 0 // Validate refuses empty rules; stay safe if one slips by
}
