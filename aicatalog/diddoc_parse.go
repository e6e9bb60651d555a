package aicatalog

import (
	"crypto/ecdsa"
	"fmt"
	"strings"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// Caps on a DID document where the caller's Limits leave a field zero: a
// root did:web document lists a handful of keys, so 64 KiB, a depth of 8 and
// 4096 values are generous and keep a hostile one cheap.
const (
	didMaxBytes  = 64 << 10
	didMaxDepth  = 8
	didMaxValues = 4096
)

// MaxDIDMethods caps the items of a DID document's verificationMethod and
// of its assertionMethod: a root did:web document lists a handful of keys,
// and every reference is looked up among the methods, so a hostile
// document of thousands of each would cost millions of comparisons per
// signature checked against it.
const MaxDIDMethods = 64

// ParsedDIDDocument is a DID document read strictly: the document is kept as
// parsed so that key selection sees exactly what was served.
type ParsedDIDDocument struct {
	// ID is the document's id member.
	ID  string
	doc strictjson.Value
	// methods are what assertionMethod authorizes, resolved once at parse.
	methods []didMethod
}

// AssertionKey is a key a DID document authorizes for assertions and that
// passes every did-web-v1 rule.
type AssertionKey struct {
	// KID is the method's absolute id (DID#fragment); Fragment the part
	// after "#".
	KID, Fragment string
	Public        *ecdsa.PublicKey
}

// ParseDIDDocument reads a DID document strictly (strictjson within lim,
// zero fields taking small defaults): duplicate names, bad UTF-8, a size or
// depth cap exceeded, or an id that is not a string are errors. A Reason
// with code CodeDIDDocumentInvalid is the error.
func ParseDIDDocument(data []byte, lim strictjson.Limits) (*ParsedDIDDocument, error) {
	if lim.MaxBytes == 0 {
		lim.MaxBytes = didMaxBytes
	}
	if lim.MaxDepth == 0 {
		lim.MaxDepth = didMaxDepth
	}
	if lim.MaxValues == 0 {
		lim.MaxValues = didMaxValues
	}
	doc, err := strictjson.ParseAs(data, lim, "DID document", "a DID document is a JSON object")
	if err != nil {
		return nil, Reason{CodeDIDDocumentInvalid, err.Error()}
	}
	id, ok, err := doc.GetString("id")
	if err != nil || !ok || id == "" {
		return nil, Reason{CodeDIDDocumentInvalid, "DID document: member \"id\" must be a non-empty string"}
	}
	for _, name := range []string{"verificationMethod", "assertionMethod"} {
		if v, _ := doc.Get(name); len(v.Arr) > MaxDIDMethods {
			return nil, Reason{CodeDIDDocumentInvalid, fmt.Sprintf("DID document: %s has %d items, more than %d", name, len(v.Arr), MaxDIDMethods)}
		}
	}
	d := &ParsedDIDDocument{ID: id, doc: doc}
	if d.methods, err = d.assertionMethods(); err != nil {
		return nil, err
	}
	return d, nil
}

// absolute resolves a DID URL relative to the document ("#frag" becomes
// ID#frag); anything else is taken as written.
func (d *ParsedDIDDocument) absolute(ref string) string {
	if strings.HasPrefix(ref, "#") {
		return d.ID + ref
	}
	return ref
}

// assertionMethods returns the methods assertionMethod authorizes, each
// with its resolved id: embedded objects as they are, string references
// looked up in verificationMethod (a reference to nothing authorizes
// nothing), each with its place in the document for messages.
func (d *ParsedDIDDocument) assertionMethods() ([]didMethod, error) {
	am, ok := d.doc.Get("assertionMethod")
	if !ok {
		return nil, nil
	}
	if am.Kind != strictjson.Array {
		return nil, Reason{CodeDIDDocumentInvalid, fmt.Sprintf("DID document: assertionMethod is %s, not an array", am.Kind)}
	}
	vms, _ := d.doc.Get("verificationMethod")
	var out []didMethod
	for i, item := range am.Arr {
		switch item.Kind {
		case strictjson.String:
			ref := d.absolute(item.Str)
			for j, vm := range vms.Arr {
				if id, _, _ := vm.GetString("id"); vm.Kind == strictjson.Object && d.absolute(id) == ref {
					out = append(out, didMethod{id: ref, v: vm, path: fmt.Sprintf("verificationMethod[%d]", j)})
				}
			}
		case strictjson.Object:
			id, _, _ := item.GetString("id")
			out = append(out, didMethod{id: d.absolute(id), v: item, path: fmt.Sprintf("assertionMethod[%d]", i)})
		default:
			return nil, Reason{CodeDIDDocumentInvalid, fmt.Sprintf("DID document: assertionMethod[%d] is %s, not a DID URL or a method", i, item.Kind)}
		}
	}
	return out, nil
}

type didMethod struct {
	id, path string
	v        strictjson.Value
}

// SelectKey returns the public key did-web-v1 verifies a signature by
// signer with protected kid against: exactly one assertionMethod method
// whose id is kid, controlled by signer, with a public P-256 JWK. The error
// is a Reason (CodeKeyNotAuthorized, CodeControllerMismatch, CodeJWK*).
func (d *ParsedDIDDocument) SelectKey(kid, signer string) (*ecdsa.PublicKey, error) {
	var found []didMethod
	for _, m := range d.methods {
		if m.id == kid {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		return nil, Reason{CodeKeyNotAuthorized, fmt.Sprintf("kid %s: %d assertionMethod entries have that id, want exactly 1", strictjson.QuoteForMessage(kid), len(found))}
	}
	return methodKey(found[0], signer)
}

// AssertionKeys returns every key the document authorizes for assertions
// by its own DID (controller == ID) that passes the did-web-v1 key rules;
// methods that fail a rule are left out. webtrust uses it to check a card
// signature against a did:web trust anchor.
func (d *ParsedDIDDocument) AssertionKeys() ([]AssertionKey, error) {
	methods := d.methods
	count := map[string]int{}
	for _, m := range methods {
		count[m.id]++
	}
	var out []AssertionKey
	for _, m := range methods {
		if count[m.id] != 1 {
			// SelectKey refuses an id listed twice; so does this.
			continue
		}
		frag, ok := strings.CutPrefix(m.id, d.ID+"#")
		if !ok || frag == "" {
			continue
		}
		pub, err := methodKey(m, d.ID)
		if err != nil {
			continue
		}
		out = append(out, AssertionKey{KID: m.id, Fragment: frag, Public: pub})
	}
	return out, nil
}

// methodKey applies the did-web-v1 rules to one verification method.
func methodKey(m didMethod, signer string) (*ecdsa.PublicKey, error) {
	at := func(code, format string, args ...any) error {
		return Reason{code, m.path + ": " + fmt.Sprintf(format, args...)}
	}
	if c, _, _ := m.v.GetString("controller"); c != signer {
		return nil, at(CodeControllerMismatch, "controller %s is not the signer %s", strictjson.QuoteForMessage(c), strictjson.QuoteForMessage(signer))
	}
	jwk, ok := m.v.Get("publicKeyJwk")
	if !ok || jwk.Kind != strictjson.Object {
		return nil, at(CodeJWKNotP256, "no publicKeyJwk object")
	}
	kty, _, _ := jwk.GetString("kty")
	crv, _, _ := jwk.GetString("crv")
	if kty != "EC" || crv != "P-256" {
		return nil, at(CodeJWKNotP256, "publicKeyJwk is kty %s crv %s, want EC P-256", strictjson.QuoteForMessage(kty), strictjson.QuoteForMessage(crv))
	}
	private, err := jose.PrivateMembers(jwk.Compact())
	if err != nil {
		return nil, at(CodeJWKCoordinatesInvalid, "publicKeyJwk: %v", err)
	}
	if len(private) > 0 {
		return nil, at(CodeJWKPrivateMaterial, "publicKeyJwk has private members %q", private)
	}
	if alg, ok, err := jwk.GetString("alg"); err != nil || ok && alg != string(jose.ES256) {
		return nil, at(CodeJWKAlgOrUseMismatch, "publicKeyJwk alg %s is not \"ES256\"", strictjson.QuoteForMessage(alg))
	}
	if use, ok, err := jwk.GetString("use"); err != nil || ok && use != "sig" {
		return nil, at(CodeJWKAlgOrUseMismatch, "publicKeyJwk use %s is not \"sig\"", strictjson.QuoteForMessage(use))
	}
	if ops, ok := jwk.Get("key_ops"); ok && !hasString(ops, "verify") {
		return nil, at(CodeJWKKeyOpsForbidVerify, "publicKeyJwk key_ops does not include \"verify\"")
	}
	x, _, errX := jwk.GetString("x")
	y, _, errY := jwk.GetString("y")
	if errX != nil || errY != nil {
		return nil, at(CodeJWKCoordinatesInvalid, "publicKeyJwk x and y must be strings")
	}
	pub, err := jose.JWK{Kty: kty, Crv: crv, X: x, Y: y}.PublicKey()
	if err != nil {
		return nil, at(CodeJWKCoordinatesInvalid, "publicKeyJwk: %v", err)
	}
	return pub.(*ecdsa.PublicKey), nil
}

func hasString(arr strictjson.Value, s string) bool {
	if arr.Kind != strictjson.Array {
		return false
	}
	for _, v := range arr.Arr {
		if v.Kind == strictjson.String && v.Str == s {
			return true
		}
	}
	return false
}
