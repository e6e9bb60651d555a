//go:build !nogcpkms

package gcpkms

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// Open reads a key version named by a gcpkms:// URI and returns a signer
// for it, with the JOSE alg its Cloud KMS algorithm stands for. The version
// must be ENABLED and its algorithm supported. Its public key is read here,
// once, checked (pem_crc32c, name, algorithm, key size) and kept: signing
// never fetches it again. Handle.KID is empty, so the RFC 7638 thumbprint is
// the kid.
func (b *Backend) Open(ctx context.Context, uri string) (backends.Handle, error) {
	name, err := parseURI(uri)
	if err != nil {
		return backends.Handle{}, err
	}
	v, err := b.getVersion(ctx, name)
	if err != nil {
		return backends.Handle{}, err
	}
	if v.GetState() != kmspb.CryptoKeyVersion_ENABLED {
		return backends.Handle{}, &KeyStateError{Name: name, State: v.GetState().String()}
	}
	alg, ok := algorithmOf(v.GetAlgorithm())
	if !ok {
		return backends.Handle{}, &UnsupportedAlgorithmError{Name: name, Algorithm: v.GetAlgorithm().String()}
	}
	pub, err := b.publicKey(ctx, name, v.GetAlgorithm(), alg)
	if err != nil {
		return backends.Handle{}, err
	}
	s := &signer{b: b, name: name, alg: alg, pub: pub, limiter: b.limits.Key(name)}
	b.log.Info("gcpkms: key opened", "key", name, "alg", alg.jose, "algorithm", v.GetAlgorithm().String())
	return backends.Handle{Signer: s, Alg: alg.jose}, nil
}

// getVersion reads a CryptoKeyVersion.
func (b *Backend) getVersion(ctx context.Context, name string) (*kmspb.CryptoKeyVersion, error) {
	var v *kmspb.CryptoKeyVersion
	err := b.call(ctx, op{what: "get key version", name: name}, func(ctx context.Context) error {
		var err error
		v, err = b.client.GetCryptoKeyVersion(ctx, &kmspb.GetCryptoKeyVersionRequest{Name: name})
		if err == nil && v.GetName() != name {
			return &IntegrityError{Name: name, Field: "name", Reason: fmt.Sprintf("Cloud KMS answered for %q", v.GetName())}
		}
		return err
	})
	return v, err
}

// publicKey reads and checks the public key of version name, whose Cloud
// KMS algorithm is kmsAlg.
func (b *Backend) publicKey(ctx context.Context, name string, kmsAlg kmspb.CryptoKeyVersion_CryptoKeyVersionAlgorithm, alg algorithm) (crypto.PublicKey, error) {
	var pk *kmspb.PublicKey
	err := b.call(ctx, op{what: "get public key", name: name}, func(ctx context.Context) error {
		resp, err := b.client.GetPublicKey(ctx, &kmspb.GetPublicKeyRequest{Name: name})
		if err != nil {
			return err
		}
		if err := checkPublicKey(name, resp); err != nil {
			return err
		}
		pk = resp
		return nil
	})
	if err != nil {
		return nil, err
	}
	if pk.GetAlgorithm() != kmsAlg {
		return nil, fmt.Errorf("gcpkms: public key of %s is for %s, but the version is %s", name, pk.GetAlgorithm(), kmsAlg)
	}
	block, _ := pem.Decode([]byte(pk.GetPem()))
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("gcpkms: public key of %s: not a PEM PUBLIC KEY block", name)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("gcpkms: public key of %s: %w", name, err)
	}
	if err := jose.CheckKey(alg.jose, pub); err != nil {
		return nil, fmt.Errorf("gcpkms: public key of %s (%s): %w", name, kmsAlg, err)
	}
	if alg.rsaBits != 0 {
		if k, ok := pub.(*rsa.PublicKey); !ok || k.N.BitLen() != alg.rsaBits {
			return nil, fmt.Errorf("gcpkms: public key of %s is not the %d-bit RSA key %s promises", name, alg.rsaBits, kmsAlg)
		}
	}
	return pub, nil
}

// checkPublicKey checks a GetPublicKey response: the PEM against its
// pem_crc32c, and the name.
func checkPublicKey(name string, pk *kmspb.PublicKey) error {
	if pk.GetName() != name {
		return &IntegrityError{Name: name, Field: "name", Reason: fmt.Sprintf("Cloud KMS answered with the public key of %q", pk.GetName())}
	}
	if pk.GetPemCrc32C() == nil {
		return &IntegrityError{Name: name, Field: "pem_crc32c", Reason: "missing", retry: true}
	}
	if got := crc32c([]byte(pk.GetPem())); got != pk.GetPemCrc32C().GetValue() {
		return &IntegrityError{Name: name, Field: "pem_crc32c", Reason: fmt.Sprintf("the PEM's CRC32C is %d, the response says %d", got, pk.GetPemCrc32C().GetValue()), retry: true}
	}
	return nil
}
