//go:build !nogcpkms

package gcpkms

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// Disable sets the key version a gcpkms:// URI names to DISABLED, so it can
// no longer sign (the daemon's on_revoke: disable). It is idempotent: a
// version already DISABLED, or DESTROYED or scheduled for destruction (which
// cannot sign either), is left as it is and Disable succeeds.
func (b *Backend) Disable(ctx context.Context, uri string) error {
	name, err := parseURI(uri)
	if err != nil {
		return err
	}
	var v *kmspb.CryptoKeyVersion
	err = b.call(ctx, op{what: "disable", name: name}, func(ctx context.Context) error {
		var err error
		v, err = b.client.UpdateCryptoKeyVersion(ctx, &kmspb.UpdateCryptoKeyVersionRequest{
			CryptoKeyVersion: &kmspb.CryptoKeyVersion{Name: name, State: kmspb.CryptoKeyVersion_DISABLED},
			UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"state"}},
		})
		return err
	})
	var ks *KeyStateError
	if errors.As(err, &ks) {
		// Cloud KMS refuses to disable a version that is destroyed or being
		// destroyed; find out whether that is why.
		cur, gerr := b.getVersion(ctx, name)
		if gerr != nil {
			return err
		}
		switch st := cur.GetState(); st {
		case kmspb.CryptoKeyVersion_DISABLED, kmspb.CryptoKeyVersion_DESTROYED, kmspb.CryptoKeyVersion_DESTROY_SCHEDULED:
			b.log.Info("gcpkms: key version cannot sign already", "key", name, "state", st.String())
			return nil
		default:
			return &KeyStateError{Name: name, State: st.String(), Err: ks.Err}
		}
	}
	if err != nil {
		return err
	}
	if v.GetState() != kmspb.CryptoKeyVersion_DISABLED {
		return fmt.Errorf("gcpkms: disable %s: Cloud KMS answered state %s", name, v.GetState())
	}
	b.log.Info("gcpkms: key version disabled", "key", name)
	return nil
}
