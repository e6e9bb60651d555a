//go:build !noawskms

package awskms

import (
	"crypto"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// MaxRawMessage is the largest message AWS KMS signs with MessageType RAW.
// Ed25519 (ED25519_SHA_512) only works with RAW messages, so this caps the
// signing input of EdDSA cards.
const MaxRawMessage = 4096

// DefaultRSAKeySpec is the KeySpec Create uses for RS256 and PS256 when
// Config.KeySpec does not say: 3072 bits, as the file and pkcs11 backends,
// NIST SP 800-57's size for use beyond 2030.
const DefaultRSAKeySpec = "RSA_3072"

// scheme is how one JOSE alg signs with one kind of KMS key.
type scheme struct {
	alg     jose.Alg
	signing types.SigningAlgorithmSpec
	msgType types.MessageType
	hash    crypto.Hash // what the digest is; 0 for EdDSA, which sends the message
}

// schemesFor returns the schemes a KeySpec can sign with, the default
// (what a URI without ?alg= gets) first; nil for KeySpecs cardsign does not
// support.
func schemesFor(spec types.KeySpec) []scheme {
	switch spec {
	case types.KeySpecEccNistP256:
		return []scheme{{jose.ES256, types.SigningAlgorithmSpecEcdsaSha256, types.MessageTypeDigest, crypto.SHA256}}
	case types.KeySpecEccNistP384:
		return []scheme{{jose.ES384, types.SigningAlgorithmSpecEcdsaSha384, types.MessageTypeDigest, crypto.SHA384}}
	case types.KeySpecEccNistP521:
		return []scheme{{jose.ES512, types.SigningAlgorithmSpecEcdsaSha512, types.MessageTypeDigest, crypto.SHA512}}
	case types.KeySpecRsa2048, types.KeySpecRsa3072, types.KeySpecRsa4096:
		// RS256 by default: every A2A SDK verifies it; PS256 on request.
		return []scheme{
			{jose.RS256, types.SigningAlgorithmSpecRsassaPkcs1V15Sha256, types.MessageTypeDigest, crypto.SHA256},
			{jose.PS256, types.SigningAlgorithmSpecRsassaPssSha256, types.MessageTypeDigest, crypto.SHA256},
		}
	case types.KeySpecEccNistEdwards25519:
		// RFC 8037 EdDSA is pure Ed25519 over the whole message, which KMS
		// only takes as RAW; ED25519_PH_SHA_512 is HashEdDSA, which JOSE
		// verifiers do not accept.
		return []scheme{{jose.EdDSA, types.SigningAlgorithmSpecEd25519Sha512, types.MessageTypeRaw, 0}}
	}
	return nil
}

// supportedKeySpecs lists the KeySpecs cardsign signs with, for messages.
func supportedKeySpecs() []types.KeySpec {
	return []types.KeySpec{
		types.KeySpecEccNistP256, types.KeySpecEccNistP384, types.KeySpecEccNistP521,
		types.KeySpecRsa2048, types.KeySpecRsa3072, types.KeySpecRsa4096,
		types.KeySpecEccNistEdwards25519,
	}
}

// keySpecsFor lists the KeySpecs that can sign alg, for messages.
func keySpecsFor(alg jose.Alg) string {
	var out []string
	for _, spec := range supportedKeySpecs() {
		if _, ok := schemeFor(spec, alg); ok {
			out = append(out, string(spec))
		}
	}
	return backends.JoinOrNone(out)
}

// schemeFor returns how spec signs alg; alg "" picks the KeySpec's default.
func schemeFor(spec types.KeySpec, alg jose.Alg) (scheme, bool) {
	ss := schemesFor(spec)
	if len(ss) == 0 {
		return scheme{}, false
	}
	if alg == "" {
		return ss[0], true
	}
	i := slices.IndexFunc(ss, func(s scheme) bool { return s.alg == alg })
	if i < 0 {
		return scheme{}, false
	}
	return ss[i], true
}

// keyScheme settles how the key described by KMS signs: its KeySpec and
// SigningAlgorithms, and the ?alg= of its URI (want, "" for the default).
func keyScheme(key string, spec types.KeySpec, offered []types.SigningAlgorithmSpec, want jose.Alg) (scheme, error) {
	if schemesFor(spec) == nil {
		return scheme{}, &UnsupportedKeyError{Key: key, Reason: fmt.Sprintf("KeySpec %s cannot sign any JOSE alg cardsign supports (supported: %s)",
			spec, joinSpecs(supportedKeySpecs()))}
	}
	s, ok := schemeFor(spec, want)
	if !ok {
		return scheme{}, &AlgMismatchError{Key: key, KeySpec: string(spec), Alg: want}
	}
	if !slices.Contains(offered, s.signing) {
		return scheme{}, &UnsupportedKeyError{Key: key, Reason: fmt.Sprintf("KeySpec %s does not offer signing algorithm %s for %s (offered: %v)",
			spec, s.signing, s.alg, offered)}
	}
	return s, nil
}

// createKeySpec returns the KeySpec Create makes for alg, given the
// configured KeySpec (may be "").
func createKeySpec(alg jose.Alg, configured types.KeySpec) (types.KeySpec, error) {
	if configured != "" {
		if _, ok := schemeFor(configured, alg); !ok {
			return "", &AlgMismatchError{KeySpec: string(configured), Alg: alg}
		}
		return configured, nil
	}
	switch alg {
	case jose.ES256:
		return types.KeySpecEccNistP256, nil
	case jose.ES384:
		return types.KeySpecEccNistP384, nil
	case jose.ES512:
		return types.KeySpecEccNistP521, nil
	case jose.RS256, jose.PS256:
		return DefaultRSAKeySpec, nil
	case jose.EdDSA:
		return types.KeySpecEccNistEdwards25519, nil
	}
	return "", fmt.Errorf("awskms: create: %w %q", jose.ErrUnsupportedAlg, alg)
}

func joinSpecs(specs []types.KeySpec) string {
	s := make([]string, len(specs))
	for i, spec := range specs {
		s[i] = string(spec)
	}
	return strings.Join(s, ", ")
}
