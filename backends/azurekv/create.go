//go:build !noazurekv

package azurekv

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// Create adds a version to Config.Key (CreateKey makes the key, or a new
// version of it) of the type req.Alg needs: EC P-256/P-384/P-521, or RSA
// of Config.RSABits; HSM-protected with Config.HSM. It returns the
// version's URI, azurekv://HOST/keys/NAME/VERSION (?alg=PS256 for PS256):
// pinned, never "latest". req.Name is not used: versions have no names.
// CreateKey is not repeated after a 5xx or a broken connection: it may
// have made a version.
func (b *Backend) Create(ctx context.Context, req backends.CreateRequest) (string, error) {
	if b.create.name == "" {
		return "", &backends.PreconditionError{Op: "azurekv: create key", Err: fmt.Errorf("no key configured"),
			Fix: "set key_backends.azurekv.key to azurekv://VAULT.vault.azure.net/keys/NAME"}
	}
	if b.closed.Load() {
		return "", &UnavailableError{Op: "CreateKey", Key: b.create.String(), Err: ErrClosed}
	}
	alg := req.Alg
	if alg == "" {
		alg = jose.ES256
	}
	params, err := b.createParams(alg)
	if err != nil {
		return "", err
	}
	client, err := b.clientFor(b.create.host)
	if err != nil {
		return "", err
	}
	var resp azkeys.CreateKeyResponse
	err = b.do(ctx, call{op: "CreateKey", key: b.create.String(), once: true}, func(ctx context.Context) error {
		var err error
		resp, err = client.CreateKey(ctx, b.create.name, params, nil)
		return err
	})
	if err != nil {
		return "", b.fail("CreateKey", b.create.String(), err)
	}
	var name, version string
	if resp.Key != nil {
		name, version = kidParts(resp.Key.KID)
	}
	if !validVersion(version) || name != b.create.name {
		return "", fmt.Errorf("azurekv: CreateKey %s returned no kid naming a version of it", b.create)
	}
	uri := keyURI(b.create.host, b.create.name, version, alg)
	b.log.Info("azurekv: key version created", "key", b.create.String(), "version", version, "alg", alg, "hsm", b.cfg.HSM)
	return uri, nil
}
