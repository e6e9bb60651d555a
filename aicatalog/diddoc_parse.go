package aicatalog

import (
	"crypto/ecdsa"
	"fmt"
	"slices"
	"strings"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// MaxDIDDocumentBytes and MaxDIDDocumentDepth bound a DID document read
// when the caller gives no limits.
const (
	MaxDIDDocumentBytes = 256 << 10
	MaxDIDDocumentDepth = 16
)

// ParsedDIDDocument is a parsed DID document (read as plain JSON: no JSON-LD
// context is fetched or processed).
type ParsedDIDDocument struct {
	ID  string
	doc strictjson.Value
}

// ParseDIDDocument reads a DID document strictly (duplicate members, bad
// UTF-8, size and depth caps refused with the path and rule); lim zero
// means 256 KiB and depth 16. Its id must be a string.
func ParseDIDDocument(data []byte, lim strictjson.Limits) (*ParsedDIDDocument, error) {
	if lim == (strictjson.Limits{}) {
		lim = strictjson.Limits{MaxBytes: MaxDIDDocumentBytes, MaxDepth: MaxDIDDocumentDepth}
	}
	v, err := strictjson.ParseAs(data, lim, "DID document", "a DID document is a JSON object")
	if err != nil {
		return nil, fmt.Errorf("DID document: %w", err)
	}
	id, ok, err := v.GetString("id")
	if err != nil || !ok {
		return nil, fmt.Errorf("DID document: $.id: missing or not a string")
	}
	return &ParsedDIDDocument{ID: id, doc: v}, nil
}

// keyError is a key selection refusal with its reason code.
type keyError struct{ code, detail string }

func (e *keyError) Error() string { return e.code + ": " + e.detail }

// AssertionKey selects the key kid names for signer, as the did:web Signer
// Profile requires: authorized by assertionMethod (a reference to a
// verificationMethod, or an embedded method; relative "#frag" references
// resolved against the document), exactly one method with that id, its
// controller exactly signer, its publicKeyJwk an on-curve P-256 key with no
// private member, alg ES256, use sig and key_ops with verify when present.
// The error's text starts with the reason code.
func (d *ParsedDIDDocument) AssertionKey(kid, signer string) (*ecdsa.PublicKey, error) {
	methods, err := d.assertionMethods()
	if err != nil {
		return nil, err
	}
	var found []strictjson.Value
	for _, m := range methods {
		if id, _, _ := m.GetString("id"); d.absolute(id) == kid {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		return nil, &keyError{ReasonKeyNotAuthorized, fmt.Sprintf("%d assertionMethod entries of %s have the id %s", len(found), quote(d.ID), quote(kid))}
	}
	m := found[0]
	if c, _, _ := m.GetString("controller"); c != signer {
		return nil, &keyError{ReasonControllerMismatch, fmt.Sprintf("method %s has controller %s, not the signer %s", quote(kid), quote(c), quote(signer))}
	}
	return methodKey(m, kid)
}

// AssertionKeys are the P-256 keys the document authorizes for assertions
// by its own controller, by fragment (a method that fails AssertionKey's
// rules is left out).
func (d *ParsedDIDDocument) AssertionKeys() map[string]*ecdsa.PublicKey {
	methods, err := d.assertionMethods()
	if err != nil {
		return nil
	}
	out := map[string]*ecdsa.PublicKey{}
	for _, m := range methods {
		id, _, _ := m.GetString("id")
		kid := d.absolute(id)
		frag, ok := strings.CutPrefix(kid, d.ID+"#")
		if !ok || frag == "" {
			continue
		}
		if k, err := d.AssertionKey(kid, d.ID); err == nil {
			out[frag] = k
		}
	}
	return out
}

// assertionMethods are the methods assertionMethod authorizes, references
// resolved against verificationMethod.
func (d *ParsedDIDDocument) assertionMethods() ([]strictjson.Value, error) {
	am, ok := d.doc.Get("assertionMethod")
	if !ok {
		return nil, &keyError{ReasonKeyNotAuthorized, quote(d.ID) + " has no assertionMethod"}
	}
	if am.Kind != strictjson.Array {
		return nil, &keyError{ReasonDIDDocumentInvalid, "$.assertionMethod is not an array"}
	}
	vm, _ := d.doc.Get("verificationMethod")
	var out []strictjson.Value
	for _, a := range am.Arr {
		switch a.Kind {
		case strictjson.Object:
			out = append(out, a)
		case strictjson.String:
			ref := d.absolute(a.Str)
			if vm.Kind != strictjson.Array {
				continue
			}
			for _, m := range vm.Arr {
				if id, _, _ := m.GetString("id"); m.Kind == strictjson.Object && d.absolute(id) == ref {
					out = append(out, m)
				}
			}
		}
	}
	return out, nil
}

// absolute resolves a relative DID URL ("#frag") against the document.
func (d *ParsedDIDDocument) absolute(id string) string {
	if strings.HasPrefix(id, "#") {
		return d.ID + id
	}
	return id
}

// methodKey reads the P-256 public key of verification method m.
func methodKey(m strictjson.Value, kid string) (*ecdsa.PublicKey, error) {
	j, ok := m.Get("publicKeyJwk")
	if !ok || j.Kind != strictjson.Object {
		return nil, &keyError{ReasonJWKNotP256, "method " + quote(kid) + " has no publicKeyJwk object"}
	}
	var private []string
	raw := j.Compact()
	if names, err := jose.PrivateMembers(raw); err == nil {
		private = names
	}
	if len(private) > 0 {
		return nil, &keyError{ReasonJWKPrivate, fmt.Sprintf("publicKeyJwk of %s carries private members %s", quote(kid), strings.Join(private, ", "))}
	}
	kty, _, _ := j.GetString("kty")
	crv, _, _ := j.GetString("crv")
	if kty != "EC" || crv != "P-256" {
		return nil, &keyError{ReasonJWKNotP256, fmt.Sprintf("publicKeyJwk of %s is kty %s crv %s, not EC P-256", quote(kid), quote(kty), quote(crv))}
	}
	if alg, ok, _ := j.GetString("alg"); ok && alg != "ES256" {
		return nil, &keyError{ReasonJWKAlgOrUseMismatch, fmt.Sprintf("publicKeyJwk of %s has alg %s, not ES256", quote(kid), quote(alg))}
	}
	if use, ok, _ := j.GetString("use"); ok && use != "sig" {
		return nil, &keyError{ReasonJWKAlgOrUseMismatch, fmt.Sprintf("publicKeyJwk of %s has use %s, not sig", quote(kid), quote(use))}
	}
	if ops, ok := j.Get("key_ops"); ok {
		if ops.Kind != strictjson.Array || !slices.ContainsFunc(ops.Arr, func(o strictjson.Value) bool { return o.Kind == strictjson.String && o.Str == "verify" }) {
			return nil, &keyError{ReasonJWKKeyOpsForbid, "publicKeyJwk of " + quote(kid) + " has key_ops without verify"}
		}
	}
	x, _, _ := j.GetString("x")
	y, _, _ := j.GetString("y")
	pub, err := jose.JWK{Kty: "EC", Crv: "P-256", X: x, Y: y}.PublicKey()
	if err != nil {
		return nil, &keyError{ReasonJWKCoordinates, fmt.Sprintf("publicKeyJwk of %s: %v", quote(kid), err)}
	}
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return nil, &keyError{ReasonJWKNotP256, "publicKeyJwk of " + quote(kid) + " is not an EC key"}
	}
	return k, nil
}

// quote prints a string from a document escaped.
func quote(s string) string { return strictjson.QuoteForMessage(s) }
