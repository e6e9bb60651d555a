// Package backendtest is the contract every key backend passes: the same
// tests run against files, PKCS#11 tokens (SoftHSM2, a TPM), Cloud KMS,
// AWS KMS, Azure Key Vault and Vault Transit, each backend's own test
// driving it against a real module or a fake that speaks the provider's
// wire protocol through the provider's own client library.
//
// A backend's test calls Run with an Env: the backend, how to make a key
// of each alg at the provider, a URI of a key that is not there, and
// optional upgrades (disabling a key at the provider). Run checks, for
// every alg: that the opened key signs what jose.Verify accepts with its
// public key and its JWK; that crypto.Signer's contract holds (ECDSA in
// DER); that a digest of the wrong length and nil options are refused; that concurrent signatures are
// all valid; and, where the backend can, creation, disabling, a missing
// key and a closed context, with errors that match the backends
// sentinels and carry none of the Env's secrets.
package backendtest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// Env is a backend under test.
type Env struct {
	Backend backends.Backend
	// Algs are the algs the backend signs with keys MakeKey makes.
	Algs []jose.Alg
	// MakeKey makes a key of alg at the provider and returns its URI: with
	// the fake's own tools where there is a fake, with the backend's Create
	// on a token.
	MakeKey func(t *testing.T, alg jose.Alg) string
	// Missing is a well-formed URI of a key the provider does not have;
	// "" when the backend cannot tell (none so far).
	Missing string
	// DisableAtProvider, if set, disables the key of uri at the provider
	// behind the backend's back; signing must then fail with
	// backends.ErrKeyDisabled.
	DisableAtProvider func(t *testing.T, uri string)
	// CreateAlgs are the algs to test Create with, when the backend is a
	// backends.Creator; nil means Algs.
	CreateAlgs []jose.Alg
	// CreateName names the i-th key Create makes (a file path for the file
	// backend); nil means a unique label.
	CreateName func(i int) string
	// Secrets (credentials, PINs, tokens) must appear in no error.
	Secrets []string
}

// Run runs the contract against e.
func Run(t *testing.T, e Env) {
	t.Helper()
	if e.Backend == nil || e.MakeKey == nil || len(e.Algs) == 0 {
		t.Fatal("backendtest: Env needs a Backend, MakeKey and Algs")
	}
	for _, alg := range e.Algs {
		t.Run("sign/"+string(alg), func(t *testing.T) {
			uri := e.MakeKey(t, alg)
			key := e.open(t, uri, alg)
			signVerify(t, key)
			signerContract(t, key)
			wrongOptions(t, e, key)
		})
	}
	t.Run("concurrent", func(t *testing.T) {
		key := e.open(t, e.MakeKey(t, e.Algs[0]), e.Algs[0])
		concurrent(t, key, 8, 4)
	})
	t.Run("cancelled", func(t *testing.T) {
		key := e.open(t, e.MakeKey(t, e.Algs[0]), e.Algs[0])
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		cs, ok := key.Signer.(jose.ContextSigner)
		if !ok {
			return // no I/O to cancel (a key in memory)
		}
		h := key.Alg.Hash()
		msg := []byte("cancelled.input")
		if h != 0 {
			d := h.New()
			d.Write(msg)
			msg = d.Sum(nil)
		}
		start := time.Now()
		_, err := cs.SignContext(ctx, rand.Reader, msg, signerOpts(key.Alg))
		if err == nil {
			t.Fatal("a signature with a cancelled context succeeded")
		}
		if errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("a cancelled signature reported the provider unavailable: %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("a cancelled signature took %v to fail", d)
		}
		e.noSecrets(t, err)
	})
	if e.Missing != "" {
		t.Run("missing", func(t *testing.T) {
			_, err := backends.OpenWith(t.Context(), e.Backend, e.Missing, backends.OpenOptions{})
			if !errors.Is(err, backends.ErrKeyNotFound) {
				t.Fatalf("opening a missing key: %v, want an error matching backends.ErrKeyNotFound", err)
			}
			e.noSecrets(t, err)
		})
	}
	t.Run("bad URI", func(t *testing.T) {
		scheme, _ := backends.Scheme(e.MakeKey(t, e.Algs[0]))
		_, err := e.Backend.Open(t.Context(), scheme+"://%zz/\x00?alg=nope")
		var ue *backends.URIError
		if !errors.As(err, &ue) {
			t.Fatalf("a malformed %s URI: %v, want a *backends.URIError", scheme, err)
		}
	})
	if c, ok := e.Backend.(backends.Creator); ok {
		algs := e.CreateAlgs
		if algs == nil {
			algs = e.Algs
		}
		for _, alg := range algs {
			t.Run("create/"+string(alg), func(t *testing.T) { e.create(t, c, alg) })
		}
	}
	if d, ok := e.Backend.(backends.Disabler); ok {
		t.Run("disable", func(t *testing.T) {
			uri := e.MakeKey(t, e.Algs[0])
			key := e.open(t, uri, e.Algs[0])
			if err := d.Disable(t.Context(), uri); err != nil {
				t.Fatalf("Disable: %v", err)
			}
			if err := d.Disable(t.Context(), uri); err != nil {
				t.Fatalf("Disable again: %v (disabling a disabled key must succeed)", err)
			}
			e.refused(t, key)
		})
	}
	if e.DisableAtProvider != nil {
		t.Run("disabled at the provider", func(t *testing.T) {
			uri := e.MakeKey(t, e.Algs[0])
			key := e.open(t, uri, e.Algs[0])
			e.DisableAtProvider(t, uri)
			e.refused(t, key)
			_, err := backends.OpenWith(t.Context(), e.Backend, uri, backends.OpenOptions{})
			if !errors.Is(err, backends.ErrKeyDisabled) {
				t.Fatalf("opening a disabled key: %v, want an error matching backends.ErrKeyDisabled", err)
			}
		})
	}
}

// Key is an opened key.
type Key struct {
	URI string
	backends.Handle
	Alg jose.Alg
}

func (e Env) open(t *testing.T, uri string, alg jose.Alg) Key {
	t.Helper()
	k, err := backends.OpenWith(t.Context(), e.Backend, uri, backends.OpenOptions{})
	if err != nil {
		t.Fatalf("open %s: %v", backends.Redact(uri), err)
	}
	if k.Alg != alg {
		t.Fatalf("open %s: alg %s, want %s", backends.Redact(uri), k.Alg, alg)
	}
	return Key{URI: uri, Handle: backends.Handle{Signer: k.Signer, KID: k.KID}, Alg: k.Alg}
}

// signVerify signs through jose.Sign and checks the signature with the
// signer's public key and with the key rebuilt from its JWK.
func signVerify(t *testing.T, k Key) {
	t.Helper()
	input := []byte("eyJhbGciOiJ" + string(k.Alg) + "In0.eyJuYW1lIjoiY29udHJhY3QifQ")
	sig, err := jose.Sign(t.Context(), k.Signer, k.Alg, input)
	if err != nil {
		t.Fatalf("jose.Sign %s: %v", k.Alg, err)
	}
	if err := jose.Verify(k.Alg, k.Signer.Public(), input, sig); err != nil {
		t.Fatalf("jose.Verify with the signer's public key: %v", err)
	}
	jwk, err := jose.NewJWK(k.Signer.Public(), "", k.Alg)
	if err != nil {
		t.Fatalf("jose.NewJWK: %v", err)
	}
	pub, err := jwk.PublicKey()
	if err != nil {
		t.Fatalf("JWK.PublicKey: %v", err)
	}
	if err := jose.Verify(k.Alg, pub, input, sig); err != nil {
		t.Fatalf("jose.Verify with the JWK: %v", err)
	}
	if err := jose.Verify(k.Alg, pub, append(input, '.'), sig); err == nil {
		t.Fatal("the signature verifies over other input")
	}
}

// signerContract calls crypto.Signer.Sign directly, as code other than
// jose would: ECDSA signatures must be ASN.1 DER.
func signerContract(t *testing.T, k Key) {
	t.Helper()
	pub, ok := k.Signer.Public().(*ecdsa.PublicKey)
	if !ok {
		return
	}
	h := k.Alg.Hash()
	d := h.New()
	d.Write([]byte("crypto.Signer contract"))
	digest := d.Sum(nil)
	sig, err := k.Signer.Sign(rand.Reader, digest, h)
	if err != nil {
		t.Fatalf("crypto.Signer.Sign: %v", err)
	}
	if !ecdsa.VerifyASN1(pub, digest, sig) {
		t.Fatalf("crypto.Signer.Sign returned %d bytes that are not a DER ECDSA signature of the digest", len(sig))
	}
}

// wrongOptions checks that a digest whose length is not its hash's, and
// nil options, are refused, not signed: a provider given the wrong bytes
// would sign them silently.
func wrongOptions(t *testing.T, e Env, k Key) {
	t.Helper()
	if k.Alg == jose.EdDSA {
		return
	}
	digest := sha256.Sum224([]byte("x"))
	if _, err := k.Signer.Sign(rand.Reader, digest[:], k.Alg.Hash()); err == nil {
		t.Fatalf("a %s key signed a 28-byte digest as %v", k.Alg, k.Alg.Hash())
	} else {
		e.noSecrets(t, err)
	}
	if _, err := k.Signer.Sign(rand.Reader, digest[:], nil); err == nil {
		t.Fatalf("a %s key signed with nil options", k.Alg)
	}
}

// concurrent signs from n goroutines, each m times, and verifies all.
func concurrent(t *testing.T, k Key, n, m int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n*m)
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range m {
				input := fmt.Appendf(nil, "eyJ9.%d-%d", g, i)
				sig, err := jose.Sign(t.Context(), k.Signer, k.Alg, input)
				if err == nil {
					err = jose.Verify(k.Alg, k.Signer.Public(), input, sig)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent signature: %v", err)
	}
}

// create makes two keys through the backend and checks they open, sign,
// and are distinct.
func (e Env) create(t *testing.T, c backends.Creator, alg jose.Alg) {
	t.Helper()
	var pubs []crypto.PublicKey
	var uris []string
	for i := range 2 {
		name := fmt.Sprintf("contract-%s-%d-%d", strings.ToLower(string(alg)), time.Now().UnixNano(), i)
		if e.CreateName != nil {
			name = e.CreateName(i)
		}
		uri, err := c.Create(t.Context(), backends.CreateRequest{Alg: alg, Name: name})
		if err != nil {
			t.Fatalf("Create %s: %v", alg, err)
		}
		k := e.open(t, uri, alg)
		signVerify(t, k)
		pubs = append(pubs, k.Signer.Public())
		uris = append(uris, uri)
	}
	if uris[0] == uris[1] {
		t.Fatalf("two Creates returned the same URI %s", backends.Redact(uris[0]))
	}
	if pubs[0].(interface{ Equal(crypto.PublicKey) bool }).Equal(pubs[1]) {
		t.Fatal("two Creates made the same key")
	}
}

// refused checks that a disabled key no longer signs, with an error that
// matches backends.ErrKeyDisabled.
func (e Env) refused(t *testing.T, k Key) {
	t.Helper()
	_, err := jose.Sign(t.Context(), k.Signer, k.Alg, []byte("eyJ9.disabled"))
	if !errors.Is(err, backends.ErrKeyDisabled) {
		t.Fatalf("signing with a disabled key: %v, want an error matching backends.ErrKeyDisabled", err)
	}
	e.noSecrets(t, err)
}

func (e Env) noSecrets(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range e.Secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("an error contains a secret: %v", err)
		}
	}
}

// signerOpts are the crypto.SignerOpts a JWS of alg signs with.
func signerOpts(alg jose.Alg) crypto.SignerOpts {
	if alg == jose.PS256 {
		return &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA256}
	}
	return alg.Hash()
}
