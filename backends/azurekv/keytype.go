//go:build !noazurekv

package azurekv

import (
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"

	"github.com/cardsign/cardsign/jose"
)

// signAlg is the Key Vault signature algorithm of a JOSE alg: the same
// names, as Key Vault speaks JWA.
func signAlg(alg jose.Alg) (azkeys.SignatureAlgorithm, error) {
	switch alg {
	case jose.ES256, jose.ES384, jose.ES512, jose.RS256, jose.PS256:
		return azkeys.SignatureAlgorithm(alg), nil
	}
	return "", fmt.Errorf("azurekv: Key Vault has no %s signatures", alg)
}

// keyAlg settles the JOSE alg of a key of kty and crv, given the URI's
// ?alg= (want, "" for the default).
func keyAlg(kty azkeys.KeyType, crv azkeys.CurveName, want jose.Alg) (jose.Alg, error) {
	var def jose.Alg
	switch kty {
	case azkeys.KeyTypeEC, azkeys.KeyTypeECHSM:
		switch crv {
		case azkeys.CurveNameP256:
			def = jose.ES256
		case azkeys.CurveNameP384:
			def = jose.ES384
		case azkeys.CurveNameP521:
			def = jose.ES512
		default:
			return "", fmt.Errorf("curve %s has no JOSE alg cardsign signs with (P-256, P-384, P-521)", crv)
		}
	case azkeys.KeyTypeRSA, azkeys.KeyTypeRSAHSM:
		def = jose.RS256
		if want == jose.PS256 {
			return jose.PS256, nil
		}
	default:
		return "", fmt.Errorf("key type %s does not sign (EC, EC-HSM, RSA, RSA-HSM do)", kty)
	}
	if want != "" && want != def {
		return "", fmt.Errorf("a %s %s key signs %s, not %s", kty, crv, def, want)
	}
	return def, nil
}

// createParams are the CreateKey parameters for alg.
func (b *Backend) createParams(alg jose.Alg) (azkeys.CreateKeyParameters, error) {
	sign := azkeys.KeyOperationSign
	verify := azkeys.KeyOperationVerify
	enabled := true
	p := azkeys.CreateKeyParameters{
		KeyOps:        []*azkeys.KeyOperation{&sign, &verify},
		KeyAttributes: &azkeys.KeyAttributes{Enabled: &enabled},
	}
	ec, rsa := azkeys.KeyTypeEC, azkeys.KeyTypeRSA
	if b.cfg.HSM {
		ec, rsa = azkeys.KeyTypeECHSM, azkeys.KeyTypeRSAHSM
	}
	var crv azkeys.CurveName
	switch alg {
	case jose.ES256:
		crv = azkeys.CurveNameP256
	case jose.ES384:
		crv = azkeys.CurveNameP384
	case jose.ES512:
		crv = azkeys.CurveNameP521
	case jose.RS256, jose.PS256:
		bits := int32(b.cfg.RSABits)
		p.Kty, p.KeySize = &rsa, &bits
		return p, nil
	default:
		return p, fmt.Errorf("azurekv: Key Vault keys cannot sign %s (ES256, ES384, ES512, RS256, PS256 can)", alg)
	}
	p.Kty, p.Curve = &ec, &crv
	return p, nil
}
