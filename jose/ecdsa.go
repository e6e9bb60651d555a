package jose

import (
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
)

// ecSize returns the byte width of r and of s for an ES* alg (RFC 7518
// §3.4): the curve order's size, rounded up to whole bytes. 0 for other algs.
func (a Alg) ecSize() int {
	switch a {
	case ES256:
		return 32
	case ES384:
		return 48
	case ES512:
		return 66
	}
	return 0
}

// ecdsaDER is the ASN.1 structure crypto.Signer implementations return for
// ECDSA (RFC 3279 Ecdsa-Sig-Value).
type ecdsaDER struct {
	R, S *big.Int
}

// ecdsaToRaw turns a signer's ECDSA output into JWS form: r||s, each
// left-padded to size bytes. Go's keys, PKCS#11 wrappers and cloud KMS return
// DER; some HSM wrappers already return raw r||s, so a non-DER value of
// exactly 2*size bytes is taken as raw. Either way Sign verifies the result,
// so a misread format cannot produce a bad signature that escapes.
func ecdsaToRaw(sig []byte, size int) ([]byte, error) {
	var v ecdsaDER
	rest, err := asn1.Unmarshal(sig, &v)
	if err != nil || len(rest) != 0 {
		if len(sig) == 2*size {
			out := make([]byte, len(sig))
			copy(out, sig)
			return out, nil
		}
		if err == nil {
			err = errors.New("trailing data after the DER signature")
		}
		return nil, fmt.Errorf("jose: ECDSA signature is neither DER nor %d-byte raw r||s (%d bytes): %w", 2*size, len(sig), err)
	}
	if v.R == nil || v.S == nil || v.R.Sign() <= 0 || v.S.Sign() <= 0 {
		return nil, errors.New("jose: ECDSA signature has a non-positive r or s")
	}
	if (v.R.BitLen()+7)/8 > size || (v.S.BitLen()+7)/8 > size {
		return nil, fmt.Errorf("jose: ECDSA signature r or s is wider than %d bytes", size)
	}
	out := make([]byte, 2*size)
	v.R.FillBytes(out[:size])
	v.S.FillBytes(out[size:])
	return out, nil
}
