package signer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
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
	Limits  strictjson.Limits
	// MaxSignatures caps the signatures of one card; a card with more is
	// refused before any is checked. 0 means DefaultMaxSignatures.
	MaxSignatures int
	// Now is the time a signature's exp and iat are checked against
	// (default time.Now), with ClockSkew of leeway (0: DefaultClockSkew;
	// negative: none).
	Now       func() time.Time
	ClockSkew time.Duration
	// RevokedCard, when set, reports whether the card itself (by the
	// SHA-256 of its spec-profile canonical bytes) is revoked and why: such
	// a card is invalid whatever its signatures. A v0.3 card is asked about
	// under each of its readings, and is revoked when any one is.
	RevokedCard func(canonicalSHA256 [32]byte) (reason string, revoked bool)
	// LogKeys, when set, are the keys of the transparency log the verifier
	// trusts: a signature's inclusion proof (transparency.HeaderMember in
	// its unprotected header) must then lead to a checkpoint one of them
	// signed, for a log entry of this very signature over this very card,
	// or the signature does not count. Without LogKeys a proof is not
	// checked. RequireLog (with LogKeys) also refuses a signature without a
	// proof.
	LogKeys    []transparency.Verifier
	RequireLog bool
	// Witnesses, when it names witnesses (with LogKeys), also requires the
	// checkpoint of a signature's inclusion proof to carry valid
	// cosignatures from Witnesses.Quorum of them (C2SP tlog-cosignature):
	// a signature whose proof is not witnessed so does not count. It
	// implies RequireLog.
	Witnesses transparency.WitnessPolicy
}

// DefaultClockSkew is the leeway for a signature's exp and iat when
// VerifyOptions does not set one.
const DefaultClockSkew = time.Minute

// DefaultMaxSignatures is the signature cap when VerifyOptions does not set
// one. A card carries one signature per key and profile, two keys during a
// rotation: 4 in practice. Each signature may cost a JWKS fetch and a
// public-key operation, so a card with thousands of them is a
// denial-of-service, not a card.
const DefaultMaxSignatures = 16

// RuleMaxSignatures is the strictjson.Error rule of a card over MaxSignatures.
const RuleMaxSignatures = "max-signatures"

// Check is the outcome for one signature.
type Check struct {
	Index   int
	KID     string
	Alg     string
	Valid   bool
	Revoked bool
	Profile card.Profile // the profile whose bytes verified, when Valid
	// Mapping is the reading of a v0.3 card whose bytes verified, when
	// Valid: cardsign's, or a shipped SDK's (card.Mapping). Empty for a
	// v1.0 card.
	Mapping card.Mapping
	Reason  string // why not, when !Valid
	// RevokedWhy is what the revocation list says of the key, when
	// Revoked: when and why (jwks.Revocation.String).
	RevokedWhy string
	// declared is the profile the protected header names, if any: what a
	// signature not verified (a revoked key's) would have covered.
	declared card.Profile
	// HasProof reports that the signature carries an inclusion proof;
	// Logged is what the proof showed, when VerifyOptions.LogKeys checked it.
	HasProof bool
	Logged   *Logged
}

// Logged is where a verified inclusion proof puts a signature: leaf Index
// of the log Origin, within the checkpoint of Size leaves.
type Logged struct {
	Origin string
	Index  int64
	Size   int64
	Time   string // when the log recorded the signature (its entry's time)
	// Witnessed are the witnesses of VerifyOptions.Witnesses whose
	// cosignatures the proof's checkpoint carries (at least the quorum).
	Witnessed []transparency.Vouch
}

// Verification is the outcome for a card.
type Verification struct {
	Checks []Check
	// CanonicalSHA256 is the SHA-256 of the card's spec-profile canonical
	// bytes (cardsign's reading of a v0.3 card); CardRevoked, when not
	// empty, why the card itself is revoked: under any of its readings.
	CanonicalSHA256 [32]byte
	CardRevoked     string
	// divergences are the values the sdk profile drops: keys outside the
	// v1.0 schema and empty values.
	divergences []string
	forms       *card.Forms
	// formsOf gives the forms of each mapping's reading (a v0.3 card), or
	// forms (a v1.0 card).
	formsOf func(card.Mapping) *card.Forms
}

// Portability reports, for each verifier family, whether a signature that
// verified covers the bytes that family computes.
func (v *Verification) Portability() []Support {
	if v.forms == nil {
		return nil
	}
	formsOf := v.formsOf
	if formsOf == nil {
		formsOf = func(card.Mapping) *card.Forms { return v.forms }
	}
	var verified []signedForm
	for _, c := range v.Checks {
		if c.Valid {
			verified = append(verified, signedForm{c.Profile, formBytes(formsOf(c.Mapping), c.Profile)})
		}
	}
	rows := portability(formsOf, verified)
	// A family no valid signature covers, but a revoked key's signature
	// would have, is told so: "no signature over its bytes" would send the
	// operator looking for a signing bug instead of at the revocation.
	for i := range rows {
		if rows[i].Covered || rows[i].Reason == ReasonJSResolverBug {
			continue
		}
		for _, c := range v.Checks {
			if c.Revoked && (c.declared == "" || bytes.Equal(formBytes(v.forms, c.declared), formBytes(v.forms, rows[i].Profile))) {
				rows[i].Reason = c.RevokedReason()
				break
			}
		}
	}
	return rows
}

// RevokedReason says, for a signature by a revoked key, which key and when
// and why it was revoked: "signed by a revoked key (kid K, revoked at T
// (REASON))". Empty when the key is not revoked.
func (c Check) RevokedReason() string {
	if !c.Revoked {
		return ""
	}
	return fmt.Sprintf("signed by a revoked key (kid %s, %s)", Printable(c.KID), c.RevokedWhy)
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
	if v.CardRevoked != "" {
		return false
	}
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
	if opts.Witnesses.Enabled() {
		if len(opts.LogKeys) == 0 {
			return nil, errors.New("signer: verify: witnesses vouch for the log's checkpoints: give the log's keys (LogKeys) with them")
		}
		opts.RequireLog = true
	}
	if opts.Profile != "" {
		if _, err := card.ParseProfile(string(opts.Profile)); err != nil {
			return nil, fmt.Errorf("signer: verify: %w", err)
		}
	}
	loaded, err := card.Load(data, card.Options{Limits: opts.Limits})
	if err != nil {
		return nil, err
	}
	// A v0.3 card is read the way each shipped SDK maps it, as well as
	// cardsign's way: a signature made by either covers its own reading.
	// The first reading (cardsign's) is the card's identity.
	// Each reading is canonicalized once, for every signature.
	rs := loaded.Readings()
	readings := make([]reading, len(rs))
	for i, r := range rs {
		f, err := card.CanonicalForms(r.Value)
		if err != nil {
			return nil, err
		}
		readings[i] = reading{r.Mapping, f, sha256.Sum256(f.Spec)}
	}
	forms := readings[0].forms
	formsOf := func(m card.Mapping) *card.Forms {
		want := loaded.Reading(m).Mapping
		for _, r := range readings {
			if r.mapping == want {
				return r.forms
			}
		}
		return forms
	}
	sum := readings[0].sum
	// A revoked card is revoked under every reading: a signature verifies
	// over any of them, so a revoked v1.0 card rewritten as v0.3 (whose
	// a2a-python reading is the revoked card's bytes) must not pass.
	revoked := ""
	if opts.RevokedCard != nil {
		for _, r := range readings {
			if reason, ok := opts.RevokedCard(r.sum); ok {
				revoked = reason
				if r.mapping != "" && r.mapping != card.MappingCardsign {
					revoked += fmt.Sprintf(" (the card as %s reads it)", r.mapping)
				}
				break
			}
		}
	}

	sigs, ok := loaded.Value.Get("signatures")
	if !ok {
		return &Verification{forms: forms, formsOf: formsOf, CanonicalSHA256: sum, CardRevoked: revoked}, nil
	}
	if sigs.Kind != strictjson.Array {
		return nil, &strictjson.Error{Path: "signatures", Rule: card.RuleType, Offset: -1, Reason: "must be an array of signature objects, not " + sigs.Kind.String()}
	}
	maxSigs := opts.MaxSignatures
	if maxSigs <= 0 {
		maxSigs = DefaultMaxSignatures
	}
	if len(sigs.Arr) > maxSigs {
		return nil, &strictjson.Error{Path: "signatures", Rule: RuleMaxSignatures, Offset: -1, Reason: fmt.Sprintf(
			"%d signatures, over the limit of %d per card (one per key and profile is normal); raise the limit (cardsign verify --max-signatures N) only for a card you expect to carry that many",
			len(sigs.Arr), maxSigs)}
	}
	allow, err := jwks.ParseJKUAllowList(opts.AllowJKU)
	if err != nil {
		return nil, fmt.Errorf("signer: verify: %w", err)
	}
	v := &verifier{opts: opts, allow: allow, fetched: map[string]fetchResult{}}
	res := &Verification{divergences: forms.Divergences, forms: forms, formsOf: formsOf, CanonicalSHA256: sum, CardRevoked: revoked}
	for i, s := range sigs.Arr {
		// A run bounded by a deadline stops, instead of reporting every
		// remaining signature as failed for a reason that is not the card's.
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("signer: verify: stopped before signature[%d] of %d: %w", i, len(sigs.Arr), err)
		}
		c := Check{Index: i}
		if err := v.verifyOne(ctx, s, readings, &c); err != nil {
			c.Reason = err.Error()
		} else {
			c.Valid = true
		}
		res.Checks = append(res.Checks, c)
	}
	return res, nil
}

// verifier is the state of one Verify call.
type verifier struct {
	opts  VerifyOptions
	allow jwks.JKUAllowList
	// fetched memoizes FetchJKU by normalized URL, failures included: a
	// card that names one jku in many signatures costs one fetch, and a
	// URL that failed once is not retried within the same run.
	fetched map[string]fetchResult
}

type fetchResult struct {
	set KeySource
	err error
}

// reading is the canonical bytes of one reading of the card, per profile.
type reading struct {
	mapping card.Mapping
	forms   *card.Forms // its bytes per profile (formBytes)
	// sum is the SHA-256 of the reading's spec-profile canonical bytes: the
	// card's identity as this reading has it (revocations, log entries).
	sum [32]byte
}

func (v *verifier) verifyOne(ctx context.Context, s strictjson.Value, readings []reading, c *Check) error {
	opts := v.opts
	if s.Kind != strictjson.Object {
		return fmt.Errorf("signature is %s, not an object", s.Kind)
	}
	prot, _ := s.Get("protected")
	sigv, _ := s.Get("signature")
	if prot.Kind != strictjson.String || sigv.Kind != strictjson.String {
		return errors.New("protected and signature must both be strings")
	}
	h, err := parseHeader(prot.Str)
	if err != nil {
		return err
	}
	c.KID, c.Alg, c.declared = h.kid, h.algName, h.profile
	if opts.Revoked != nil {
		if reason, revoked := opts.Revoked(h.kid); revoked {
			c.Revoked, c.RevokedWhy = true, reason
			return fmt.Errorf("key %s is revoked: %s", Printable(h.kid), reason)
		}
	}
	if err := checkLifetime(h, opts); err != nil {
		return err
	}
	if unprot, ok := s.Get("header"); ok {
		if unprot.Kind != strictjson.Object {
			return errors.New("header must be an object")
		}
		for _, m := range unprot.Obj {
			if h.has(m.Key) {
				return fmt.Errorf("header parameter %q is both protected and unprotected (RFC 7515 §7.2.1)", m.Key)
			}
		}
		_, c.HasProof = unprot.Get(transparency.HeaderMember)
	}
	sig, err := b64.DecodeString(sigv.Str)
	if err != nil {
		return fmt.Errorf("signature is not base64url: %v", err)
	}
	if opts.RequireLog && len(opts.LogKeys) > 0 && !c.HasProof {
		return errors.New("signature carries no transparency-log inclusion proof, and a log key was given (a card signed before the log existed, or stripped of its proof, verifies without --log-key)")
	}
	jwk, err := v.findKey(ctx, h)
	if err != nil {
		return err
	}
	if jwk.Alg != "" && jwk.Alg != string(h.alg) {
		return fmt.Errorf("key %s is for %s, signature says %s", Printable(h.kid), Printable(jwk.Alg), h.alg)
	}
	if jwk.Use != "" && jwk.Use != "sig" {
		return fmt.Errorf("key %s has use %q, not sig", Printable(h.kid), jwk.Use)
	}
	pub, err := jwk.PublicKey()
	if err != nil {
		return fmt.Errorf("key %s: %v", Printable(h.kid), err)
	}
	if err := jose.CheckKey(h.alg, pub); err != nil {
		return err
	}
	// A signature that names its profile covers those bytes only; an
	// unmarked one (plain A2A, from any signer) may cover either.
	all := [...]card.Profile{card.ProfileSpec, card.ProfileSDK, card.ProfilePythonASCII}
	order := all[:]
	if h.profile != "" {
		order = []card.Profile{h.profile}
	}
	if opts.Profile != "" {
		if h.profile != "" && h.profile != opts.Profile {
			return fmt.Errorf("signature covers the %s profile; %s is required", h.profile, opts.Profile)
		}
		order = []card.Profile{opts.Profile}
	}
	// The same bytes under several profiles or readings are tried once,
	// under the first of them (cardsign's reading first; spec before sdk
	// before python-ascii).
	type candidate struct {
		mapping card.Mapping
		profile card.Profile
		bytes   []byte
		sum     [32]byte // the reading's
	}
	var room [3]candidate // a v1.0 card: one reading, up to three profiles
	cands := room[:0]
	for _, r := range readings {
		for _, p := range order {
			b := formBytes(r.forms, p)
			if !slices.ContainsFunc(cands, func(c candidate) bool { return bytes.Equal(c.bytes, b) }) {
				cands = append(cands, candidate{r.mapping, p, b, r.sum})
			}
		}
	}
	for _, cand := range cands {
		err = jose.Verify(h.alg, pub, signingInput(prot.Str, cand.bytes), sig)
		if err == nil {
			c.Profile, c.Mapping = cand.profile, cand.mapping
			return v.checkProof(s, h.kid, sigv.Str, cand.sum, c)
		}
		if !errors.Is(err, jose.ErrSignatureInvalid) {
			return err
		}
	}
	switch {
	case len(readings) > 1:
		return errors.New("signature does not match the card's canonical bytes in any profile, under any v0.3 mapping (cardsign's, a2a-python's, @a2a-js/sdk's) (card altered, or signed by another key)")
	case len(cands) == 1:
		return fmt.Errorf("signature does not match the card's %s canonical bytes (card altered, or signed over other bytes)", cands[0].profile)
	}
	return errors.New("signature does not match the card's canonical bytes in any profile (card altered, or signed by another key)")
}

func (v *verifier) findKey(ctx context.Context, h header) (jose.JWK, error) {
	kid := Printable(h.kid)
	if v.opts.Trusted != nil {
		if k, ok := v.opts.Trusted.Lookup(h.kid); ok {
			return k, nil
		}
	}
	if h.jku == "" {
		return jose.JWK{}, fmt.Errorf("kid %s is not in the trusted key set", kid)
	}
	if v.allow.Empty() || v.opts.FetchJKU == nil {
		return jose.JWK{}, fmt.Errorf("kid %s is not in the trusted key set (jku %s not followed: not under an allowed prefix)", kid, Printable(h.jku))
	}
	// The allow-list is checked on the normalized URL and that URL, not
	// the card's spelling of it, is fetched: see jwks.NormalizeJKU.
	u, err := jwks.NormalizeJKU(h.jku)
	if err != nil {
		return jose.JWK{}, fmt.Errorf("kid %s is not in the trusted key set (jku not followed: %v)", kid, err)
	}
	norm := u.String()
	if !v.allow.Allows(u) {
		return jose.JWK{}, fmt.Errorf("kid %s is not in the trusted key set (jku %s not followed: not under an allowed prefix)", kid, Printable(norm))
	}
	r, ok := v.fetched[norm]
	if !ok {
		r.set, r.err = v.opts.FetchJKU(ctx, norm)
		if r.err == nil && r.set == nil {
			r.err = errors.New("no key set")
		}
		v.fetched[norm] = r
	}
	if r.err != nil {
		return jose.JWK{}, fmt.Errorf("kid %s: fetch jku %s: %v", kid, Printable(norm), r.err)
	}
	if k, ok := r.set.Lookup(h.kid); ok {
		return k, nil
	}
	return jose.JWK{}, fmt.Errorf("kid %s is neither in the trusted key set nor at jku %s", kid, Printable(norm))
}

// jkuAllowed reports whether a jku, once normalized, is under one of the
// allowed prefixes (see jwks.JKUAllowList.Allows).
func jkuAllowed(jku string, prefixes []string) bool {
	allow, err := jwks.ParseJKUAllowList(prefixes)
	if err != nil {
		return false
	}
	u, err := jwks.NormalizeJKU(jku)
	return err == nil && allow.Allows(u)
}

// Printable returns s as it is when it is a plain token (printable ASCII
// without spaces, quotes or backslashes, as kids, algs and URLs are), and
// Go-quoted with every non-ASCII or control character escaped otherwise.
// Header values come from the card: printed raw, a kid holding a newline
// or an escape sequence could forge a "valid" line on a terminal.
func Printable(s string) string {
	if s == "" {
		return `""`
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return strconv.QuoteToASCII(s)
		}
	}
	return s
}

type header struct {
	alg      jose.Alg
	algName  string
	kid      string
	jku      string
	profile  card.Profile
	members  []strictjson.Member // the header as parsed, for has
	iat, exp *time.Time          // a signature lifetime, when the header has one
}

// parseHeader decodes and checks a protected header. It goes through the
// strict card parser: a header with duplicate "alg" members must not mean
// one thing here and another in the next library.
func parseHeader(protected string) (header, error) {
	raw, err := b64.DecodeString(protected)
	if err != nil {
		return header{}, fmt.Errorf("protected header is not base64url: %v", err)
	}
	v, err := card.Parse(raw, strictjson.Limits{MaxBytes: 8 << 10, MaxDepth: 8})
	if err != nil {
		return header{}, fmt.Errorf("protected header: %v", err)
	}
	h := header{members: v.Obj}
	for _, m := range v.Obj {
		str := func() (string, error) {
			if m.Val.Kind != strictjson.String {
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
		case "exp", "iat":
			if m.Val.Kind != strictjson.Number {
				return header{}, fmt.Errorf("protected header %q must be a number (seconds since 1970, RFC 7519 NumericDate)", m.Key)
			}
			f, err := strconv.ParseFloat(m.Val.Str, 64)
			if err != nil || f < 0 || f > 1<<40 {
				return header{}, fmt.Errorf("protected header %q is not a NumericDate", m.Key)
			}
			t := time.Unix(int64(f), 0).UTC()
			if m.Key == "exp" {
				h.exp = &t
			} else {
				h.iat = &t
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

// has reports whether the protected header has a member named name.
func (h header) has(name string) bool {
	for _, m := range h.members {
		if m.Key == name {
			return true
		}
	}
	return false
}

// checkLifetime refuses a signature past its exp, or issued (iat) in the
// future, beyond the clock skew.
func checkLifetime(h header, opts VerifyOptions) error {
	if h.exp == nil && h.iat == nil {
		return nil
	}
	now := time.Now()
	if opts.Now != nil {
		now = opts.Now()
	}
	skew := opts.ClockSkew
	switch {
	case skew == 0:
		skew = DefaultClockSkew
	case skew < 0:
		skew = 0
	}
	if h.exp != nil && now.After(h.exp.Add(skew)) {
		return fmt.Errorf("signature expired at %s (exp in its protected header; clock skew allowed %s)", h.exp.Format(time.RFC3339), skew)
	}
	if h.iat != nil && h.iat.After(now.Add(skew)) {
		return fmt.Errorf("signature issued in the future, at %s (iat in its protected header; clock skew allowed %s)", h.iat.Format(time.RFC3339), skew)
	}
	return nil
}

// checkProof checks a verified signature's inclusion proof against the log
// keys, when the verifier gave some. sum is the canonical SHA-256 of the
// reading the signature verified over: the card the log entry names.
func (v *verifier) checkProof(s strictjson.Value, kid, sig string, sum [32]byte, c *Check) error {
	if len(v.opts.LogKeys) == 0 || !c.HasProof {
		return nil
	}
	unprot, _ := s.Get("header")
	raw, _ := unprot.Get(transparency.HeaderMember)
	if raw.Kind != strictjson.String {
		return fmt.Errorf("header %s must be a string (a C2SP tlog-proof), not %s", transparency.HeaderMember, raw.Kind)
	}
	p, err := transparency.ParseProof(raw.Str)
	if err != nil {
		return fmt.Errorf("inclusion proof: %v", err)
	}
	e, cp, err := p.Verify(v.opts.LogKeys)
	if err != nil {
		return fmt.Errorf("inclusion proof: %v", err)
	}
	if err := e.Covers(kid, sig, sum); err != nil {
		return fmt.Errorf("inclusion proof: %v", err)
	}
	logged := &Logged{Origin: cp.Origin, Index: p.Index, Size: cp.Size, Time: e.Time}
	if v.opts.Witnesses.Enabled() {
		vs, err := v.opts.Witnesses.Check(p.Checkpoint)
		if err != nil {
			return fmt.Errorf("inclusion proof: checkpoint %d of %s is not witnessed: %v", cp.Size, cp.Origin, err)
		}
		logged.Witnessed = vs
	}
	c.Logged = logged
	return nil
}
