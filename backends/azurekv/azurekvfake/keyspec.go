package azurekvfake

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"slices"
)

// createParams is the body of CreateKey (azkeys.CreateKeyParameters).
// release_policy and the validity dates are accepted and ignored.
type createParams struct {
	Kty            string             `json:"kty"`
	Crv            string             `json:"crv,omitempty"`
	KeySize        *int               `json:"key_size,omitempty"`
	PublicExponent *int               `json:"public_exponent,omitempty"`
	KeyOps         []string           `json:"key_ops,omitempty"`
	Attributes     *attributesParams  `json:"attributes,omitempty"`
	Tags           map[string]*string `json:"tags,omitempty"`
}

// updateParams is the body of UpdateKey (azkeys.UpdateKeyParameters).
type updateParams struct {
	KeyOps     []string           `json:"key_ops,omitempty"`
	Attributes *attributesParams  `json:"attributes,omitempty"`
	Tags       map[string]*string `json:"tags,omitempty"`
}

type attributesParams struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// keySpec is a validated key type: kty as the client named it (EC-HSM
// stays EC-HSM in the answers, as in a Premium vault), and the curve or
// the modulus size.
type keySpec struct {
	kty  string
	crv  string // EC keys
	bits int    // RSA keys
}

func (k keySpec) isEC() bool { return k.kty == "EC" || k.kty == "EC-HSM" }

// spec validates the key type of a CreateKey request. Key Vault's
// defaults apply: P-256 for EC, 2048 bits for RSA.
func (p *createParams) spec() (keySpec, *apiError) {
	s := keySpec{kty: p.Kty}
	switch p.Kty {
	case "EC", "EC-HSM":
		s.crv = p.Crv
		if s.crv == "" {
			s.crv = "P-256"
		}
		if curveOf(s.crv) == nil {
			if s.crv == "P-256K" {
				return s, badParameter("azurekvfake does not implement the curve P-256K")
			}
			return s, badParameter("The value of the property 'crv' is invalid: %q.", p.Crv)
		}
	case "RSA", "RSA-HSM":
		s.bits = 2048
		if p.KeySize != nil {
			s.bits = *p.KeySize
		}
		if s.bits != 2048 && s.bits != 3072 && s.bits != 4096 {
			return s, badParameter("The value of the property 'key_size' is invalid: %d. RSA keys are 2048, 3072 or 4096 bits.", s.bits)
		}
		if p.PublicExponent != nil && *p.PublicExponent != 65537 {
			return s, badParameter("azurekvfake only makes RSA keys with the public exponent 65537, not %d", *p.PublicExponent)
		}
	case "":
		return s, badParameter("The property 'kty' is required.")
	case "oct", "oct-HSM":
		return s, badParameter("azurekvfake does not implement symmetric keys (%s)", p.Kty)
	default:
		return s, badParameter("The value of the property 'kty' is invalid: %q.", p.Kty)
	}
	return s, nil
}

func curveOf(crv string) elliptic.Curve {
	switch crv {
	case "P-256":
		return elliptic.P256()
	case "P-384":
		return elliptic.P384()
	case "P-521":
		return elliptic.P521()
	}
	return nil
}

// generate makes the private key; it is slow for RSA, so callers run it
// outside any lock.
func (k keySpec) generate() (crypto.Signer, error) {
	if k.isEC() {
		return ecdsa.GenerateKey(curveOf(k.crv), rand.Reader)
	}
	return rsa.GenerateKey(rand.Reader, k.bits)
}

// defaultOps are the key_ops Key Vault gives a key created without any.
func (k keySpec) defaultOps() []string {
	if k.isEC() {
		return []string{"sign", "verify"}
	}
	return []string{"encrypt", "decrypt", "sign", "verify", "wrapKey", "unwrapKey"}
}

// checkOps refuses key operations Key Vault does not know.
func checkOps(ops []string) *apiError {
	known := []string{"encrypt", "decrypt", "sign", "verify", "wrapKey", "unwrapKey", "import", "export"}
	for _, op := range ops {
		if !slices.Contains(known, op) {
			return badParameter("The value of the property 'key_ops' is invalid: %q.", op)
		}
	}
	return nil
}

// tagsOf copies request tags, dropping null values.
func tagsOf(in map[string]*string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}
