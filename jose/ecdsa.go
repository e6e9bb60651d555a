package jose

import (
	"encoding/asn1"

	"errors"
	"fmt"
	"math/big"

	"golang.org/x/crypto/cryptobyte"
	casn1 "golang.org/x/crypto/cryptobyte/asn1"
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
	if out, ok := derToRaw(sig, size); ok {
		return out, nil
	}
	// Anything else, raw r||s included, takes the general path, which
	// also words the refusals.
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

// derToRaw is the common case of ecdsaToRaw without math/big: a minimal DER
// SEQUENCE of two positive INTEGERs, nothing after it, each at most size
// bytes wide. ok is false for anything else, which ecdsaToRaw then reads
// (or refuses) the general way.
func derToRaw(sig []byte, size int) (out []byte, ok bool) {
	in := cryptobyte.String(sig)
	var seq cryptobyte.String
	var r, s []byte
	if !in.ReadASN1(&seq, casn1.SEQUENCE) || !in.Empty() ||
		!seq.ReadASN1Integer(&r) || !seq.ReadASN1Integer(&s) || !seq.Empty() {
		return nil, false
	}
	// ReadASN1Integer refuses negative values and strips the leading
	// zeros; a zero leaves one 0 byte.
	if len(r) > size || len(s) > size || (len(r) == 1 && r[0] == 0) || (len(s) == 1 && s[0] == 0) {
		return nil, false
	}
	out = make([]byte, 2*size)
	copy(out[size-len(r):size], r)
	copy(out[2*size-len(s):], s)
	return out, true
}

// rawToDER appends the DER Ecdsa-Sig-Value of a raw r||s signature (two
// halves of equal width, at most 66 bytes each) to dst: what
// ecdsa.VerifyASN1 reads, written without math/big. A zero half is written
// as INTEGER 0, which verification refuses.
func rawToDER(dst, sig []byte) []byte {
	half := len(sig) / 2
	r, s := derInt(sig[:half]), derInt(sig[half:])
	body := len(r) + len(s)
	dst = append(dst, 0x30)
	if body >= 0x80 {
		dst = append(dst, 0x81) // one length byte follows: body ≤ 2*(2+67)
	}
	dst = append(dst, byte(body))
	return append(append(dst, r...), s...)
}

// derInt returns the DER INTEGER (tag, length, content) of the unsigned
// big-endian n, len(n) ≤ 66: leading zeros dropped, a 0 byte put back in
// front when the top bit is set, so the value reads as positive.
func derInt(n []byte) []byte {
	for len(n) > 1 && n[0] == 0 {
		n = n[1:]
	}
	var buf [2 + 1 + 66]byte
	out := append(buf[:0], 0x02, 0)
	if n[0]&0x80 != 0 {
		out = append(out, 0)
	}
	out = append(out, n...)
	out[1] = byte(len(out) - 2)
	return out
}

// ECDSARawToDER returns the ASN.1 DER form of a raw r||s ECDSA signature
// (JWS form, as Azure Key Vault and Vault's marshaling_algorithm=jws return
// it): what crypto.Signer promises its callers. sig must have two halves of
// equal width, at most 66 bytes each.
func ECDSARawToDER(sig []byte) ([]byte, error) {
	if len(sig) == 0 || len(sig)%2 != 0 || len(sig) > 2*66 {
		return nil, fmt.Errorf("jose: a raw ECDSA signature of %d bytes is not two halves of at most 66 bytes", len(sig))
	}
	return rawToDER(nil, sig), nil
}
