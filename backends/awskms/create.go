//go:build !noawskms

package awskms

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// Create makes a new SIGN_VERIFY key in the backend's Region with the
// KeySpec for req.Alg (Config.KeySpec, which must fit req.Alg, else the
// default for the alg; an empty req.Alg takes Config.KeySpec's default
// alg), and moves Config.Alias to it when set. req.Name, if any, goes into
// the key's Description. It returns awskms:///KEY-ARN, with ?alg=PS256 for
// a PS256 key so that the URI alone says how it signs.
//
// If the key was made but the alias could not be moved, the error is an
// *AliasError carrying the new key's URI. CreateKey is retried only after
// throttling: after a 5xx it may have made a key, and a retry would make
// another.
func (b *Backend) Create(ctx context.Context, req backends.CreateRequest) (string, error) {
	alg := req.Alg
	if alg == "" {
		def, ok := schemeFor(types.KeySpec(b.cfg.KeySpec), "")
		if !ok {
			return "", errors.New("awskms: create: no alg requested and no KeySpec configured")
		}
		alg = def.alg
	}
	if _, err := jose.ParseAlg(string(alg)); err != nil {
		return "", fmt.Errorf("awskms: create: %w", err)
	}
	spec, err := createKeySpec(alg, types.KeySpec(b.cfg.KeySpec))
	if err != nil {
		return "", err
	}
	if b.closed.Load() {
		return "", b.closedErr("CreateKey", string(spec))
	}
	client, err := b.clientFor("")
	if err != nil {
		return "", err
	}
	desc := "cardsign signing key (" + string(alg) + ")"
	if req.Name != "" {
		desc += ": " + req.Name
	}

	var out *kms.CreateKeyOutput
	err = b.do(ctx, call{op: "CreateKey", key: string(spec)}, func(ctx context.Context) error {
		var err error
		out, err = client.CreateKey(ctx, &kms.CreateKeyInput{
			KeySpec:     spec,
			KeyUsage:    types.KeyUsageTypeSignVerify,
			Description: aws.String(desc),
		})
		return err
	})
	if err != nil {
		return "", b.fail(fmt.Sprintf("create %s key", spec), err)
	}
	md := out.KeyMetadata
	if md == nil || aws.ToString(md.Arn) == "" {
		return "", errors.New("awskms: create: CreateKey returned no key ARN")
	}
	keyARN := aws.ToString(md.Arn)
	if md.KeySpec != spec || md.KeyUsage != types.KeyUsageTypeSignVerify {
		// Not a key we asked for: say which, so it can be deleted.
		return "", fmt.Errorf("awskms: create: KMS made key %s with KeySpec %s and KeyUsage %s, not %s and SIGN_VERIFY",
			keyARN, md.KeySpec, md.KeyUsage, spec)
	}
	uri := keyURI(keyARN, alg, spec)
	b.log.Info("awskms: key created", "key", keyARN, "keyspec", spec, "alg", alg)

	if b.cfg.Alias != "" {
		if err := b.moveAlias(ctx, client, b.cfg.Alias, keyARN); err != nil {
			b.log.Error("awskms: alias not moved to the new key", "alias", b.cfg.Alias, "key", keyARN, "error", err)
			return "", &AliasError{Alias: b.cfg.Alias, URI: uri, Err: err}
		}
		b.log.Info("awskms: alias moved", "alias", b.cfg.Alias, "key", keyARN)
	}
	return uri, nil
}

// moveAlias points alias at keyARN: UpdateAlias, or CreateAlias when the
// alias does not exist yet, or UpdateAlias again when it was created in the
// meantime (by another replica, or by a CreateAlias that took effect before
// a 5xx).
func (b *Backend) moveAlias(ctx context.Context, client *kms.Client, alias, keyARN string) error {
	update := func() error {
		return b.do(ctx, call{op: "UpdateAlias", key: alias, idempotent: true}, func(ctx context.Context) error {
			_, err := client.UpdateAlias(ctx, &kms.UpdateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(keyARN)})
			return err
		})
	}
	err := update()
	if !isCode(err, "NotFoundException") {
		return err
	}
	// Retrying CreateAlias is safe: a repeat ends in AlreadyExistsException,
	// handled below.
	err = b.do(ctx, call{op: "CreateAlias", key: alias, idempotent: true}, func(ctx context.Context) error {
		_, err := client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(keyARN)})
		return err
	})
	if isCode(err, "AlreadyExistsException") {
		return update()
	}
	return err
}
