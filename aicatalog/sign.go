package aicatalog

import (
	"context"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// TimeFormat is how cardsign writes issuedAt and expiresAt: RFC 3339 in
// UTC, whole seconds, "Z" (what every example of the specification uses).
const TimeFormat = "2006-01-02T15:04:05Z"

// Payload returns the bytes a signature over v covers: the RFC 8785 form of
// v without the jws member of its own signature object and without its own
// additionalSignatures (not recursively: a catalog's payload holds its
// manifests with their jws).
func Payload(v strictjson.Value) ([]byte, error) {
	if v.Kind != strictjson.Object {
		return nil, fmt.Errorf("aicatalog: payload: want an object, not %s", v.Kind)
	}
	out := strictjson.Value{Kind: strictjson.Object, Obj: make([]strictjson.Member, 0, len(v.Obj))}
	for _, m := range v.Obj {
		switch m.Key {
		case "additionalSignatures":
			continue
		case "signature":
			if m.Val.Kind == strictjson.Object {
				sig := strictjson.Value{Kind: strictjson.Object}
				for _, sm := range m.Val.Obj {
					if sm.Key != "jws" {
						sig.Obj = append(sig.Obj, sm)
					}
				}
				m.Val = sig
			}
		}
		out.Obj = append(out.Obj, m)
	}
	b, err := out.JCS()
	if err != nil {
		return nil, fmt.Errorf("aicatalog: payload is not RFC 8785 input: %w", err)
	}
	return b, nil
}

// SigningKey is a key that signs under did-web-v1: an ES256 (P-256) signer
// and the verification method it is published as.
type SigningKey struct {
	Signer crypto.Signer
	// DID is the root did:web DID that signs (signature.signer, and the
	// contributor of a manifest); Fragment names the key in its DID
	// document (kid = DID#Fragment).
	DID, Fragment string
}

// KID is the JWS kid of k.
func (k SigningKey) KID() string { return KID(k.DID, k.Fragment) }

// Signed is the outcome of Sign: the signed object and what its audit
// record states.
type Signed struct {
	Value strictjson.Value
	// Payload is the RFC 8785 payload signed; Signature the raw ES256
	// signature (r‖s) and JWS the detached compact JWS stored in
	// signature.jws.
	Payload   []byte
	Signature []byte
	JWS       string
}

// Sign signs v (a Trust Manifest with typ TypManifest, or a catalog with
// TypCatalog) as k: it replaces v's signature object by {signer, profile,
// issuedAt, expiresAt (omitted when zero)}, computes the payload, signs it with
// ES256 (verified before it is returned) and stores the detached JWS. v
// itself is not modified.
func Sign(ctx context.Context, v strictjson.Value, typ string, k SigningKey, issuedAt, expiresAt time.Time) (Signed, error) {
	if v.Kind != strictjson.Object {
		return Signed{}, fmt.Errorf("aicatalog: sign: want an object, not %s", v.Kind)
	}
	if typ != TypManifest && typ != TypCatalog {
		return Signed{}, fmt.Errorf("aicatalog: sign: typ %q is neither %q nor %q", typ, TypManifest, TypCatalog)
	}
	if _, err := DomainOf(k.DID); err != nil {
		return Signed{}, fmt.Errorf("aicatalog: sign: signer: %w", err)
	}
	if err := CheckFragment(k.Fragment); err != nil {
		return Signed{}, fmt.Errorf("aicatalog: sign: key fragment %q: %w", k.Fragment, err)
	}
	if k.Signer == nil {
		return Signed{}, errors.New("aicatalog: sign: no signer")
	}
	if err := jose.CheckKey(jose.ES256, k.Signer.Public()); err != nil {
		return Signed{}, fmt.Errorf("aicatalog: sign: did-web-v1 signs with ES256 only: %w", err)
	}
	if !expiresAt.IsZero() && !expiresAt.Truncate(time.Second).After(issuedAt.Truncate(time.Second)) {
		return Signed{}, fmt.Errorf("aicatalog: sign: expiresAt %s is not after issuedAt %s", expiresAt.UTC().Format(TimeFormat), issuedAt.UTC().Format(TimeFormat))
	}
	sig := []strictjson.Member{
		{Key: "signer", Val: strictjson.StringValue(k.DID)},
		{Key: "profile", Val: strictjson.StringValue(Profile)},
		{Key: "issuedAt", Val: strictjson.StringValue(issuedAt.UTC().Format(TimeFormat))},
	}
	if !expiresAt.IsZero() {
		sig = append(sig, strictjson.Member{Key: "expiresAt", Val: strictjson.StringValue(expiresAt.UTC().Format(TimeFormat))})
	}
	out := strictjson.Value{Kind: strictjson.Object, Obj: make([]strictjson.Member, 0, len(v.Obj)+1)}
	for _, m := range v.Obj {
		if m.Key != "signature" {
			out.Obj = append(out.Obj, m)
		}
	}
	sigAt := len(out.Obj)
	out.Obj = append(out.Obj, strictjson.Member{Key: "signature", Val: strictjson.ObjectValue(sig...)})
	payload, err := Payload(out)
	if err != nil {
		return Signed{}, err
	}
	header, err := strictjson.ObjectValue(
		strictjson.Member{Key: "alg", Val: strictjson.StringValue(string(jose.ES256))},
		strictjson.Member{Key: "kid", Val: strictjson.StringValue(k.KID())},
		strictjson.Member{Key: "typ", Val: strictjson.StringValue(typ)},
	).JCS()
	if err != nil {
		return Signed{}, fmt.Errorf("aicatalog: sign: header: %w", err)
	}
	protected := base64.RawURLEncoding.EncodeToString(header)
	input := protected + "." + base64.RawURLEncoding.EncodeToString(payload)
	raw, err := jose.Sign(ctx, k.Signer, jose.ES256, []byte(input))
	if err != nil {
		return Signed{}, fmt.Errorf("aicatalog: sign as %s: %w", k.KID(), err)
	}
	jws := protected + ".." + base64.RawURLEncoding.EncodeToString(raw)
	out.Obj[sigAt].Val.Obj = append(out.Obj[sigAt].Val.Obj, strictjson.Member{Key: "jws", Val: strictjson.StringValue(jws)})
	return Signed{Value: out, Payload: payload, Signature: raw, JWS: jws}, nil
}
