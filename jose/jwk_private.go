package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"math/big"

	"github.com/cardsign/cardsign/strictjson"
)

// ParsePrivateJWK parses a private JWK (EC or OKP Ed25519 with "d", RSA with
// "d", "p", "q" and optionally "dp", "dq", "qi") into a signer, and returns
// the matching public JWK with the "kid", "alg" and "use" members of the
// input carried over ("" when absent). The private part must match the
// public members, so a key file edited by hand cannot sign with one key
// while advertising another.
//
// Errors name the offending member, never its value.
func ParsePrivateJWK(data []byte) (crypto.Signer, JWK, error) {
	m, err := ParseObject(data)
	if err != nil {
		return nil, JWK{}, fmt.Errorf("jose: private jwk: %w", err)
	}
	pubJWK, err := jwkFromMembers(m)
	if err != nil {
		return nil, JWK{}, err
	}
	pub, err := pubJWK.PublicKey()
	if err != nil {
		return nil, JWK{}, err
	}
	if !m.Has("d") {
		return nil, JWK{}, errors.New(`jose: private jwk: missing member "d": this is a public key, a private key is needed`)
	}
	var signer crypto.Signer
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		signer, err = ecPrivate(m, p, pubJWK.Crv)
	case ed25519.PublicKey:
		signer, err = ed25519Private(m, p)
	case *rsa.PublicKey:
		signer, err = rsaPrivate(m, p)
	default:
		err = fmt.Errorf("jose: private jwk: unsupported key type %T", pub)
	}
	if err != nil {
		return nil, JWK{}, err
	}
	out, err := publicJWK(pub)
	if err != nil {
		return nil, JWK{}, err
	}
	out.Kid, out.Alg, out.Use = pubJWK.Kid, pubJWK.Alg, pubJWK.Use
	return signer, out, nil
}

// privateMember decodes a base64url private member. Its errors never quote
// the value.
func privateMember(m strictjson.Value, name string, size int) ([]byte, error) {
	v, err := stringMember(m, name)
	if err != nil {
		return nil, fmt.Errorf("jose: private jwk: %w", err)
	}
	return b64Member(name, v, size)
}

func ecPrivate(m strictjson.Value, pub *ecdsa.PublicKey, crv string) (*ecdsa.PrivateKey, error) {
	curve, alg, err := curveByName(crv)
	if err != nil {
		return nil, err
	}
	// RFC 7518 §6.2.2.1: "d" is the full width of the curve order.
	d, err := privateMember(m, "d", alg.ecSize())
	if err != nil {
		return nil, err
	}
	defer clear(d)
	priv, err := ecdsa.ParseRawPrivateKey(curve, d)
	if err != nil {
		return nil, fmt.Errorf("jose: private jwk member \"d\": not a valid %s scalar: %w", crv, err)
	}
	if !priv.PublicKey.Equal(pub) {
		return nil, errors.New(`jose: private jwk: member "d" does not match the public members "x", "y"`)
	}
	return priv, nil
}

func ed25519Private(m strictjson.Value, pub ed25519.PublicKey) (ed25519.PrivateKey, error) {
	seed, err := privateMember(m, "d", ed25519.SeedSize)
	if err != nil {
		return nil, err
	}
	defer clear(seed)
	priv := ed25519.NewKeyFromSeed(seed)
	if !pub.Equal(priv.Public()) {
		return nil, errors.New(`jose: private jwk: member "d" does not match the public member "x"`)
	}
	return priv, nil
}

func rsaPrivate(m strictjson.Value, pub *rsa.PublicKey) (*rsa.PrivateKey, error) {
	if m.Has("oth") {
		return nil, errors.New(`jose: private jwk member "oth": multi-prime RSA keys are not supported`)
	}
	ints := map[string]*big.Int{}
	for _, name := range []string{"d", "p", "q", "dp", "dq", "qi"} {
		if !m.Has(name) {
			continue
		}
		b, err := privateMember(m, name, 0)
		if err != nil {
			return nil, err
		}
		ints[name] = new(big.Int).SetBytes(b)
		clear(b)
	}
	// crypto/rsa signs with the CRT and needs the primes; RFC 7518 §6.3.2
	// lets a producer omit them, but then this key cannot be used here.
	for _, name := range []string{"p", "q"} {
		if ints[name] == nil {
			return nil, fmt.Errorf("jose: private jwk: missing member %q (RSA private keys need the primes)", name)
		}
	}
	priv := &rsa.PrivateKey{
		PublicKey: rsa.PublicKey{N: new(big.Int).Set(pub.N), E: pub.E},
		D:         ints["d"],
		Primes:    []*big.Int{ints["p"], ints["q"]},
	}
	// Validate checks n = p·q and that d inverts e; Precompute first makes it
	// cheaper and fills the CRT values compared below.
	priv.Precompute()
	if err := priv.Validate(); err != nil {
		return nil, fmt.Errorf("jose: private jwk: RSA private members do not form a valid key for \"n\", \"e\": %w", err)
	}
	// RFC 7518 §6.3.2: the CRT members come all together or not at all, and
	// must agree with the primes.
	crt := []struct {
		name string
		want *big.Int
	}{{"dp", priv.Precomputed.Dp}, {"dq", priv.Precomputed.Dq}, {"qi", priv.Precomputed.Qinv}}
	present := 0
	for _, c := range crt {
		if ints[c.name] != nil {
			present++
		}
	}
	if present != 0 && present != len(crt) {
		return nil, errors.New(`jose: private jwk: members "dp", "dq", "qi" must be all present or all absent`)
	}
	for _, c := range crt {
		if got := ints[c.name]; got != nil && (c.want == nil || got.Cmp(c.want) != 0) {
			return nil, fmt.Errorf("jose: private jwk member %q does not match the primes", c.name)
		}
	}
	return priv, nil
}

// MarshalPrivateJWK writes key as a private JWK with "use":"sig", including
// "kid" and "alg" when not empty (alg must fit the key). It exists for key
// files only: JWKS documents are built from JWK values, which cannot hold
// private members. Members are in lexicographic order, as MarshalJSON writes.
// The caller owns the returned bytes and should clear them when done.
func MarshalPrivateJWK(key crypto.Signer, kid string, alg Alg) ([]byte, error) {
	if key == nil {
		return nil, errors.New("jose: private jwk: nil key")
	}
	k, err := publicJWK(key.Public())
	if err != nil {
		return nil, err
	}
	if alg != "" {
		if err := CheckKey(alg, key.Public()); err != nil {
			return nil, fmt.Errorf("jose: private jwk: %w", err)
		}
	}
	members := []member{
		{"kty", k.Kty}, {"crv", k.Crv}, {"x", k.X}, {"y", k.Y}, {"n", k.N}, {"e", k.E},
		{"kid", kid}, {"alg", string(alg)}, {"use", "sig"},
	}
	switch p := key.(type) {
	case *ecdsa.PrivateKey:
		d, err := p.Bytes()
		if err != nil {
			return nil, fmt.Errorf("jose: private jwk: EC private key: %w", err)
		}
		members = append(members, member{"d", b64(d)})
		clear(d)
	case ed25519.PrivateKey:
		members = append(members, member{"d", b64(p.Seed())})
	case *rsa.PrivateKey:
		if len(p.Primes) != 2 {
			return nil, errors.New("jose: private jwk: multi-prime RSA keys are not supported")
		}
		pre := p.Precomputed
		if pre.Dp == nil || pre.Dq == nil || pre.Qinv == nil {
			// Work on a copy: Precompute must not run on a key another
			// goroutine may be signing with.
			c := *p
			c.Precompute()
			pre = c.Precomputed
		}
		members = append(members,
			member{"d", b64(p.D.Bytes())}, member{"p", b64(p.Primes[0].Bytes())},
			member{"q", b64(p.Primes[1].Bytes())}, member{"dp", b64(pre.Dp.Bytes())},
			member{"dq", b64(pre.Dq.Bytes())}, member{"qi", b64(pre.Qinv.Bytes())})
	default:
		// Opaque signers (HSM, KMS) cannot be exported, by design.
		return nil, fmt.Errorf("jose: private jwk: cannot export private key of type %T", key)
	}
	b, err := writeObject(members)
	if err != nil {
		return nil, fmt.Errorf("jose: private jwk: %w", err)
	}
	return b, nil
}
