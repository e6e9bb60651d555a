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

// logKeys is the transparency log's signer, and the embedded default's log
// key when this start made it: held in memory until write, so a start
// refused before then leaves no key file behind.
type logKeys struct {
	signer *transparency.Signer
	made   ed25519.PrivateKey // nil: every key was there
	path   string             // where made goes
	origin string
}

// openLog opens the transparency log's keys (log.keys), making the embedded
// default's key (in memory; write puts it in keys.dir) at the first start
// when none is configured. It writes nothing; transparency.CheckSharedKeys checks
// the keys against those the replicas sharing the store sign with.
func openLog(ctx context.Context, cfg daemonconfig.Config, reg *backends.Registry, log *slog.Logger) (*logKeys, error) {
	lk := &logKeys{origin: cfg.Log.Origin}
	uris, byDefault := cfg.LogKeyURIs()
	if byDefault {
		if cfg.Store.Postgres() {
			log.Warn("log.keys is empty: this replica signs the transparency log with a key of its own in keys.dir; " +
				"replicas sharing the database must share one log key, or verifiers trust one replica's proofs only: " +
				"make one with `cardsign log key create`, install it on every replica and list it in log.keys")
		}
		path := strings.TrimPrefix(uris[0], file.Scheme+":")
		// There, or unreadable: opening it says which.
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			k, err := transparency.GenerateKey()
			if err != nil {
				return nil, fmt.Errorf("log: make a key: %w", err)
			}
			lk.made, lk.path = k, path
			uris = nil
		}
	}
	var keys []crypto.Signer
	if lk.made != nil {
		keys = append(keys, lk.made)
	}
	for i, uri := range uris {
		k, err := reg.Open(ctx, uri, backends.OpenOptions{})
		if err != nil {
			return nil, fmt.Errorf("log.keys[%d]: open %s: %w", i, backends.Redact(uri), err)
		}
		if k.Alg != jose.EdDSA {
			return nil, fmt.Errorf("log.keys[%d]: %s is a %s key; the log signs checkpoints with Ed25519 (make one with `cardsign log key create`)", i, backends.Redact(uri), k.Alg)
		}
		keys = append(keys, k.Signer)
	}
	s, err := transparency.NewSigner(cfg.Log.Origin, keys...)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	if err := s.Retire(cfg.Log.RetiredKeys...); err != nil {
		return nil, fmt.Errorf("log.retired_keys: %w", err)
	}
	lk.signer = s
	log.Info("transparency log ready", "origin", s.Origin(), "keys", strings.Join(s.VerifierKeys(), " "))
	return lk, nil
}

// write puts the log key openLog made, if it did, at its path in keys.dir.
// Another process that started at the same time may have written its own
// there first: this one then stops, as its log key is not the one on disk
// (the next start uses that one).
func (lk *logKeys) write(log *slog.Logger) error {
	if lk.made == nil {
		return nil
	}
	if err := file.Write(lk.path, lk.made, jose.EdDSA); err != nil {
		return fmt.Errorf("log: write the log key %s: %w", lk.path, err)
	}
	vkey, _ := transparency.VerifierKey(lk.origin, lk.made.Public())
	log.Info("made the transparency log's key (log.keys is empty); back it up: losing it means starting a new log", "path", lk.path, "verifier_key", vkey)
	return nil
}

// sharedLogKeys is where the replicas sharing st record their log keys
// (transparency.CheckSharedKeys), under a lease held by this start.
func sharedLogKeys(st store.Store) store.LogKeys {
	return store.LogKeys{Store: st, Holder: fmt.Sprintf("cardsignd-start/%d", os.Getpid())}
}
