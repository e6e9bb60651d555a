//go:build cgo && !nopkcs11

package pkcs11

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"

	p11 "github.com/miekg/pkcs11"
)

// The DigestInfo prefixes of RFC 8017 §9.2 note 1. CKM_RSA_PKCS signs raw
// bytes, so PKCS#1 v1.5 needs the DigestInfo in front of the digest (hashing
// on the token with CKM_SHA256_RSA_PKCS would need the whole message, which
// crypto.Signer does not get).
var digestInfoPrefix = map[crypto.Hash][]byte{
	crypto.SHA256: {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20},
	crypto.SHA384: {0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02, 0x05, 0x00, 0x04, 0x30},
	crypto.SHA512: {0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00, 0x04, 0x40},
}

// pssHash maps a hash to the CKM_ and CKG_MGF1_ values of
// CK_RSA_PKCS_PSS_PARAMS.
var pssHash = map[crypto.Hash][2]uint{
	crypto.SHA256: {p11.CKM_SHA256, p11.CKG_MGF1_SHA256},
	crypto.SHA384: {p11.CKM_SHA384, p11.CKG_MGF1_SHA384},
	crypto.SHA512: {p11.CKM_SHA512, p11.CKG_MGF1_SHA512},
}

// signOp is one C_SignInit/C_Sign: the mechanism and the bytes to sign.
type signOp struct {
	mech *p11.Mechanism
	data []byte
}

// mechanism turns crypto.Signer arguments into a PKCS#11 operation for a
// key of the given kind, refusing what the token would get wrong silently
// (a digest of the wrong length) or what crypto.Signer means differently
// (rsa.PSSSaltLengthAuto, Ed25519ph).
func mechanism(kind keyKind, allowedMech uint, digest []byte, opts crypto.SignerOpts) (signOp, error) {
	if opts == nil {
		return signOp{}, errors.New("nil SignerOpts")
	}
	h := opts.HashFunc()
	if h != 0 && len(digest) != h.Size() {
		return signOp{}, fmt.Errorf("digest is %d bytes, want %d for %v", len(digest), h.Size(), h)
	}
	switch kind {
	case kindEC:
		return signOp{mech: p11.NewMechanism(p11.CKM_ECDSA, nil), data: digest}, nil

	case kindEd25519:
		if h != 0 {
			return signOp{}, errors.New("Ed25519ph is not supported: sign the message with crypto.Hash(0)")
		}
		if o, ok := opts.(*ed25519.Options); ok && o.Context != "" {
			return signOp{}, errors.New("Ed25519ctx is not supported")
		}
		return signOp{mech: p11.NewMechanism(ckmEdDSA, nil), data: digest}, nil

	case kindRSA:
		if pss, ok := opts.(*rsa.PSSOptions); ok {
			hp, ok := pssHash[h]
			if !ok {
				return signOp{}, fmt.Errorf("RSA-PSS with hash %v is not supported", h)
			}
			var salt uint
			switch {
			case pss.SaltLength == rsa.PSSSaltLengthEqualsHash:
				salt = uint(h.Size())
			case pss.SaltLength > 0:
				salt = uint(pss.SaltLength)
			default:
				// Auto means "as long as fits" to crypto/rsa; RFC 7518 §3.5
				// wants the hash length, and guessing would make signatures
				// that strict verifiers refuse.
				return signOp{}, errors.New("rsa.PSSSaltLengthAuto is not supported: use rsa.PSSSaltLengthEqualsHash")
			}
			return signOp{mech: p11.NewMechanism(p11.CKM_RSA_PKCS_PSS, p11.NewPSSParams(hp[0], hp[1], salt)), data: digest}, nil
		}
		if allowedMech == p11.CKM_RSA_PKCS_PSS {
			return signOp{}, errors.New("this key is restricted to RSA-PSS (PS256); PKCS#1 v1.5 was asked for")
		}
		prefix, ok := digestInfoPrefix[h]
		if !ok {
			return signOp{}, fmt.Errorf("RSA PKCS#1 v1.5 with hash %v is not supported", h)
		}
		data := make([]byte, 0, len(prefix)+len(digest))
		return signOp{mech: p11.NewMechanism(p11.CKM_RSA_PKCS, nil), data: append(append(data, prefix...), digest...)}, nil
	}
	return signOp{}, fmt.Errorf("unknown key kind %d", kind)
}

// ecdsaDER encodes CKM_ECDSA's raw r||s as the ASN.1 DER that crypto.Signer
// promises for ECDSA keys (x509, TLS and jose all expect it).
func ecdsaDER(raw []byte) ([]byte, error) {
	if len(raw) == 0 || len(raw)%2 != 0 {
		return nil, fmt.Errorf("CKM_ECDSA returned %d bytes, want an even r||s", len(raw))
	}
	n := len(raw) / 2
	return asn1.Marshal(struct{ R, S *big.Int }{
		new(big.Int).SetBytes(raw[:n]),
		new(big.Int).SetBytes(raw[n:]),
	})
}
