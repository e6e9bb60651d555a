//go:build !noawskms

package awskms

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// Open resolves an awskms: URI to its key (DescribeKey: an alias to the
// key it names now, a key ID to its ARN), checks that the key is Enabled
// with KeyUsage SIGN_VERIFY, settles the JOSE alg from its KeySpec,
// SigningAlgorithms and the URI's ?alg=, and reads the public key
// (GetPublicKey) once. The signer signs with that key ARN from then on,
// so moving an alias later does not change what an opened key signs with.
// Handle.KID is "": the registry uses the RFC 7638 thumbprint.
func (b *Backend) Open(ctx context.Context, uri string) (backends.Handle, error) {
	ref, err := parseURI(uri)
	if err != nil {
		return backends.Handle{}, err
	}
	if b.closed.Load() {
		return backends.Handle{}, b.closedErr("open", ref.id)
	}
	client, err := b.clientFor(ref.region)
	if err != nil {
		return backends.Handle{}, err
	}

	var desc *kms.DescribeKeyOutput
	err = b.do(ctx, call{op: "DescribeKey", key: ref.id, idempotent: true}, func(ctx context.Context) error {
		var err error
		desc, err = client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(ref.id)})
		return err
	})
	if err != nil {
		return backends.Handle{}, b.fail("open "+ref.id, kmsError(ref.id, err))
	}
	md := desc.KeyMetadata
	if md == nil || aws.ToString(md.Arn) == "" {
		return backends.Handle{}, b.fail("open "+ref.id, errors.New("DescribeKey returned no key ARN"))
	}
	keyARN := aws.ToString(md.Arn)
	if !ref.alias && keyARN != ref.id && !strings.HasSuffix(keyARN, ":key/"+ref.id) {
		return backends.Handle{}, b.fail("", &KeyIDMismatchError{Op: "DescribeKey", Want: ref.id, Got: keyARN})
	}
	if md.KeyUsage != types.KeyUsageTypeSignVerify {
		return backends.Handle{}, b.fail("", &UnsupportedKeyError{Key: keyARN, Reason: fmt.Sprintf("KeyUsage is %s, not SIGN_VERIFY", md.KeyUsage)})
	}
	if md.KeyState != types.KeyStateEnabled || !md.Enabled {
		return backends.Handle{}, b.fail("", &KeyStateError{Key: keyARN, State: string(md.KeyState)})
	}
	sch, err := keyScheme(keyARN, md.KeySpec, md.SigningAlgorithms, ref.alg)
	if err != nil {
		return backends.Handle{}, b.fail("", err)
	}

	var pk *kms.GetPublicKeyOutput
	err = b.do(ctx, call{op: "GetPublicKey", key: keyARN, idempotent: true}, func(ctx context.Context) error {
		var err error
		pk, err = client.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(keyARN)})
		return err
	})
	if err != nil {
		return backends.Handle{}, b.fail("open "+keyARN, kmsError(keyARN, err))
	}
	if got := aws.ToString(pk.KeyId); got != keyARN {
		return backends.Handle{}, b.fail("", &KeyIDMismatchError{Op: "GetPublicKey", Want: keyARN, Got: got})
	}
	if pk.KeySpec != md.KeySpec || !slices.Contains(pk.SigningAlgorithms, sch.signing) {
		return backends.Handle{}, b.fail("", &UnsupportedKeyError{Key: keyARN, Reason: fmt.Sprintf(
			"GetPublicKey (KeySpec %s, %v) disagrees with DescribeKey (KeySpec %s, %s)", pk.KeySpec, pk.SigningAlgorithms, md.KeySpec, sch.signing)})
	}
	pub, err := x509.ParsePKIXPublicKey(pk.PublicKey)
	if err != nil {
		return backends.Handle{}, b.fail("", &UnsupportedKeyError{Key: keyARN, Reason: "public key is not a DER SubjectPublicKeyInfo", Err: err})
	}
	if err := jose.CheckKey(sch.alg, pub); err != nil {
		return backends.Handle{}, b.fail("", &UnsupportedKeyError{Key: keyARN, Reason: fmt.Sprintf("public key does not fit KeySpec %s", md.KeySpec), Err: err})
	}

	s := &signer{b: b, client: client, arn: keyARN, scheme: sch, pub: pub, limiter: b.limits.Key(keyARN)}
	b.log.Debug("awskms: key opened", "key", keyARN, "alg", sch.alg, "keyspec", md.KeySpec)
	return backends.Handle{Signer: s, Alg: sch.alg}, nil
}
