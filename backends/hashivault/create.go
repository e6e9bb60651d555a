//go:build !novault

package hashivault

import (
	"context"
	"fmt"

	"github.com/openbao/openbao/api/v2"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// Create makes a new version of Config.Key and returns its URI,
// hashivault://KEY/VERSION: the version is pinned, so a later rotation at
// Vault never changes what the returned URI names. A key that does not
// exist yet is created with the type req.Alg needs (rsa-3072 for RS256 and
// PS256); an existing key must be of a type that signs req.Alg.
// req.Name is not used: Transit versions have no names.
//
// The rotation is not repeated after a 5xx or a broken connection (it
// may have made a version); the error then says to look at the key.
func (b *Backend) Create(ctx context.Context, req backends.CreateRequest) (string, error) {
	if b.cfg.Key == "" {
		return "", &backends.PreconditionError{Op: "hashivault: create key", Err: fmt.Errorf("no Transit key configured"),
			Fix: "set key_backends.hashivault.key to the Transit key that rotation adds versions to"}
	}
	if b.closed.Load() {
		return "", &UnavailableError{Op: "create", Key: b.cfg.Key, Err: ErrClosed}
	}
	alg := req.Alg
	if alg == "" {
		alg = jose.ES256
	}
	typ, err := createType(alg)
	if err != nil {
		return "", err
	}
	ki, err := b.readKey(ctx, b.cfg.Key)
	var version int
	switch {
	case err == nil:
		if _, err := schemeFor(ki.keyType, alg); err != nil {
			return "", &UnsupportedKeyError{Key: b.cfg.Key, Reason: fmt.Sprintf("rotation wants %s: %v; configure another key for this alg", alg, err)}
		}
		if version, err = b.rotate(ctx); err != nil {
			return "", err
		}
	case isNotFound(err):
		path := b.cfg.Mount + "/keys/" + b.cfg.Key
		// Creating an existing key is a no-op at Vault, so a repeat is safe.
		err = b.do(ctx, call{op: "create key", key: path, idempotent: true, authed: true}, func(ctx context.Context) error {
			_, err := b.client.Logical().WriteWithContext(ctx, path, map[string]any{"type": typ, "exportable": false, "allow_plaintext_backup": false})
			return err
		})
		if err != nil {
			return "", b.fail("create key", path, err)
		}
		version = 1
		b.log.Info("hashivault: key created", "key", b.cfg.Key, "type", typ)
	default:
		return "", err
	}
	uri := keyURI(b.cfg.Key, version, alg)
	b.log.Info("hashivault: new key version", "key", b.cfg.Key, "version", version, "alg", alg)
	return uri, nil
}

// rotate adds a version and returns its number, read back from the key.
func (b *Backend) rotate(ctx context.Context) (int, error) {
	path := b.cfg.Mount + "/keys/" + b.cfg.Key + "/rotate"
	var sec *api.Secret
	err := b.do(ctx, call{op: "rotate", key: path, authed: true}, func(ctx context.Context) error {
		var err error
		sec, err = b.client.Logical().WriteWithContext(ctx, path, nil)
		return err
	})
	if err != nil {
		return 0, b.fail("rotate", path, err)
	}
	if sec != nil && sec.Data != nil {
		if v := toInt(sec.Data["latest_version"]); v > 0 {
			return v, nil
		}
	}
	// Older Vaults answer 204: read the key to learn the new version. Another
	// rotation in between would be read instead, so the version's public
	// key is what Open checks, and the daemon records.
	ki, err := b.readKey(ctx, b.cfg.Key)
	if err != nil {
		return 0, err
	}
	return ki.latest, nil
}

func isNotFound(err error) bool {
	_, ok := err.(*KeyNotFoundError)
	return ok
}
