package vaultfake

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"encoding/asn1"
	"encoding/base64"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"strings"
)

// signRequest is a sign/NAME request, read as Vault's pathSignWrite reads
// it.
type signRequest struct {
	version    int
	hash       crypto.Hash
	hashName   string
	prehashed  bool
	sigAlg     string // RSA: "pss" (Vault's default, also for "") or "pkcs1v15"
	saltLength int    // rsa.PSSSaltLengthAuto, rsa.PSSSaltLengthEqualsHash, or bytes
	jws        bool   // marshaling_algorithm=jws
	input      []byte
}

// sign answers sign/NAME[/HASH]: the input signed with the version asked
// for (0: the latest), as "vault:vN:BASE64".
func (s *engine) sign(c *call, name, urlHash string) reply {
	req, err := readSignRequest(c.f, urlHash)
	if err != nil {
		return replyFor(err)
	}
	kt, v, ver, err := s.keys.signingVersion(name, req.version)
	if err != nil {
		return replyFor(err)
	}
	sig, err := signWith(kt, v.signer, req)
	if err != nil {
		return replyFor(err)
	}
	enc := base64.StdEncoding
	if req.jws {
		enc = base64.RawURLEncoding
	}
	return reply{data: map[string]any{
		"signature":   "vault:v" + strconv.Itoa(ver) + ":" + enc.EncodeToString(sig),
		"key_version": ver,
	}}
}

func readSignRequest(f fields, urlHash string) (signRequest, error) {
	var req signRequest
	var err error
	// The hash in the path wins over hash_algorithm, which wins over the
	// deprecated algorithm.
	req.hashName = urlHash
	for _, field := range []string{"hash_algorithm", "algorithm"} {
		if req.hashName != "" {
			break
		}
		if req.hashName, _, err = f.str(field); err != nil {
			return req, err
		}
	}
	if req.hashName == "" {
		req.hashName = "sha2-256"
	}
	var ok bool
	if req.hash, ok = hashOf(req.hashName); !ok {
		return req, userError("invalid hash algorithm %q", req.hashName)
	}
	marshaling, _, err := f.str("marshaling_algorithm")
	if err != nil {
		return req, err
	}
	switch marshaling {
	case "", "asn1":
	case "jws":
		req.jws = true
	default:
		return req, userError("invalid marshaling type %q", marshaling)
	}
	if req.prehashed, _, err = f.boolean("prehashed"); err != nil {
		return req, err
	}
	if req.sigAlg, _, err = f.str("signature_algorithm"); err != nil {
		return req, err
	}
	if req.saltLength, err = saltLength(f); err != nil {
		return req, err
	}
	if req.version, _, err = f.integer("key_version"); err != nil {
		return req, err
	}
	if req.hash == 0 && (!req.prehashed || req.sigAlg != "pkcs1v15") {
		return req, userError("hash_algorithm=none requires both prehashed=true and signature_algorithm=pkcs1v15")
	}
	in, _, err := f.str("input")
	if err != nil {
		return req, err
	}
	if req.input, err = base64.StdEncoding.DecodeString(in); err != nil {
		return req, userError("unable to decode input as base64: %s", err)
	}
	return req, nil
}

// saltLength reads salt_length as Vault does: "auto" (the default) is
// rsa.PSSSaltLengthAuto, which signs with the longest salt the key allows;
// "hash" is rsa.PSSSaltLengthEqualsHash; a number is that many bytes.
func saltLength(f fields) (int, error) {
	s, _, err := f.str("salt_length")
	if err != nil {
		return 0, err
	}
	switch s = strings.ToLower(s); s {
	case "", "auto":
		return rsa.PSSSaltLengthAuto, nil
	case "hash":
		return rsa.PSSSaltLengthEqualsHash, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, userError("salt length neither 'auto', 'hash', nor an int: %s", s)
	}
	if n < rsa.PSSSaltLengthEqualsHash {
		return 0, userError("salt length is invalid: %d", n)
	}
	return n, nil
}

// signWith signs req.input with key: Ed25519 signs the message itself;
// ECDSA and RSA sign its hash, or the input as the hash when prehashed.
func signWith(kt keyType, key crypto.Signer, req signRequest) ([]byte, error) {
	if kt.kind == kindEd25519 {
		if req.prehashed {
			// Vault would sign the digest as if it were the message; a
			// client sending one has a bug that this makes visible.
			return nil, userError("vaultfake: prehashed input is not supported for ed25519 keys, which sign the message itself")
		}
		return key.Sign(rand.Reader, req.input, crypto.Hash(0))
	}
	digest := req.input
	switch {
	case req.hash == 0:
	case !req.prehashed:
		h := req.hash.New()
		h.Write(req.input)
		digest = h.Sum(nil)
	case len(digest) != req.hash.Size():
		// Vault lets ECDSA sign it and fails RSA with a 500; either way the
		// client sent the wrong digest.
		return nil, userError("vaultfake: prehashed input is %d bytes, but a %s digest is %d", len(digest), req.hashName, req.hash.Size())
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		return signECDSA(k, digest, req.jws)
	case *rsa.PrivateKey:
		return signRSA(k, digest, req)
	}
	return nil, fmt.Errorf("vaultfake: cannot sign with %T", key)
}

func signECDSA(k *ecdsa.PrivateKey, digest []byte, jws bool) ([]byte, error) {
	der, err := ecdsa.SignASN1(rand.Reader, k, digest)
	if err != nil || !jws {
		return der, err
	}
	// JWS wants r||s, each as long as the curve's order.
	var rs struct{ R, S *big.Int }
	if _, err := asn1.Unmarshal(der, &rs); err != nil {
		return nil, fmt.Errorf("vaultfake: ECDSA signature: %w", err)
	}
	size := (k.Curve.Params().BitSize + 7) / 8
	sig := make([]byte, 2*size)
	rs.R.FillBytes(sig[:size])
	rs.S.FillBytes(sig[size:])
	return sig, nil
}

func signRSA(k *rsa.PrivateKey, digest []byte, req signRequest) ([]byte, error) {
	switch req.sigAlg {
	case "", "pss":
		// Vault's bounds: from "hash" (-1) up to the longest salt the key
		// leaves room for.
		maxSalt := (k.N.BitLen()-1+7)/8 - 2 - req.hash.Size()
		if req.saltLength < rsa.PSSSaltLengthEqualsHash || req.saltLength > maxSalt {
			return nil, userError("requested salt length %d is invalid", req.saltLength)
		}
		return rsa.SignPSS(rand.Reader, k, req.hash, digest, &rsa.PSSOptions{SaltLength: req.saltLength})
	case "pkcs1v15":
		return rsa.SignPKCS1v15(rand.Reader, k, req.hash, digest)
	}
	// An internal error in Vault, so a 500.
	return nil, &vaultError{errorReply(http.StatusInternalServerError, "unsupported rsa signature algorithm "+req.sigAlg)}
}
