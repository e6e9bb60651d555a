//go:build !noawskms

package awskms

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/cardsign/cardsign/backends"
)

// Disable disables the key of a key ID or key ARN URI (DisableKey), for
// on_revoke: disable. A disabled key can neither sign nor return its public
// key; cardsign keeps its own copy of the public key, and EnableKey undoes
// this. Alias URIs are refused: by the time a key is revoked its alias has
// usually moved to a newer key, which must not be the one disabled.
// Disabling a disabled key succeeds.
func (b *Backend) Disable(ctx context.Context, uri string) error {
	ref, err := parseURI(uri)
	if err != nil {
		return err
	}
	if ref.alias {
		return backends.NewURIError(uri, "Disable needs a key ID or key ARN, not an alias: the alias may name another key by now")
	}
	if b.closed.Load() {
		return b.closedErr("DisableKey", ref.id)
	}
	client, err := b.clientFor(ref.region)
	if err != nil {
		return err
	}
	err = b.do(ctx, call{op: "DisableKey", key: ref.id, idempotent: true}, func(ctx context.Context) error {
		_, err := client.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(ref.id)})
		return err
	})
	if err != nil {
		return b.fail("disable "+ref.id, kmsError(ref.id, err))
	}
	b.log.Info("awskms: key disabled", "key", ref.id)
	return nil
}
