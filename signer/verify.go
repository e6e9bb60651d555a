package signer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jose"
)

// KeySource finds a public key by kid. jwks.Set is one.
type KeySource interface {
	Lookup(kid string) (jose.JWK, bool)
}

// VerifyOptions control Verify.
type VerifyOptions struct {
	// Trusted is the key set the verifier chose. Keys are taken from it by
	// kid only; a card cannot bring its own key.
	Trusted KeySource
	// AllowJKU lists URL prefixes under which a signature's jku hint may be
	// followed. Empty: jku is ignored.
	AllowJKU []string
	// FetchJKU loads the key set at an allowed jku URL.
	FetchJKU func(ctx context.Context, url string) (KeySource, error)
	// Revoked, when set, reports whether a kid is revoked and why; a
	// signature by a revoked key is invalid even if the math holds.
	Revoked func(kid string) (reason string, revoked bool)
	// Profile, when set, is the only canonical profile accepted.
	Profile card.Profile
	Limits  card.Limits
}

// Check is the outcome for one signature.
type Check struct {
	Index   int
	KID     string
	Alg     string
	Valid   bool
	Revoked bool
	Profile card.Profile // the profile whose bytes verified, when Valid
	Reason  string       // why not, when !Valid
}

// Verification is the outcome for a card.
type Verification struct {
	Checks []Check
	// divergences are the values the sdk profile drops: keys outside the
	// v1.0 schema and empty values.
	divergences []string
}

// Uncovered returns the parts of the card that no verified signature
// covers: when only sdk-profile signatures verified, the keys outside the
// v1.0 schema and the empty values that profile drops.
func (v *Verification) Uncovered() []string {
	for _, c := range v.Checks {
		if c.Valid && c.Profile == card.ProfileSpec {
			return nil
		}
	}
	return v.divergences
}

// Valid reports whether at least one signature verified, or with all, every
// one (and there is at least one).
func (v *Verification) Valid(all bool) bool {
	n := 0
	for _, c := range v.Checks {
		if c.Valid {
			n++
		}
	}
	if all {
		return n > 0 && n == len(v.Checks)
	}
	return n > 0
}

// Verify checks every signature of a card against keys from opts.Trusted
// (and allowed jku sets). It returns an error only when the card itself
// cannot be read; a signature that fails is reported in its Check.
func Verify(ctx context.Context, data []byte, opts VerifyOptions) (*Verification, error) {
	if opts.Profile != "" {
		if _, err := card.ParseProfile(string(opts.Profile)); err != nil {
			return nil, fmt.Errorf("signer: verify: %w", err)
		}
	}
	loaded, err := card.Load(data, card.Options{Limits: opts.Limits})
	if err != nil {
		return nil, err
	}
	forms, err := card.CanonicalForms(loaded.Value)
	if err != nil {
		return nil, err
	}
	payloads := map[card.Profile][]byte{card.ProfileSpec: forms.Spec, card.ProfileSDK: forms.SDK}

	sigs, ok := loaded.Value.Get("signatures")
	if !ok {
		return &Verification{}, nil
	}
	if sigs.Kind != card.Array {
		return nil, &card.Error{Path: "signatures", Rule: card.RuleType, Offset: -1, Reason: "must be an array of signature objects, not " + sigs.Kind.String()}
	}
	res := &Verification{divergences: forms.Divergences}
	for i, s := range sigs.Arr {
		c := Check{Index: i}
		if err := verifyOne(ctx, s, payloads, opts, &c); err != nil {
			c.Reason = err.Error()
		} else {
			c.Valid = true
		}
		res.Checks = append(res.Checks, c)
	}
	return res, nil
}

func verifyOne(ctx context.Context, s card.Value, payloads map[card.Profile][]byte, opts VerifyOptions, c *Check) error {
	if s.Kind != card.Object {
		return fmt.Errorf("signature is %s, not an object", s.Kind)
	}
	prot, _ := s.Get("protected")
	sigv, _ := s.Get("signature")
	if prot.Kind != card.String || sigv.Kind != card.String {
		return errors.New("protected and signature must both be strings")
	}
	h, err := parseHeader(prot.Str)
	if err != nil {
		return err
	}
	c.KID, c.Alg = h.kid, h.algName
	if opts.Revoked != nil {
		if reason, revoked := opts.Revoked(h.kid); revoked {
			c.Revoked = true
			return fmt.Errorf("key %s is revoked: %s", h.kid, reason)
		}
	}
	if unprot, ok := s.Get("header"); ok {
		if unprot.Kind != card.Object {
			return errors.New("header must be an object")
		}
		for _, m := range unprot.Obj {
			if h.names[m.Key] {
				return fmt.Errorf("header parameter %q is both protected and unprotected (RFC 7515 §7.2.1)", m.Key)
			}
		}
	}
	sig, err := b64.DecodeString(sigv.Str)
	if err != nil {
		return fmt.Errorf("signature is not base64url: %v", err)
	}
	jwk, err := findKey(ctx, h, opts)
	if err != nil {
		return err
	}
	if jwk.Alg != "" && jwk.Alg != string(h.alg) {
		return fmt.Errorf("key %s is for %s, signature says %s", h.kid, jwk.Alg, h.alg)
	}
	if jwk.Use != "" && jwk.Use != "sig" {
		return fmt.Errorf("key %s has use %q, not sig", h.kid, jwk.Use)
	}
	pub, err := jwk.PublicKey()
	if err != nil {
		return fmt.Errorf("key %s: %v", h.kid, err)
	}
	if err := jose.CheckKey(h.alg, pub); err != nil {
		return err
	}
	// A signature that names its profile covers those bytes only; an
	// unmarked one (plain A2A, from any signer) may cover either.
	order := card.Profiles()
	if h.profile != "" {
		order = []card.Profile{h.profile}
	}
	if opts.Profile != "" {
		if h.profile != "" && h.profile != opts.Profile {
			return fmt.Errorf("signature covers the %s profile; %s is required", h.profile, opts.Profile)
		}
		order = []card.Profile{opts.Profile}
	}
	if len(order) == 2 && bytes.Equal(payloads[order[0]], payloads[order[1]]) {
		order = order[:1]
	}
	for _, p := range order {
		err = jose.Verify(h.alg, pub, signingInput(prot.Str, payloads[p]), sig)
		if err == nil {
			c.Profile = p
			return nil
		}
		if !errors.Is(err, jose.ErrSignatureInvalid) {
			return err
		}
	}
	if len(order) == 1 {
		return fmt.Errorf("signature does not match the card's %s canonical bytes (card altered, or signed over other bytes)", order[0])
	}
	return errors.New("signature does not match the card's canonical bytes in any profile (card altered, or signed by another key)")
}

func findKey(ctx context.Context, h header, opts VerifyOptions) (jose.JWK, error) {
	if opts.Trusted != nil {
		if k, ok := opts.Trusted.Lookup(h.kid); ok {
			return k, nil
		}
	}
	if h.jku != "" && opts.FetchJKU != nil && jkuAllowed(h.jku, opts.AllowJKU) {
		set, err := opts.FetchJKU(ctx, h.jku)
		if err != nil {
			return jose.JWK{}, fmt.Errorf("kid %s: fetch jku %s: %v", h.kid, h.jku, err)
		}
		if k, ok := set.Lookup(h.kid); ok {
			return k, nil
		}
		return jose.JWK{}, fmt.Errorf("kid %s is neither in the trusted key set nor at jku %s", h.kid, h.jku)
	}
	if h.jku != "" {
		return jose.JWK{}, fmt.Errorf("kid %s is not in the trusted key set (jku %s not followed: not under an allowed prefix)", h.kid, h.jku)
	}
	return jose.JWK{}, fmt.Errorf("kid %s is not in the trusted key set", h.kid)
}

// jkuAllowed matches a jku against allowed prefixes at a URL boundary, so
// that https://keys.example.com does not admit https://keys.example.com.evil/.
func jkuAllowed(jku string, prefixes []string) bool {
	if !strings.HasPrefix(jku, "https://") && !strings.HasPrefix(jku, "http://") {
		return false
	}
	for _, p := range prefixes {
		if p == "" || !strings.HasPrefix(jku, p) {
			continue
		}
		if len(jku) == len(p) || strings.HasSuffix(p, "/") || strings.ContainsRune("/?#", rune(jku[len(p)])) {
			return true
		}
	}
	return false
}

type header struct {
	alg     jose.Alg
	algName string
	kid     string
	jku     string
	profile card.Profile
	names   map[string]bool
}

// parseHeader decodes and checks a protected header. It goes through the
// strict card parser: a header with duplicate "alg" members must not mean
// one thing here and another in the next library.
func parseHeader(protected string) (header, error) {
	raw, err := b64.DecodeString(protected)
	if err != nil {
		return header{}, fmt.Errorf("protected header is not base64url: %v", err)
	}
	v, err := card.Parse(raw, card.Limits{MaxBytes: 8 << 10, MaxDepth: 8})
	if err != nil {
		return header{}, fmt.Errorf("protected header: %v", err)
	}
	h := header{names: map[string]bool{}}
	for _, m := range v.Obj {
		h.names[m.Key] = true
		str := func() (string, error) {
			if m.Val.Kind != card.String {
				return "", fmt.Errorf("protected header %q must be a string", m.Key)
			}
			return m.Val.Str, nil
		}
		switch m.Key {
		case "alg":
			if h.algName, err = str(); err != nil {
				return header{}, err
			}
		case "kid":
			if h.kid, err = str(); err != nil {
				return header{}, err
			}
		case "jku":
			if h.jku, err = str(); err != nil {
				return header{}, err
			}
		case "typ":
			t, err := str()
			if err != nil {
				return header{}, err
			}
			if !strings.EqualFold(t, "JOSE") {
				return header{}, fmt.Errorf("protected header typ %q is not JOSE", t)
			}
		case ProfileHeader:
			p, err := str()
			if err != nil {
				return header{}, err
			}
			if h.profile, err = card.ParseProfile(p); err != nil {
				return header{}, fmt.Errorf("protected header %s: %v", ProfileHeader, err)
			}
		case "crit":
			return header{}, errors.New("protected header has crit: no critical extension is supported")
		case "b64":
			return header{}, errors.New("protected header has b64: unencoded payloads are not used for Agent Cards")
		}
	}
	if h.kid == "" {
		return header{}, errors.New("protected header has no kid")
	}
	if h.algName == "" {
		return header{}, errors.New("protected header has no alg")
	}
	if h.alg, err = jose.ParseAlg(h.algName); err != nil {
		return header{}, err
	}
	return h, nil
}
