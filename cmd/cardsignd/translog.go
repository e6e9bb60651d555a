package main

import (
	"context"
	"crypto"
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
	"github.com/cardsign/cardsign/transparency"
)

// openLog opens the transparency log's keys (log.keys), making the embedded
// default's key in keys.dir at the first start when none is configured.
func openLog(ctx context.Context, cfg daemonconfig.Config, reg *backends.Registry, log *slog.Logger) (*transparency.Signer, error) {
	uris, byDefault := cfg.LogKeyURIs()
	if byDefault {
		if cfg.Store.Postgres() {
			log.Warn("log.keys is empty: this replica signs the transparency log with a key of its own in keys.dir; " +
				"replicas sharing the database must share one log key, or verifiers trust one replica's proofs only: " +
				"make one with `cardsign log key create`, install it on every replica and list it in log.keys")
		}
		if err := makeLogKey(strings.TrimPrefix(uris[0], file.Scheme+":"), cfg.Log.Origin, log); err != nil {
			return nil, err
		}
	}
	var keys []crypto.Signer
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
	log.Info("transparency log ready", "origin", s.Origin(), "keys", strings.Join(s.VerifierKeys(), " "))
	return s, nil
}

// makeLogKey writes a new Ed25519 log key at path unless a file is there.
func makeLogKey(path, origin string, log *slog.Logger) error {
	if _, err := os.Stat(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil // there, or unreadable: opening it says which
	}
	k, err := transparency.GenerateKey()
	if err != nil {
		return fmt.Errorf("log: make a key: %w", err)
	}
	if err := file.Write(path, k, jose.EdDSA); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("log: write the log key %s: %w", path, err)
	}
	vkey, _ := transparency.VerifierKey(origin, k.Public())
	log.Info("made the transparency log's key (log.keys is empty); back it up: losing it means starting a new log", "path", path, "verifier_key", vkey)
	return nil
}
