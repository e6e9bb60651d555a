// Package signer signs Agent Cards as detached JWS (A2A v1.0 §8.4) through
// any crypto.Signer, and verifies them against a trusted key set.
//
// It imports no backend, store or transport: the daemon and the offline CLI
// call the same functions.
package signer

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// Key is a signing key: the signer and its JOSE identity.
type Key struct {
	Signer crypto.Signer
	Alg    jose.Alg
	KID    string
	// Public is the public key on record for KID (the one published in the
	// JWKS). When set, a backend whose signer reports another key is
	// refused, so every signature is checked against the published key.
	Public crypto.PublicKey
	// Headers, when set, keeps the protected headers this key has built,
	// for a caller that signs many cards with the same key (the daemon).
	Headers *HeaderCache
}

// JWK returns the public JWK of the key's signer, with its kid and alg.
func (k Key) JWK() (jose.JWK, error) {
	j, err := jose.NewJWK(k.Signer.Public(), k.KID, k.Alg)
	if err != nil {
		return jose.JWK{}, fmt.Errorf("signer: key %s: %w", k.KID, err)
	}
	return j, nil
}

// Mode chooses the canonical profiles that signatures cover.
type Mode string

const (
	// ModeAuto signs the spec profile, adds an sdk-profile signature when
	// the sdk bytes differ from the spec bytes, and a python-ascii one when
	// those bytes differ from both, so every verifier finds one.
	ModeAuto Mode = ""
	ModeSpec Mode = "spec"
	ModeSDK  Mode = "sdk"
	// ModePythonASCII signs only the bytes a2a-python ≤ 1.1 computes.
	ModePythonASCII Mode = "python-ascii"
	// ModeBoth is ModeAuto stated explicitly (every profile a verifier
	// needs, which may be three).
	ModeBoth Mode = "both"
)

// ParseMode reads a --profile value.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeSpec, ModeSDK, ModePythonASCII, ModeBoth:
		return Mode(s), nil
	case "", "auto":
		return ModeAuto, nil
	}
	return "", fmt.Errorf("unknown profile %q (want spec, sdk, python-ascii or both)", s)
}

// Options control Sign: Prepare's options, and the keys that sign.
type Options struct {
	Keys []Key // every key signs; the daemon passes active and pending keys
	JKU  string
	Mode Mode
	// KeepSignatures keeps the card's existing signatures (after ours are
	// appended); by default they are replaced.
	KeepSignatures bool
	Card           card.Options
	// Lifetime, when positive, puts iat and exp in every signature's
	// protected header (SignOptions).
	Lifetime time.Duration
}

// Signature describes one signature that Sign made.
type Signature struct {
	KID       string
	Alg       jose.Alg
	Profile   card.Profile
	Protected string
	Value     string // base64url signature
}

// Result is a signed card and what went into it.
type Result struct {
	*Prepared
	Card       []byte // the signed card JSON, v1.0 shape, indented
	Signatures []Signature
	// sigs are the card's signature objects: the kept ones, then one per
	// Signatures entry.
	sigs []strictjson.Value
}

// mayBeProtected reports whether name is a header parameter a protected
// header Sign writes may hold, or one JOSE requires protected: none may be
// unprotected too. A fixed list spares parsing each protected header again.
func mayBeProtected(name string) bool {
	switch name {
	case "alg", "kid", "typ", "jku", "iat", "exp", ProfileHeader, "crit", "b64":
		return true
	}
	return false
}

// SetHeaders gives the signatures unprotected headers, one per Signatures
// entry (a zero strictjson.Value, a Null, leaves that signature without one), and renders
// Card again. The unprotected header is outside what the signature covers:
// cardsignd puts each signature's transparency-log inclusion proof there
// once the signature is logged. A header member named like a parameter a
// protected header may hold is refused (RFC 7515 §7.2.1).
func (r *Result) SetHeaders(headers []strictjson.Value) error {
	if len(headers) != len(r.Signatures) {
		return fmt.Errorf("signer: %d headers for %d signatures", len(headers), len(r.Signatures))
	}
	sigs := slices.Clone(r.sigs)
	own := len(sigs) - len(r.Signatures)
	for i, h := range headers {
		if h.Kind == strictjson.Null {
			continue
		}
		if h.Kind != strictjson.Object {
			return fmt.Errorf("signer: header of signature %d is %s, not an object", i, h.Kind)
		}
		for _, m := range h.Obj {
			if mayBeProtected(m.Key) {
				return fmt.Errorf("signer: header parameter %q of signature %d may be protected", m.Key, i)
			}
		}
		s := r.Signatures[i]
		sigs[own+i] = strictjson.ObjectValue(
			strictjson.Member{Key: "protected", Val: strictjson.StringValue(s.Protected)},
			strictjson.Member{Key: "signature", Val: strictjson.StringValue(s.Value)},
			strictjson.Member{Key: "header", Val: h},
		)
	}
	r.sigs = sigs
	// The card as signed, plus the headers: one allocation, no regrowth.
	n := 4096
	if len(r.payloads) > 0 {
		n += 2 * len(r.payloads[0].bytes) // indented, and the signatures
	}
	for _, h := range headers {
		for _, m := range h.Obj {
			n += len(m.Key) + len(m.Val.Str) + len(m.Val.Str)/16
		}
	}
	r.Card = withSignatures(r.Loaded.Value, sigs).AppendIndent(make([]byte, 0, n))
	return nil
}

// ErrNoKeys is returned when there is no key to sign with.
var ErrNoKeys = errors.New("signer: no signing key")

// Sign prepares a card (see Prepare) and signs it with every key in opts:
// the offline path, where keys are open before the card is read.
func Sign(ctx context.Context, data []byte, opts Options) (*Result, error) {
	if len(opts.Keys) == 0 {
		return nil, ErrNoKeys
	}
	p, err := Prepare(data, PrepareOptions{Card: opts.Card, Mode: opts.Mode, KeepSignatures: opts.KeepSignatures})
	if err != nil {
		return nil, err
	}
	return p.SignWith(ctx, opts.Keys, SignOptions{JKU: opts.JKU, Lifetime: opts.Lifetime})
}

// SignOptions are what a signature carries besides its key: the jku hint,
// and with a Lifetime, iat (Now) and exp (Now + Lifetime) in the protected
// header, after which verifiers refuse it.
type SignOptions struct {
	JKU      string
	Lifetime time.Duration
	Now      time.Time // default time.Now()
	// DeferCard leaves Result.Card empty for the caller to render with
	// SetHeaders, which it calls anyway (the daemon, once the signatures'
	// inclusion proofs are known): the card is rendered once.
	DeferCard bool
}

// Sign makes one detached JWS per key and profile, jku in each protected
// header when set, and verifies every signature locally before it returns.
// A Prepared signs any number of times (a retry with other keys).
func (p *Prepared) Sign(ctx context.Context, keys []Key, jku string) (*Result, error) {
	return p.SignWith(ctx, keys, SignOptions{JKU: jku})
}

// SignWith is Sign with every option.
func (p *Prepared) SignWith(ctx context.Context, keys []Key, o SignOptions) (*Result, error) {
	if len(keys) == 0 {
		return nil, ErrNoKeys
	}
	if o.Lifetime > 0 && o.Now.IsZero() {
		o.Now = time.Now()
	}
	res := &Result{Prepared: p}
	// A fresh slice: the kept signatures are shared by every Sign call.
	sigs := append([]strictjson.Value(nil), p.kept...)
	for _, k := range keys {
		for _, pl := range p.payloads {
			s, err := signOne(ctx, k, o, pl.profile, pl.bytes)
			if err != nil {
				return nil, err
			}
			res.Signatures = append(res.Signatures, s)
			sigs = append(sigs, strictjson.ObjectValue(
				strictjson.Member{Key: "protected", Val: strictjson.StringValue(s.Protected)},
				strictjson.Member{Key: "signature", Val: strictjson.StringValue(s.Value)},
			))
		}
	}
	res.sigs = sigs
	if !o.DeferCard {
		res.Card = withSignatures(p.Loaded.Value, sigs).Indent()
	}
	return res, nil
}

// publicKey is what crypto public keys have in common.
type publicKey interface{ Equal(crypto.PublicKey) bool }

func signOne(ctx context.Context, k Key, o SignOptions, profile card.Profile, payload []byte) (Signature, error) {
	if k.Signer == nil {
		return Signature{}, fmt.Errorf("signer: key %s has no signer", k.KID)
	}
	if k.KID == "" {
		return Signature{}, fmt.Errorf("signer: key without kid")
	}
	if k.Public != nil {
		// jose.Sign verifies with the signer's own public key; tying that key
		// to the one on record makes the check one against the published key.
		if pub, ok := k.Signer.Public().(publicKey); !ok || !pub.Equal(k.Public) {
			return Signature{}, fmt.Errorf("signer: key %s: the backend's public key is not the one on record", k.KID)
		}
	}
	var protected string
	if o.Lifetime > 0 {
		// iat and exp differ per signature: no header to cache.
		protected = b64.EncodeToString(protectedHeaderAt(k.Alg, k.KID, o.JKU, profile, o.Now.Unix(), o.Now.Add(o.Lifetime).Unix()))
	} else {
		protected = k.Headers.protected(k.Alg, k.KID, o.JKU, profile)
	}
	sig, err := jose.Sign(ctx, k.Signer, k.Alg, signingInput(protected, payload))
	if err != nil {
		return Signature{}, fmt.Errorf("signer: sign with %s: %w", k.KID, err)
	}
	return Signature{KID: k.KID, Alg: k.Alg, Profile: profile, Protected: protected, Value: b64.EncodeToString(sig)}, nil
}

// withSignatures returns the card with its signatures member set to sigs,
// where the old one stood, or last.
func withSignatures(v strictjson.Value, sigs []strictjson.Value) strictjson.Value {
	out := make([]strictjson.Member, 0, len(v.Obj)+1)
	placed := false
	for _, m := range v.Obj {
		if m.Key == "signatures" {
			if !placed {
				out = append(out, strictjson.Member{Key: "signatures", Val: strictjson.ArrayValue(sigs...)})
				placed = true
			}
			continue
		}
		out = append(out, m)
	}
	if !placed {
		out = append(out, strictjson.Member{Key: "signatures", Val: strictjson.ArrayValue(sigs...)})
	}
	return strictjson.ObjectValue(out...)
}
