package main

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

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
// when none is configured. It writes nothing; checkSharedLogKeys checks the
// keys against those the replicas sharing the store sign with.
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

// logKeysDocument is the stored document that records the log's origin and
// the verifier keys of the replica that started last, one per line after
// the origin.
const logKeysDocument = "transparency-log-keys"

// checkSharedLogKeys refuses to start a replica whose log keys share none
// with the keys the replicas started before it sign with, for the same
// origin: verifiers would then trust one replica's proofs and not the
// other's. During a rotation the replicas list the old and the new key (they
// share one); a new origin (a new log, e.g. after losing the key) is
// accepted with a warning. Then it records its own origin and keys.
func checkSharedLogKeys(ctx context.Context, st store.Store, s *transparency.Signer, log *slog.Logger) error {
	// Replicas starting at the same time take turns: the loser of the lease
	// or of the write checks again against what the winner recorded.
	for attempt := 1; ; attempt++ {
		err := checkLogKeysOnce(ctx, st, s, log)
		if attempt == 5 || !(errors.Is(err, store.ErrLeaseHeld) || errors.Is(err, store.ErrStaleDocument)) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
}

// checkLogKeysOnce is one attempt of checkSharedLogKeys.
func checkLogKeysOnce(ctx context.Context, st store.Store, s *transparency.Signer, log *slog.Logger) error {
	seq, same, err := compareLogKeys(ctx, st, s, log)
	if err != nil || same {
		return err
	}
	holder := fmt.Sprintf("cardsignd-start/%d", os.Getpid())
	lease, err := st.AcquireLease(ctx, logKeysDocument, holder, 10*time.Second)
	if err != nil {
		return fmt.Errorf("log: record this replica's log keys: %w", err)
	}
	defer func() { _ = st.ReleaseLease(context.WithoutCancel(ctx), lease) }()
	body := strings.Join(append([]string{s.Origin()}, s.SigningKeys()...), "\n") + "\n"
	if err := st.PutDocument(ctx, lease, store.Document{Name: logKeysDocument, Seq: seq + 1, Body: []byte(body)}); err != nil {
		return fmt.Errorf("log: record this replica's log keys: %w", err)
	}
	return nil
}

// compareLogKeys reads, and only reads, the log keys the replica that
// started last recorded: it refuses keys that share none with them under
// the same origin, and reports whether they are the ones recorded (same)
// and the record's sequence number. serve runs it before anything is
// written, then checkSharedLogKeys again to record them.
func compareLogKeys(ctx context.Context, st store.Store, s *transparency.Signer, log *slog.Logger) (seq int64, same bool, err error) {
	doc, err := st.Document(ctx, logKeysDocument)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("log: read the keys the other replicas sign with: %w", err)
	}
	return compareLogKeyDoc(doc, s, log)
}

// compareLogKeyDoc is compareLogKeys over the recorded document, read by
// the caller (precheckStore reads it before the store is opened).
func compareLogKeyDoc(doc store.Document, s *transparency.Signer, log *slog.Logger) (seq int64, same bool, err error) {
	mine := s.SigningKeys()
	seq = doc.Seq
	lines := strings.Split(strings.TrimSpace(string(doc.Body)), "\n")
	origin, theirs := lines[0], lines[1:]
	when := "at an unknown time"
	if !doc.UpdatedAt.IsZero() {
		when = "at " + doc.UpdatedAt.UTC().Format(time.RFC3339)
	}
	if origin != s.Origin() {
		log.Warn("log.origin differs from the one this store's log was signed under: this starts a new log, and monitors of the old one will report an origin change",
			"origin", s.Origin(), "previous_origin", origin)
	} else if !slices.ContainsFunc(mine, func(k string) bool { return slices.Contains(theirs, k) }) {
		return 0, false, fmt.Errorf("log.keys: the replica that started last (%s) signs the transparency log %s with %s, and none of this replica's keys (%s) is among them: "+
			"replicas sharing a store must sign with the same log key, or verifiers trust some replicas' proofs and not others'; "+
			"install that key here, or, to rotate, list the old key beside the new one on every replica first (a lost key: start a new log under a new log.origin)",
			when, origin, strings.Join(theirs, ", "), strings.Join(mine, ", "))
	}
	if origin == s.Origin() && slices.Equal(theirs, mine) {
		return seq, true, nil
	}
	return seq, false, nil
}
