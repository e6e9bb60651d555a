package transparency

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"strings"
)

// KeyConfig is where the log's keys come from: the daemon's log section.
type KeyConfig struct {
	// Origin names the log (log.origin).
	Origin string
	// URIs are the log's keys (log.keys), opened with the KeyOpener; the
	// first signs, the others are published for verifiers.
	URIs []string
	// Retired are the verifier keys of retired log keys
	// (log.retired_keys): kept out of what is published.
	Retired []string
	// MakeAt, when not empty, is the file of the embedded default's key,
	// which is missing (the first start): OpenKeys makes a key in its
	// place, in memory, and Keys.WriteMade writes it there. URIs is then
	// empty.
	MakeAt string
}

// KeyOpener opens the log key at uri (a key file, an HSM or KMS key),
// wherever it lives; name is uri as errors and logs may show it.
type KeyOpener func(ctx context.Context, uri string) (signer crypto.Signer, name string, err error)

// Keys is the log's signer once its keys are open, with the embedded
// default's key if this start made it: held in memory until WriteMade, so a
// start refused before then leaves no key file behind.
type Keys struct {
	Signer *Signer
	made   ed25519.PrivateKey // nil: every key was there
	path   string             // where made goes
}

// OpenKeys opens the log's keys as cfg says, making the embedded default's
// key (in memory) when cfg.MakeAt says to. It writes nothing;
// CheckSharedKeys checks the keys against those of the replicas sharing the
// store.
func OpenKeys(ctx context.Context, cfg KeyConfig, open KeyOpener, log *slog.Logger) (*Keys, error) {
	lk := &Keys{}
	var keys []crypto.Signer
	if cfg.MakeAt != "" {
		k, err := GenerateKey()
		if err != nil {
			return nil, fmt.Errorf("log: make a key: %w", err)
		}
		lk.made, lk.path = k, cfg.MakeAt
		keys = append(keys, k)
	}
	for i, uri := range cfg.URIs {
		k, name, err := open(ctx, uri)
		if err != nil {
			return nil, fmt.Errorf("log.keys[%d]: open %s: %w", i, name, err)
		}
		if _, ok := k.Public().(ed25519.PublicKey); !ok {
			return nil, fmt.Errorf("log.keys[%d]: %s holds a %T, not an Ed25519 key; the log signs checkpoints with Ed25519 (make one with `cardsign log key create`)", i, name, k.Public())
		}
		keys = append(keys, k)
	}
	s, err := NewSigner(cfg.Origin, keys...)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	if err := s.Retire(cfg.Retired...); err != nil {
		return nil, fmt.Errorf("log.retired_keys: %w", err)
	}
	lk.Signer = s
	log.Info("transparency log ready", "origin", s.Origin(), "keys", strings.Join(s.VerifierKeys(), " "))
	return lk, nil
}

// WriteMade puts the key OpenKeys made, if it did, at its path with write
// (a key file writer: 0600, never over an existing file). Another process
// that started at the same time may have written its own there first: this
// one then stops, as its log key is not the one on disk (the next start
// uses that one).
func (lk *Keys) WriteMade(write func(path string, key ed25519.PrivateKey) error, log *slog.Logger) error {
	if lk.made == nil {
		return nil
	}
	if err := write(lk.path, lk.made); err != nil {
		return fmt.Errorf("log: write the log key %s: %w", lk.path, err)
	}
	vkey, _ := VerifierKey(lk.Signer.Origin(), lk.made.Public())
	log.Info("made the transparency log's key (log.keys is empty); back it up: losing it means starting a new log", "path", lk.path, "verifier_key", vkey)
	return nil
}
