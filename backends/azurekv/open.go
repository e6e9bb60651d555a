//go:build !noazurekv

package azurekv

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// Open reads the key version (GetKey; the current version when the URI
// names none, pinned from then on: a new version at the vault never changes
// what an opened key signs with), checks that it is enabled, valid now and
// allowed to sign, settles the JOSE alg from its type, curve and ?alg=, and
// keeps its public key. Handle.KID is "": the registry uses the RFC 7638
// thumbprint.
func (b *Backend) Open(ctx context.Context, uri string) (backends.Handle, error) {
	ref, err := parseURI(uri)
	if err != nil {
		return backends.Handle{}, err
	}
	if b.closed.Load() {
		return backends.Handle{}, &UnavailableError{Op: "open", Key: ref.String(), Err: ErrClosed}
	}
	client, err := b.clientFor(ref.host)
	if err != nil {
		return backends.Handle{}, err
	}
	bundle, err := b.getKey(ctx, client, ref)
	if err != nil {
		return backends.Handle{}, err
	}
	jwk := bundle.Key
	if jwk == nil || jwk.KID == nil || jwk.Kty == nil {
		return backends.Handle{}, &UnsupportedKeyError{Key: ref.String(), Reason: "GetKey returned no key, kid or kty"}
	}
	got, version := kidParts(jwk.KID)
	if got != ref.name {
		return backends.Handle{}, fmt.Errorf("azurekv: GetKey %s answered for key %q; discarded", ref, got)
	}
	if ref.version != "" && version != ref.version {
		return backends.Handle{}, fmt.Errorf("azurekv: GetKey %s answered for version %q; discarded", ref, version)
	}
	if !validVersion(version) {
		return backends.Handle{}, fmt.Errorf("azurekv: GetKey %s answered with kid %q, which names no version", ref, string(*jwk.KID))
	}
	ref.version = version
	if err := usable(ref.String(), bundle.Attributes, jwk.KeyOps); err != nil {
		return backends.Handle{}, err
	}
	var crv azkeys.CurveName
	if jwk.Crv != nil {
		crv = *jwk.Crv
	}
	alg, err := keyAlg(*jwk.Kty, crv, ref.alg)
	if err != nil {
		return backends.Handle{}, &UnsupportedKeyError{Key: ref.String(), Reason: err.Error()}
	}
	pub, err := publicKey(jwk, crv)
	if err != nil {
		return backends.Handle{}, &UnsupportedKeyError{Key: ref.String(), Reason: err.Error()}
	}
	if err := jose.CheckKey(alg, pub); err != nil {
		return backends.Handle{}, &UnsupportedKeyError{Key: ref.String(), Reason: err.Error()}
	}
	s := &signer{b: b, client: client, ref: ref, alg: alg, pub: pub, limiter: b.limits.Key(ref.String())}
	b.log.Debug("azurekv: key opened", "key", ref.String(), "alg", alg, "kty", *jwk.Kty)
	return backends.Handle{Signer: s, Alg: alg}, nil
}

// getKey reads a key version ("" for the current one).
func (b *Backend) getKey(ctx context.Context, client *azkeys.Client, ref keyRef) (azkeys.KeyBundle, error) {
	var resp azkeys.GetKeyResponse
	err := b.do(ctx, call{op: "GetKey", key: ref.String()}, func(ctx context.Context) error {
		var err error
		resp, err = client.GetKey(ctx, ref.name, ref.version, nil)
		return err
	})
	if err != nil {
		return azkeys.KeyBundle{}, b.fail("GetKey", ref.String(), err)
	}
	return resp.KeyBundle, nil
}

// usable refuses a key version that is disabled, outside its validity, or
// not allowed to sign.
func usable(key string, a *azkeys.KeyAttributes, ops []*azkeys.KeyOperation) error {
	now := time.Now()
	switch {
	case a != nil && a.Enabled != nil && !*a.Enabled:
		return &KeyStateError{Key: key, Reason: "it is disabled"}
	case a != nil && a.NotBefore != nil && now.Before(*a.NotBefore):
		return &KeyStateError{Key: key, Reason: "it is not valid before " + a.NotBefore.UTC().Format(time.RFC3339)}
	case a != nil && a.Expires != nil && !now.Before(*a.Expires):
		return &KeyStateError{Key: key, Reason: "it expired at " + a.Expires.UTC().Format(time.RFC3339)}
	}
	if len(ops) > 0 && !slices.ContainsFunc(ops, func(op *azkeys.KeyOperation) bool { return op != nil && *op == azkeys.KeyOperationSign }) {
		return &UnsupportedKeyError{Key: key, Reason: "its key_ops do not include sign"}
	}
	return nil
}

// publicKey builds the public key of a Key Vault JWK.
func publicKey(jwk *azkeys.JSONWebKey, crv azkeys.CurveName) (crypto.PublicKey, error) {
	switch *jwk.Kty {
	case azkeys.KeyTypeEC, azkeys.KeyTypeECHSM:
		var curve elliptic.Curve
		switch crv {
		case azkeys.CurveNameP256:
			curve = elliptic.P256()
		case azkeys.CurveNameP384:
			curve = elliptic.P384()
		case azkeys.CurveNameP521:
			curve = elliptic.P521()
		default:
			return nil, fmt.Errorf("curve %s", crv)
		}
		size := (curve.Params().BitSize + 7) / 8
		if len(jwk.X) == 0 || len(jwk.X) > size || len(jwk.Y) == 0 || len(jwk.Y) > size {
			return nil, fmt.Errorf("the EC point's coordinates are not %d bytes", size)
		}
		// The uncompressed point, parsed by crypto/ecdh's checks.
		point := make([]byte, 1+2*size)
		point[0] = 4
		copy(point[1+size-len(jwk.X):1+size], jwk.X)
		copy(point[1+2*size-len(jwk.Y):], jwk.Y)
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return nil, fmt.Errorf("the EC point: %w", err)
		}
		return pub, nil
	case azkeys.KeyTypeRSA, azkeys.KeyTypeRSAHSM:
		if len(jwk.N) == 0 || len(jwk.E) == 0 || len(jwk.E) > 4 {
			return nil, fmt.Errorf("the RSA modulus or exponent is missing or too large")
		}
		e := new(big.Int).SetBytes(jwk.E)
		return &rsa.PublicKey{N: new(big.Int).SetBytes(jwk.N), E: int(e.Int64())}, nil
	}
	return nil, fmt.Errorf("key type %s", *jwk.Kty)
}
