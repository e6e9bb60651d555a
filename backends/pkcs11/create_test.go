//go:build cgo && !nopkcs11

package pkcs11

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
	p11 "github.com/miekg/pkcs11"
	pkcs11uri "github.com/stefanberger/go-pkcs11uri"
)

// TestCreateOpenSign makes a key of every alg inside the token, opens it by
// the URI Create returned, signs through jose.Sign and verifies with the
// public key and with its JWK, and reads the private key's protection
// attributes back through PKCS#11.
func TestCreateOpenSign(t *testing.T) {
	b, _ := newBackend(t, Config{Token: env.main.label, PIN: env.main.pin})
	ctx := t.Context()
	isCurve := func(name string) func(crypto.PublicKey) bool {
		return func(k crypto.PublicKey) bool {
			e, ok := k.(*ecdsa.PublicKey)
			return ok && e.Curve.Params().Name == name
		}
	}
	isRSA := func(k crypto.PublicKey) bool { r, ok := k.(*rsa.PublicKey); return ok && r.N.BitLen() == RSABits }
	tests := []struct {
		alg     jose.Alg
		pub     func(crypto.PublicKey) bool
		secrets []uint // attributes that must not be readable
	}{
		{jose.ES256, isCurve("P-256"), []uint{p11.CKA_VALUE}},
		{jose.ES384, isCurve("P-384"), []uint{p11.CKA_VALUE}},
		{jose.ES512, isCurve("P-521"), []uint{p11.CKA_VALUE}},
		{jose.RS256, isRSA, []uint{p11.CKA_PRIVATE_EXPONENT, p11.CKA_PRIME_1}},
		{jose.PS256, isRSA, []uint{p11.CKA_PRIVATE_EXPONENT, p11.CKA_PRIME_1}},
		{jose.EdDSA, func(k crypto.PublicKey) bool { _, ok := k.(ed25519.PublicKey); return ok }, []uint{p11.CKA_VALUE}},
	}
	loginTo(t, b, env.main) // the backend, not raw, initializes the module
	raw := openRaw(t, env.main)
	for _, tt := range tests {
		t.Run(string(tt.alg), func(t *testing.T) {
			label := uniq("create " + string(tt.alg) + "/é") // needs %-encoding
			uri, err := b.Create(ctx, backends.CreateRequest{Alg: tt.alg, Name: label})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}

			// The URI: token, object, a 16-byte id, nothing else.
			u := pkcs11uri.New()
			if err := u.Parse(uri); err != nil {
				t.Fatalf("go-pkcs11uri cannot parse %q: %v", uri, err)
			}
			tok, _ := u.GetPathAttribute("token", false)
			obj, _ := u.GetPathAttribute("object", false)
			id, _ := u.GetPathAttribute("id", false)
			if tok != env.main.label || obj != label || len(id) != idSize {
				t.Errorf("URI %s: token %q object %q id %d bytes", uri, tok, obj, len(id))
			}
			if _, ok := u.GetQueryAttribute("module-path", false); ok || strings.Contains(uri, "pin") {
				t.Errorf("URI %s has a module-path or PIN", uri)
			}

			h, err := b.Open(ctx, uri)
			if err != nil {
				t.Fatalf("Open(%s): %v", uri, err)
			}
			if h.Alg != tt.alg || h.KID != "" {
				t.Errorf("Handle alg %q kid %q, want %q and none", h.Alg, h.KID, tt.alg)
			}
			pub := h.Signer.Public()
			if !tt.pub(pub) {
				t.Fatalf("public key is %s", jose.KeyType(pub))
			}
			if err := jose.CheckKey(h.Alg, pub); err != nil { // what backends.Open checks
				t.Error(err)
			}

			input := []byte("eyJhbGciOiJ" + string(tt.alg) + "In0.eyJuYW1lIjoiYWdlbnQifQ")
			sig, err := jose.Sign(ctx, h.Signer, tt.alg, input)
			if err != nil {
				t.Fatalf("jose.Sign: %v", err)
			}
			if err := jose.Verify(tt.alg, pub, input, sig); err != nil {
				t.Errorf("jose.Verify with the public key: %v", err)
			}
			jwk, err := jose.NewJWK(pub, "", tt.alg)
			if err != nil {
				t.Fatal(err)
			}
			jwkPub, err := jwk.PublicKey()
			if err != nil {
				t.Fatal(err)
			}
			if err := jose.Verify(tt.alg, jwkPub, input, sig); err != nil {
				t.Errorf("jose.Verify with the JWK: %v", err)
			}
			if err := jose.Verify(tt.alg, jwkPub, append(input, '.'), sig); err == nil {
				t.Error("the signature also verifies over other input")
			}

			// The private key as the token holds it.
			priv := raw.privateKey(t, []byte(id))
			attrs, err := raw.c.GetAttributeValue(raw.s, priv, []*p11.Attribute{
				p11.NewAttribute(p11.CKA_SENSITIVE, nil),
				p11.NewAttribute(p11.CKA_EXTRACTABLE, nil),
				p11.NewAttribute(p11.CKA_TOKEN, nil),
				p11.NewAttribute(p11.CKA_SIGN, nil),
				p11.NewAttribute(p11.CKA_ALWAYS_SENSITIVE, nil),
				p11.NewAttribute(p11.CKA_NEVER_EXTRACTABLE, nil),
				p11.NewAttribute(p11.CKA_LABEL, nil),
			})
			if err != nil {
				t.Fatalf("C_GetAttributeValue: %v", err)
			}
			for i, want := range []bool{true, false, true, true, true, true} {
				if got := isTrue(attrs[i].Value); got != want {
					t.Errorf("attribute 0x%X = %v, want %v", attrs[i].Type, got, want)
				}
			}
			if string(attrs[6].Value) != label {
				t.Errorf("CKA_LABEL = %q", attrs[6].Value)
			}
			for _, a := range tt.secrets {
				_, err := raw.c.GetAttributeValue(raw.s, priv, []*p11.Attribute{p11.NewAttribute(a, nil)})
				if !errors.Is(err, p11.Error(p11.CKR_ATTRIBUTE_SENSITIVE)) {
					t.Errorf("reading secret attribute 0x%X: %v, want CKR_ATTRIBUTE_SENSITIVE", a, err)
				}
			}
		})
	}
}

// TestCreateURIName creates a key on a token named by a URI; the module-path
// of the default module is left out of the returned URI.
func TestCreateURIName(t *testing.T) {
	b, _ := newBackend(t, Config{}) // no Token, no PIN: the URI says it all
	label := uniq("by-uri")
	name := "pkcs11:token=" + env.main.label + ";object=" + label + "?module-path=" + env.module + "&pin-value=" + env.main.pin
	uri, err := b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256, Name: name})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if !strings.HasPrefix(uri, "pkcs11:token=cardsign-main;object="+label+";id=%") || strings.Contains(uri, "?") {
		t.Errorf("URI = %s", uri)
	}
	if _, err := b.Open(t.Context(), uri+"?pin-value="+env.main.pin); err != nil {
		t.Errorf("Open: %v", err)
	}
}

func TestCreateErrors(t *testing.T) {
	b, logs := newBackend(t, Config{Token: env.main.label, PIN: env.main.pin})
	noToken, _ := newBackend(t, Config{PIN: env.main.pin})
	ctx := t.Context()
	twice := uniq("twice")
	if _, err := b.Create(ctx, backends.CreateRequest{Alg: jose.ES256, Name: twice}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		b     *Backend
		req   backends.CreateRequest
		errIs error
		has   string
	}{
		{"label taken", b, backends.CreateRequest{Alg: jose.ES384, Name: twice}, ErrKeyExists, twice},
		{"unsupported alg", b, backends.CreateRequest{Alg: "HS256", Name: "h"}, jose.ErrUnsupportedAlg, "HS256"},
		{"no alg", b, backends.CreateRequest{Name: "n"}, jose.ErrUnsupportedAlg, ""},
		{"no name", b, backends.CreateRequest{Alg: jose.ES256}, nil, "empty key label"},
		{"URI with id", b, backends.CreateRequest{Alg: jose.ES256, Name: "pkcs11:object=x;id=%01"}, nil, "no id="},
		{"URI without object", b, backends.CreateRequest{Alg: jose.ES256, Name: "pkcs11:token=" + env.main.label}, nil, "give object="},
		{"no token configured", noToken, backends.CreateRequest{Alg: jose.ES256, Name: "k"}, nil, "no token configured"},
		{"token missing", b, backends.CreateRequest{Alg: jose.ES256, Name: "pkcs11:token=nope;object=x?pin-value=" + env.main.pin}, nil, `no token matching token="nope"`},
	}
	for _, tt := range tests {
		uri, err := tt.b.Create(ctx, tt.req)
		if err == nil {
			t.Errorf("%s: Create = %s, want an error", tt.name, uri)
			continue
		}
		if tt.errIs != nil && !errors.Is(err, tt.errIs) {
			t.Errorf("%s: error %v, want errors.Is %v", tt.name, err, tt.errIs)
		}
		if !strings.Contains(err.Error(), tt.has) {
			t.Errorf("%s: error %q does not mention %q", tt.name, err, tt.has)
		}
		noPIN(t, tt.name+" error", err.Error())
	}
	noPIN(t, "log", logs.String())
}
