package azurekvfake

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"strings"
)

// signParams is the body of Sign (azkeys.SignParameters): value is the
// base64url digest, never the message.
type signParams struct {
	Alg   string `json:"alg"`
	Value string `json:"value"`
}

// signResult is Key Vault's KeyOperationResult for Sign.
type signResult struct {
	KID   string `json:"kid"`
	Value string `json:"value"`
}

// sigAlg is a JWA signature algorithm Key Vault offers for asymmetric keys.
type sigAlg struct {
	hash crypto.Hash
	crv  string // ES*: the curve the algorithm is defined on
	pss  bool   // PS*: RSASSA-PSS, else PKCS #1 v1.5 for RSA
}

// sigAlgOf returns the algorithms the fake implements: ES256/384/512 and
// RS/PS 256/384/512. ES256K (P-256K keys) and the HS* algorithms (for
// Managed HSM's oct keys) exist in Key Vault but not here.
func sigAlgOf(alg string) (sigAlg, bool) {
	switch alg {
	case "ES256":
		return sigAlg{hash: crypto.SHA256, crv: "P-256"}, true
	case "ES384":
		return sigAlg{hash: crypto.SHA384, crv: "P-384"}, true
	case "ES512":
		return sigAlg{hash: crypto.SHA512, crv: "P-521"}, true
	case "RS256":
		return sigAlg{hash: crypto.SHA256}, true
	case "RS384":
		return sigAlg{hash: crypto.SHA384}, true
	case "RS512":
		return sigAlg{hash: crypto.SHA512}, true
	case "PS256":
		return sigAlg{hash: crypto.SHA256, pss: true}, true
	case "PS384":
		return sigAlg{hash: crypto.SHA384, pss: true}, true
	case "PS512":
		return sigAlg{hash: crypto.SHA512, pss: true}, true
	}
	return sigAlg{}, false
}

// decodeB64URL takes base64url with or without padding; the SDK sends it
// without.
func decodeB64URL(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// sign signs digest with v under alg, answering as Key Vault does: a
// digest of the wrong length, or an algorithm that does not fit the key,
// is BadParameter. ECDSA signatures are raw r ‖ s, each as wide as the
// curve's order (JWS form), not ASN.1.
func sign(v *version, name string, digest []byte) ([]byte, *apiError) {
	alg, ok := sigAlgOf(name)
	if !ok {
		return nil, badParameter("The value of the property 'alg' is invalid or not supported: %q.", name)
	}
	if v.spec.isEC() != (alg.crv != "") || alg.crv != "" && alg.crv != v.spec.crv {
		what := "an RSA key"
		if v.spec.isEC() {
			what = "an EC key on " + v.spec.crv
		}
		return nil, badParameter("The algorithm %s cannot be used with %s.", name, what)
	}
	if len(digest) != alg.hash.Size() {
		return nil, badParameter("Invalid length of digest for %s: %d bytes, want %d.", name, len(digest), alg.hash.Size())
	}
	switch priv := v.signer.(type) {
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, priv, digest)
		if err != nil {
			return nil, internal("sign: " + err.Error())
		}
		size := (priv.Curve.Params().N.BitLen() + 7) / 8
		sig := make([]byte, 2*size)
		r.FillBytes(sig[:size])
		s.FillBytes(sig[size:])
		return sig, nil
	case *rsa.PrivateKey:
		var sig []byte
		var err error
		if alg.pss {
			sig, err = rsa.SignPSS(rand.Reader, priv, alg.hash, digest, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		} else {
			sig, err = rsa.SignPKCS1v15(rand.Reader, priv, alg.hash, digest)
		}
		if err != nil {
			return nil, internal("sign: " + err.Error())
		}
		return sig, nil
	}
	return nil, internal("unexpected key type")
}
