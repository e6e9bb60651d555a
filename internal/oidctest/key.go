package oidctest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
)

// Key is a signing key of the issuer, published in its JWKS or not.
type Key struct {
	KID    string
	Alg    string // "RS256" or "ES256"
	Signer crypto.Signer
}

// NewKey generates an RS256 (RSA 2048) or ES256 (P-256) key with a fresh
// kid. The key is not published: sign with it (WithKey) to get a token whose
// kid the issuer's JWKS does not hold, or Publish it.
func (is *Issuer) NewKey(alg string) *Key {
	is.t.Helper()
	var (
		signer crypto.Signer
		err    error
	)
	switch alg {
	case "RS256":
		signer, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		signer, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		is.t.Fatalf("oidctest: NewKey: unsupported algorithm %q (RS256 or ES256)", alg)
	}
	if err != nil {
		is.t.Fatalf("oidctest: generating %s key: %v", alg, err)
	}
	is.mu.Lock()
	is.nextKID++
	kid := fmt.Sprintf("key-%d-%s", is.nextKID, alg)
	is.mu.Unlock()
	return &Key{KID: kid, Alg: alg, Signer: signer}
}

// PublicPEM returns the public key as a PKIX PEM block: the bytes an
// attacker feeds to HS256 as the HMAC secret in the algorithm-confusion
// attack.
func (k *Key) PublicPEM() []byte {
	der, err := x509.MarshalPKIXPublicKey(k.Signer.Public())
	if err != nil {
		panic(err) // RSA and ECDSA public keys always marshal
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// jwk is the public key as a JWK (RFC 7517/7518).
func (k *Key) jwk() map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	m := map[string]any{"kid": k.KID, "alg": k.Alg, "use": "sig"}
	switch pub := k.Signer.Public().(type) {
	case *rsa.PublicKey:
		m["kty"] = "RSA"
		m["n"] = b64(pub.N.Bytes())
		m["e"] = b64(big.NewInt(int64(pub.E)).Bytes())
	case *ecdsa.PublicKey:
		ecdh, err := pub.ECDH()
		if err != nil {
			panic(err)
		}
		raw := ecdh.Bytes() // 0x04 || X || Y
		size := (len(raw) - 1) / 2
		m["kty"] = "EC"
		m["crv"] = "P-256"
		m["x"] = b64(raw[1 : 1+size])
		m["y"] = b64(raw[1+size:])
	}
	return m
}

// sign signs the JWS signing input the way alg k.Alg demands: RSASSA-PKCS1-v1_5
// with SHA-256, or ECDSA P-256 with SHA-256 as the fixed-width r||s of RFC 7518
// §3.4 (not ASN.1).
func (k *Key) sign(input []byte) ([]byte, error) {
	h := sha256.Sum256(input)
	switch key := k.Signer.(type) {
	case *rsa.PrivateKey:
		return rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, h[:])
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, key, h[:])
		if err != nil {
			return nil, err
		}
		out := make([]byte, 64)
		r.FillBytes(out[:32])
		s.FillBytes(out[32:])
		return out, nil
	}
	return nil, fmt.Errorf("oidctest: unsupported key type %T", k.Signer)
}
