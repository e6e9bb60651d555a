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
	Origin string   `yaml:"origin"`
	Keys   []string `yaml:"keys"`
	// RetiredKeys are verifier keys (ORIGIN+HASH+BASE64) of log keys that
	// no longer sign: still published and verified with, so cards whose
	// proofs they signed keep verifying after a rotation.
	RetiredKeys []string `yaml:"retired_keys"`
	// Private says what a private agent's entries show of its caller, card
	// name and hosts: "sealed" (the default: salted commitments its owner
	// can check) or "open" (the values themselves).
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
