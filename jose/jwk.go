package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/cardsign/cardsign/strictjson"
)

// JWK is a public JSON Web Key (RFC 7517) of a kind cardsign signs with: EC
// (P-256, P-384, P-521), OKP (Ed25519) or RSA. It has no fields for private
// members, so a JWK value can be published without a second thought.
type JWK struct {
	Kty string `json:"kty,omitempty"`
	Crv string `json:"crv,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
	Kid string `json:"kid,omitempty"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
}

// privateMemberNames are the JWK members that carry private or symmetric key
// material (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2).
var privateMemberNames = [...]string{"d", "dp", "dq", "k", "oth", "p", "q", "qi"}

// NewJWK returns the public JWK of pub with "use":"sig". kid "" means the RFC
// 7638 thumbprint; alg "" leaves the "alg" member out, otherwise alg must fit
// the key. EC coordinates are fixed width and RSA n and e minimal big-endian
// (RFC 7518 §6.2.1.2, §6.3.1), so equal keys give equal JWKs.
func NewJWK(pub crypto.PublicKey, kid string, alg Alg) (JWK, error) {
	k, err := publicJWK(pub)
	if err != nil {
		return JWK{}, err
	}
	if alg != "" {
		if err := CheckKey(alg, pub); err != nil {
			return JWK{}, fmt.Errorf("jose: jwk: %w", err)
		}
	}
	if kid == "" {
		if kid, err = thumbprint(k); err != nil {
			return JWK{}, err
		}
	}
	k.Kid, k.Alg, k.Use = kid, string(alg), "sig"
	return k, nil
}

// publicJWK returns the key-type members (kty, crv, x, y, n, e) of pub. Only
// keys that some supported alg can use are accepted, so a JWK is never made
// for a key cardsign would refuse to verify with.
func publicJWK(pub crypto.PublicKey) (JWK, error) {
	alg, err := DefaultAlg(pub)
	if err != nil {
		return JWK{}, fmt.Errorf("jose: jwk: %w", err)
	}
	if err := CheckKey(alg, pub); err != nil {
		return JWK{}, fmt.Errorf("jose: jwk: %w", err)
	}
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		b, err := k.Bytes() // 0x04 || X || Y, each fixed width
		if err != nil {
			return JWK{}, fmt.Errorf("jose: jwk: EC public key: %w", err)
		}
		size := alg.ecSize()
		return JWK{Kty: "EC", Crv: k.Curve.Params().Name, X: b64(b[1 : 1+size]), Y: b64(b[1+size:])}, nil
	case ed25519.PublicKey:
		return JWK{Kty: "OKP", Crv: "Ed25519", X: b64(k)}, nil
	case *rsa.PublicKey:
		return JWK{Kty: "RSA", N: b64(k.N.Bytes()), E: b64(big.NewInt(int64(k.E)).Bytes())}, nil
	}
	return JWK{}, fmt.Errorf("jose: jwk: unsupported key type %T", pub) // unreachable: DefaultAlg refused it
}

// MarshalJSON writes the public members in lexicographic order with no
// whitespace (the RFC 8785 form), leaving out empty ones. It never writes
// anything but kty, crv, x, y, n, e, kid, alg and use.
func (k JWK) MarshalJSON() ([]byte, error) {
	b, err := writeObject([]member{
		{"kty", k.Kty}, {"crv", k.Crv}, {"x", k.X}, {"y", k.Y},
		{"n", k.N}, {"e", k.E}, {"kid", k.Kid}, {"alg", k.Alg}, {"use", k.Use},
	})
	if err != nil {
		return nil, fmt.Errorf("jose: jwk: %w", err)
	}
	return b, nil
}

// ParseJWK parses one public JWK and validates it (see PublicKey); an "alg"
// member, when present, must be a supported alg that fits the key. Unknown
// members are ignored (RFC 7517 §4). Private members are not looked at here:
// callers that must refuse them (a JWKS) ask PrivateMembers.
func ParseJWK(data []byte) (JWK, error) {
	m, err := ParseObject(data)
	if err != nil {
		return JWK{}, fmt.Errorf("jose: jwk: %w", err)
	}
	k, err := jwkFromMembers(m)
	if err != nil {
		return JWK{}, err
	}
	if _, err := k.PublicKey(); err != nil {
		return JWK{}, err
	}
	return k, nil
}

// jwkFromMembers reads the public members and checks the "alg" member names
// a supported alg. Key validation is left to PublicKey.
func jwkFromMembers(m strictjson.Value) (JWK, error) {
	var k JWK
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"kty", &k.Kty}, {"crv", &k.Crv}, {"x", &k.X}, {"y", &k.Y}, {"n", &k.N},
		{"e", &k.E}, {"kid", &k.Kid}, {"alg", &k.Alg}, {"use", &k.Use},
	} {
		v, err := stringMember(m, f.name)
		if err != nil {
			return JWK{}, fmt.Errorf("jose: jwk: %w", err)
		}
		*f.dst = v
	}
	if m.Has("alg") {
		if _, err := ParseAlg(k.Alg); err != nil {
			return JWK{}, fmt.Errorf("jose: jwk member \"alg\": %w", err)
		}
	}
	return k, nil
}

// PrivateMembers returns, sorted, the private or symmetric key members (d,
// p, q, dp, dq, qi, oth, k) present in the JWK object data. A JWKS must not
// carry any; a key file must.
func PrivateMembers(data []byte) ([]string, error) {
	m, err := ParseObject(data)
	if err != nil {
		return nil, fmt.Errorf("jose: jwk: %w", err)
	}
	var found []string
	for _, name := range privateMemberNames {
		if m.Has(name) {
			found = append(found, name)
		}
	}
	return found, nil
}

// PublicKey returns the key the JWK describes, after checking everything a
// verifier relies on: a supported kty and crv, exact coordinate widths, an EC
// point on its curve, a minimal RSA modulus of at least MinRSABits bits, a
// sane RSA exponent, and that an "alg" member fits the key.
func (k JWK) PublicKey() (crypto.PublicKey, error) {
	pub, err := k.publicKey()
	if err != nil {
		return nil, err
	}
	if k.Alg != "" {
		alg, err := ParseAlg(k.Alg)
		if err != nil {
			return nil, fmt.Errorf("jose: jwk member \"alg\": %w", err)
		}
		if err := CheckKey(alg, pub); err != nil {
			return nil, fmt.Errorf("jose: jwk member \"alg\": %w", err)
		}
	}
	return pub, nil
}

func (k JWK) publicKey() (crypto.PublicKey, error) {
	switch k.Kty {
	case "":
		return nil, errors.New(`jose: jwk: missing member "kty"`)
	case "EC":
		return k.ecPublicKey()
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, fmt.Errorf("jose: jwk member \"crv\": unsupported OKP curve %q (supported: Ed25519)", k.Crv)
		}
		x, err := b64Member("x", k.X, ed25519.PublicKeySize)
		if err != nil {
			return nil, err
		}
		return ed25519.PublicKey(x), nil
	case "RSA":
		return k.rsaPublicKey()
	}
	return nil, fmt.Errorf("jose: jwk member \"kty\": unsupported key type %q (supported: EC, OKP, RSA)", k.Kty)
}

// curveByName maps a JWK "crv" to its curve and the ES* alg it implies.
func curveByName(crv string) (elliptic.Curve, Alg, error) {
	switch crv {
	case "P-256":
		return elliptic.P256(), ES256, nil
	case "P-384":
		return elliptic.P384(), ES384, nil
	case "P-521":
		return elliptic.P521(), ES512, nil
	}
	return nil, "", fmt.Errorf("jose: jwk member \"crv\": unsupported EC curve %q (supported: P-256, P-384, P-521)", crv)
}

func (k JWK) ecPublicKey() (*ecdsa.PublicKey, error) {
	curve, alg, err := curveByName(k.Crv)
	if err != nil {
		return nil, err
	}
	size := alg.ecSize()
	x, err := b64Member("x", k.X, size)
	if err != nil {
		return nil, err
	}
	y, err := b64Member("y", k.Y, size)
	if err != nil {
		return nil, err
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, slices.Concat([]byte{4}, x, y))
	if err != nil {
		// The widths are right, so the point itself is bad.
		return nil, fmt.Errorf("jose: jwk members \"x\", \"y\": not a point on %s: %w", k.Crv, err)
	}
	return pub, nil
}

func (k JWK) rsaPublicKey() (*rsa.PublicKey, error) {
	n, err := b64Member("n", k.N, 0)
	if err != nil {
		return nil, err
	}
	if n[0] == 0 {
		return nil, errors.New(`jose: jwk member "n": has leading zero bytes (RFC 7518 §6.3.1.1 wants the minimal encoding)`)
	}
	nn := new(big.Int).SetBytes(n)
	if nn.BitLen() < MinRSABits {
		return nil, fmt.Errorf("jose: jwk member \"n\": RSA modulus has %d bits, need at least %d", nn.BitLen(), MinRSABits)
	}
	if nn.Bit(0) == 0 {
		return nil, errors.New(`jose: jwk member "n": RSA modulus is even`)
	}
	e, err := b64Member("e", k.E, 0)
	if err != nil {
		return nil, err
	}
	if e[0] == 0 {
		return nil, errors.New(`jose: jwk member "e": has leading zero bytes (RFC 7518 §6.3.1.2 wants the minimal encoding)`)
	}
	// crypto/rsa holds E in an int and refuses exponents of 2^31 and above.
	if len(e) > 4 {
		return nil, errors.New(`jose: jwk member "e": RSA exponent too large`)
	}
	ee := new(big.Int).SetBytes(e).Int64()
	if ee < 3 || ee%2 == 0 || ee > 1<<31-1 {
		return nil, fmt.Errorf("jose: jwk member \"e\": RSA exponent %d must be odd, at least 3 and below 2^31", ee)
	}
	return &rsa.PublicKey{N: nn, E: int(ee)}, nil
}

// b64Member decodes a required base64url member; size > 0 demands that width.
func b64Member(name, value string, size int) ([]byte, error) {
	if value == "" {
		return nil, fmt.Errorf("jose: jwk: missing member %q", name)
	}
	b, err := DecodeBase64URL(value)
	if err != nil {
		return nil, fmt.Errorf("jose: jwk member %q: %w", name, err)
	}
	if size > 0 && len(b) != size {
		return nil, fmt.Errorf("jose: jwk member %q: %d bytes, want %d", name, len(b), size)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("jose: jwk member %q: empty", name)
	}
	return b, nil
}
