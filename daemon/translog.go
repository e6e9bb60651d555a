package daemon

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/internal/daemonconfig"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

// openLog opens the transparency log's keys (log.keys) through the backends
// (transparency.OpenKeys), making the embedded default's key at the first
// start when none is configured.
func openLog(ctx context.Context, cfg daemonconfig.Config, reg *backends.Registry, log *slog.Logger) (*transparency.Keys, error) {
	kc := transparency.KeyConfig{Origin: cfg.Log.Origin, Retired: cfg.Log.RetiredKeys}
	uris, byDefault := cfg.LogKeyURIs()
	kc.URIs = uris
	if byDefault {
		if cfg.Store.Postgres() {
			log.Warn("log.keys is empty: this replica signs the transparency log with a key of its own in keys.dir; " +
				"replicas sharing the database must share one log key, or verifiers trust one replica's proofs only: " +
				"make one with `cardsign log key create`, install it on every replica and list it in log.keys")
		}
		path := strings.TrimPrefix(uris[0], file.Scheme+":")
		// There, or unreadable: opening it says which.
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			kc.URIs, kc.MakeAt = nil, path
		}
	}
	return transparency.OpenKeys(ctx, kc, func(ctx context.Context, uri string) (crypto.Signer, string, error) {
		k, err := reg.Open(ctx, uri, backends.OpenOptions{})
		if err != nil {
			return nil, backends.Redact(uri), err
		}
		return k.Signer, backends.Redact(uri), nil
	}, log)
}

// writeLogKey writes the key openLog made, if it did, as a key file.
func writeLogKey(keys *transparency.Keys, log *slog.Logger) error {
	return keys.WriteMade(func(path string, k ed25519.PrivateKey) error { return file.Write(path, k, jose.EdDSA) }, log)
}

// sharedLogKeys is where the replicas sharing st record their log keys
// (transparency.CheckSharedKeys), under a lease held by this start.
func sharedLogKeys(st store.Store) store.LogKeys {
	return store.LogKeys{Store: st, Holder: fmt.Sprintf("cardsignd-start/%d", os.Getpid())}
}
