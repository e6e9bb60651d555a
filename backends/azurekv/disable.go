//go:build !noazurekv

package azurekv

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"

	"github.com/cardsign/cardsign/backends"
)

// Disable disables a key version (UpdateKey, enabled false), for
// on_revoke: disable. A URI without a version is refused: by the time a
// key is revoked its key has usually a newer version, which must not be
// the one disabled. Disabling a disabled version succeeds.
func (b *Backend) Disable(ctx context.Context, uri string) error {
	ref, err := parseURI(uri)
	if err != nil {
		return err
	}
	if ref.version == "" {
		return backends.NewURIError(uri, "Disable needs a key version: the current version may be another key by now")
	}
	if b.closed.Load() {
		return &UnavailableError{Op: "UpdateKey", Key: ref.String(), Err: ErrClosed}
	}
	client, err := b.clientFor(ref.host)
	if err != nil {
		return err
	}
	enabled := false
	err = b.do(ctx, call{op: "UpdateKey", key: ref.String()}, func(ctx context.Context) error {
		_, err := client.UpdateKey(ctx, ref.name, ref.version, azkeys.UpdateKeyParameters{KeyAttributes: &azkeys.KeyAttributes{Enabled: &enabled}}, nil)
		return err
	})
	if err != nil {
		return b.fail("UpdateKey", ref.String(), err)
	}
	b.log.Info("azurekv: key version disabled", "key", ref.String())
	return nil
}
