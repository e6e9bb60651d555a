package daemonconfig

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

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
	// C2SP tlog-witness witnesses asked to cosign each new checkpoint (the
	// replica holding the duties lease asks them, in parallel, with a
	// consistency proof from the size each last saw). Register the log at
	// each witness first: its origin and the verifier keys of log.keys
	// (cardsign log key show). Cosigned checkpoints are served at
	// /log/checkpoint and carried by the proofs in signed cards, so
	// verifiers that require a quorum of these witnesses
	// (cardsign verify --witness KEY --witness-quorum K) detect a split view
	// of the log offline. A witness that is down or slow never holds
	// signing back longer than log.witness_wait.timeout.
	Witnesses []WitnessConfig `yaml:"witnesses"`
	// How many of log.witnesses must cosign a checkpoint for it to count as
	// witnessed (for log.witness_wait and /log/checkpoint). Default: a
	// majority of the witnesses listed.
	WitnessPolicy WitnessPolicyConfig `yaml:"witness_policy"`
	// What signing does until a checkpoint that includes its signatures
	// reaches the quorum.
	WitnessWait WitnessWaitConfig `yaml:"witness_wait"`
	// The longest one add-checkpoint request to a witness may take, from
	// connecting to the last byte of its answer; a witness that takes longer
	// is asked again later, with backoff. Default 5s.
	WitnessTimeout time.Duration `yaml:"witness_timeout"`
}

// WitnessConfig is a witness of the log (C2SP tlog-witness).
type WitnessConfig struct {
	// The witness's URL prefix, http or https: add-checkpoint is POSTed to
	// URL/add-checkpoint. Its answers are signed, so plain http cannot
	// forge a cosignature, only withhold one.
	URL string `yaml:"url"`
	// The witness's verifier key, NAME+HASH+BASE64 (cosignature/v1 Ed25519,
	// as litewitness and the witness network print it; a plain Ed25519
	// note key is read as its cosignature/v1 form). Its name is the
	// witness's name in cosignature lines.
	Key string `yaml:"key"`
	// The witness's name; optional, and when given it must be the key's.
	Name string `yaml:"name"`
	// PEM certificates trusted, instead of the system's roots, for an https
	// URL.
	CAFile string `yaml:"ca_file"`
}

// WitnessPolicyConfig is the quorum of witnesses a checkpoint needs.
type WitnessPolicyConfig struct {
	// At least this many of log.witnesses. Default: a majority (n/2+1).
	Quorum int `yaml:"quorum"`
}

// WitnessWaitConfig is what signing does until its checkpoint is witnessed.
type WitnessWaitConfig struct {
	// none: return at once, with the newest witnessed checkpoint if it
	// already includes the signatures, else the newest checkpoint without
	// cosignatures (cardsign log proof refresh replaces such a proof
	// later). wait (the default): wait up to timeout
	// for the quorum, then return without it (counted in
	// cardsign_log_unwitnessed_proofs_total and logged). require: wait up to
	// timeout, then refuse the request with UNAVAILABLE; the signature was
	// made and logged (its audit record names it) but is not returned.
	Mode string `yaml:"mode"`
	// The longest signing waits for the quorum. Default 3s.
	Timeout time.Duration `yaml:"timeout"`
}

// The witness defaults.
const (
	DefaultWitnessTimeout = 5 * time.Second
	DefaultWitnessWait    = 3 * time.Second
)

// WitnessPolicyOf is log.witnesses as a quorum policy (checked by Validate).
func (c LogConfig) WitnessPolicyOf() (transparency.WitnessPolicy, error) {
	if len(c.Witnesses) == 0 {
		return transparency.WitnessPolicy{}, nil
	}
	keys := make([]string, len(c.Witnesses))
	for i, w := range c.Witnesses {
		keys[i] = w.Key
	}
	return transparency.NewWitnessPolicy(keys, c.WitnessQuorum())
}

// WitnessQuorum is log.witness_policy.quorum, or its default.
func (c LogConfig) WitnessQuorum() int {
	if c.WitnessPolicy.Quorum != 0 {
		return c.WitnessPolicy.Quorum
	}
	return len(c.Witnesses)/2 + 1
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
		if reason := backends.Unpinned(uri); reason != "" {
			bad(fmt.Sprintf("log.keys[%d]", i), "%s", reason)
		}
		seen[uri] = true
	}
	validateWitnesses(c.Log, bad)
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

// validateWitnesses checks log.witnesses and what goes with them.
func validateWitnesses(l LogConfig, bad reporter) {
	names := map[string]int{}
	for i, w := range l.Witnesses {
		field := fmt.Sprintf("log.witnesses[%d]", i)
		k, err := transparency.ParseWitnessKey(w.Key)
		switch {
		case w.Key == "":
			bad(field+".key", "is required: the witness's verifier key NAME+HASH+BASE64, as the witness prints it")
		case err != nil:
			bad(field+".key", "%v", err)
		case w.Name != "" && w.Name != k.Name:
			bad(field+".name", "%q is not the key's name %q: a witness's cosignatures carry its key's name", w.Name, k.Name)
		default:
			if j, dup := names[k.Name]; dup {
				bad(field+".key", "witness %q is listed twice (also log.witnesses[%d])", k.Name, j)
			}
			names[k.Name] = i
		}
		u, err := url.Parse(w.URL)
		switch {
		case w.URL == "":
			bad(field+".url", "is required: the witness's URL prefix (add-checkpoint is POSTed to URL/add-checkpoint)")
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			bad(field+".url", "%q is not an http(s) URL prefix with a host (no query, fragment or user)", w.URL)
		}
		if w.CAFile != "" {
			if u != nil && u.Scheme != "https" {
				bad(field+".ca_file", "is for an https URL")
			}
			if _, err := os.Stat(w.CAFile); err != nil {
				bad(field+".ca_file", "%v", err)
			}
		}
	}
	n := len(l.Witnesses)
	if q := l.WitnessPolicy.Quorum; q != 0 && (q < 1 || q > n) {
		bad("log.witness_policy.quorum", "%d: want 1 to the %d witnesses listed in log.witnesses", q, n)
	}
	switch l.WitnessWait.Mode {
	case "none", "wait", "require":
	default:
		bad("log.witness_wait.mode", "%q is not none, wait (the default) or require", l.WitnessWait.Mode)
	}
	if t := l.WitnessWait.Timeout; t <= 0 || t > 5*time.Minute {
		bad("log.witness_wait.timeout", "%s: want more than 0 (default %s) up to 5m", t, DefaultWitnessWait)
	}
	if t := l.WitnessTimeout; t <= 0 || t > 5*time.Minute {
		bad("log.witness_timeout", "%s: want more than 0 (default %s) up to 5m", t, DefaultWitnessTimeout)
	}
}
