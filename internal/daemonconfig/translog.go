package daemonconfig

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/transparency"
)

// LogConfig is the transparency log's: its origin (the name in every
// checkpoint, and of its keys) and the Ed25519 keys that sign its
// checkpoints, as key URIs ("file:/path/log-key.pem", or a pkcs11: URI).
// Every key listed signs every checkpoint: to rotate, add the new key,
// publish it (it is served at /.well-known/cardsign-log-key) and let
// verifiers learn it, then drop the old one.
type LogConfig struct {
	// The log's name: the first line of every checkpoint and the name of
	// its keys. A URL without scheme (no ://, no space, no +); name a log
	// others rely on for where it is served, e.g. cardsign.example.com/log.
	// Changing it is accepted with a warning: it starts a new log (the way
	// out of a lost key), and monitors of the old one report the change.
	Origin string `yaml:"origin"`
	// Ed25519 key URIs (file:, pkcs11:, gcpkms: EC_SIGN_ED25519, awskms:
	// ECC_NIST_EDWARDS25519) that sign the log's checkpoints; every key
	// listed signs every checkpoint (to rotate: add the new one, wait for
	// verifiers to learn it, drop the old). With store.url, set it
	// (cardsignd warns otherwise): replicas share one log, so they must
	// share its key (cardsign log key create, or one KMS key). A replica
	// whose keys share none with those the log was signed with before,
	// under the same origin, refuses to start and says so. The first key
	// also derives the private agents' salts (log.private): keep it first
	// through a rotation until it is retired. Losing the keys means
	// starting a new log under a new key: back them up like the database.
	Keys []string `yaml:"keys"`
	// Verifier keys (ORIGIN+HASH+BASE64, as cardsign log key show prints
	// them) of log keys that no longer sign: still served at
	// /.well-known/cardsign-log-key and used by VerifyCard, so the proofs in
	// cards made before a rotation keep verifying. Named for log.origin.
	RetiredKeys []string `yaml:"retired_keys"`
	// What a private agent's log entries show of its caller, card name and
	// hosts: sealed (salted commitments its owner checks with the agent's
	// salt from GET /agents/{id}/log-salt) or open (the values). What stays
	// public of a sealed entry: that it exists, its time, outcome, card
	// version, canonical SHA-256, kid, alg, profile and signature, and how
	// many hosts the card names. Its owner finds its entries with cardsign
	// log monitor --watch NAME|HOST --salt HEX.
	Private string `yaml:"private"`
}

// DefaultLogOrigin is the origin of the embedded default's log. A log
// verifiers outside this machine rely on should be named for where it is
// served, e.g. "cardsign.example.com/log".
const DefaultLogOrigin = "cardsign.localhost/log"

// DefaultLogKeyName is the file, in keys.dir, of the log key cardsignd makes
// at its first start when log.keys is empty.
const DefaultLogKeyName = "transparency-log.pem"

// LogKeyURIs are the log's key URIs: log.keys, or the key cardsignd makes in
// keys.dir when none is configured. made reports the latter.
func (c Config) LogKeyURIs() (uris []string, made bool) {
	if len(c.Log.Keys) > 0 {
		return c.Log.Keys, false
	}
	return []string{"file:" + filepath.Join(c.Keys.Dir, DefaultLogKeyName)}, true
}

// validateLog checks the log section.
func validateLog(c *Config, bad reporter) {
	if err := transparency.CheckOrigin(c.Log.Origin); err != nil {
		bad("log.origin", "%v", err)
	}
	if p := c.Log.Private; p != "" && p != "sealed" && p != "open" {
		bad("log.private", "%q is not sealed (the default: a private agent's entries commit to its caller, card name and hosts) or open (they show them)", p)
	}
	seen := map[string]bool{}
	for i, uri := range c.Log.Keys {
		if _, err := backends.Scheme(uri); err != nil {
			bad(fmt.Sprintf("log.keys[%d]", i), "%v", err)
		}
		if seen[uri] {
			bad(fmt.Sprintf("log.keys[%d]", i), "%s is listed twice", backends.Redact(uri))
		}
		seen[uri] = true
	}
	for i, k := range c.Log.RetiredKeys {
		vs, err := transparency.ParseVerifierKeys(k)
		switch {
		case err != nil:
			bad(fmt.Sprintf("log.retired_keys[%d]", i), "%v", err)
		case len(vs) != 1 || strings.Contains(k, "\n"):
			bad(fmt.Sprintf("log.retired_keys[%d]", i), "one verifier key per entry")
		case vs[0].Name() != c.Log.Origin:
			bad(fmt.Sprintf("log.retired_keys[%d]", i), "the key is named %q, not log.origin %q", vs[0].Name(), c.Log.Origin)
		}
	}
}
