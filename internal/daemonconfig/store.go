package daemonconfig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/cardsign/cardsign/secretfile"
	"github.com/cardsign/cardsign/store/postgres"
)

// StoreConfig chooses the durable state: the embedded SQLite database in
// data_dir (URL empty, the default) or a PostgreSQL database that several
// replicas share.
type StoreConfig struct {
	// The PostgreSQL database several replicas share: a postgres:// or
	// postgresql:// URL, or a keyword/value string (host=… dbname=…);
	// sslmode, sslrootcert, the other libpq parameters and pgx's
	// default_query_exec_mode pass through (--check-config reads it with
	// the daemon's own parser and connects). A password in it works but is
	// warned about at start (it sits in the config file); it is never
	// logged (log lines and messages show it as xxxxx). Every libpq
	// parameter pgx supports works, several hosts included
	// (postgres://h1,h2/cardsign?target_session_attrs=read-write). sslmode
	// is honoured as libpq does: the default, prefer, does not check the
	// server, so use verify-full with sslrootcert across a network. Set,
	// every replica shares one database: one key set, one audit log, one
	// revocation document; cardsignd creates and upgrades its tables at
	// start.
	URL string `yaml:"url"`
	// A file holding the database password (one trailing newline is
	// trimmed), read once at start; refused when group or others can read
	// it (chmod 600).
	// Without it: the URL's password, PGPASSWORD, or PGPASSFILE (default
	// ~/.pgpass), as with libpq.
	PasswordFile string `yaml:"password_file"`
	// Connections in each replica's pool (1 to 1000). Each replica also
	// holds one connection for change notifications (LISTEN), and briefly
	// up to 3 more while it applies migrations at start: size the server's
	// max_connections for replicas × (max_conns + 4).
	MaxConns int `yaml:"max_conns"`
}

// Postgres reports whether the store is a PostgreSQL database.
func (c StoreConfig) Postgres() bool { return c.URL != "" }

// Redacted is URL without its password, for logs and messages: the only
// form in which the URL leaves the process.
func (c StoreConfig) Redacted() string { return postgres.Redact(c.URL) }

// URLHasPassword reports whether URL carries a password itself (it then sits
// in the config file, which is worth a warning).
func (c StoreConfig) URLHasPassword() bool { return postgres.HasPassword(c.URL) }

// PostgresConfig is what postgres.Open takes.
func (c StoreConfig) PostgresConfig(log *slog.Logger) postgres.Config {
	return postgres.Config{URL: c.URL, PasswordFile: c.PasswordFile, MaxConns: int32(c.MaxConns), Log: log}
}

// Bounds of store.max_conns.
const (
	DefaultStoreMaxConns = postgres.DefaultMaxConns
	maxStoreMaxConns     = 1000
)

// validateStore checks the store section and the replica name.
func validateStore(c *Config, bad reporter) {
	s := c.Store
	if s.URL == "" {
		// Settings that only mean something for PostgreSQL, set in the
		// file while the embedded database is in use: the operator
		// believes the daemon is on PostgreSQL.
		for _, f := range []string{"store.password_file", "store.max_conns"} {
			if _, set := c.positions[f]; set {
				bad(f, "applies to PostgreSQL only, and store.url is not set (the embedded SQLite database in data_dir is in use); set store.url, or remove %s", f)
			}
		}
	} else {
		validateStoreURL(bad, s)
	}
	if s.MaxConns < 1 || s.MaxConns > maxStoreMaxConns {
		bad("store.max_conns", "%d must be between 1 and %d (default %d)", s.MaxConns, maxStoreMaxConns, DefaultStoreMaxConns)
	}
	if s.PasswordFile != "" {
		if problem := passwordFileProblem(s.PasswordFile); problem != "" {
			bad("store.password_file", "%s", problem)
		}
	}
	if c.Replica != "" {
		switch {
		case len(c.Replica) > 128:
			bad("replica", "is %d bytes long; at most 128", len(c.Replica))
		case strings.IndexFunc(c.Replica, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0:
			bad("replica", "%q has spaces or control characters; use a name such as cardsignd-1 or the host name", c.Replica)
		}
	}
}

// urlScheme matches the scheme of a URL, to tell a URL of another database
// from a keyword/value string.
var urlScheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// validateStoreURL checks a PostgreSQL URL or keyword/value string as the
// daemon will read it (postgres.ParseConfig, the one parser), without
// connecting. Messages never carry the password.
func validateStoreURL(bad reporter, s StoreConfig) {
	if m := urlScheme.FindStringSubmatch(s.URL); m != nil && !postgres.IsURL(s.URL) {
		bad("store.url", "scheme %q is not postgres or postgresql: give a postgres:// URL (e.g. postgres://cardsign@db.example.com/cardsign?sslmode=verify-full), "+
			"or leave store.url empty for the embedded SQLite database in data_dir", m[1])
		return
	}
	// The password file is checked on its own, at store.password_file.
	// pgx's parse errors redact the password themselves; the redacted URL
	// is what is shown besides.
	if _, err := postgres.ParseConfig(postgres.Config{URL: s.URL}); err != nil {
		bad("store.url", "%s: %v (give a postgres:// URL, e.g. postgres://cardsign@db.example.com/cardsign?sslmode=verify-full, "+
			"or a keyword/value string, e.g. host=db.example.com dbname=cardsign user=cardsign sslmode=verify-full)",
			postgres.Redact(s.URL), redactErr(err, s.URL))
		return
	}
	if s.PasswordFile != "" && s.URLHasPassword() {
		bad("store.password_file", "store.url carries a password too: keep the password in one place (remove it from store.url)")
	}
}

// redactErr is err's message with any password of rawURL masked, whatever
// the error quotes.
func redactErr(err error, rawURL string) string {
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil {
		if p, ok := u.User.Password(); ok && p != "" {
			// As decoded, as Go escapes it, and as written in the URL.
			written := ""
			if _, rest, ok := strings.Cut(rawURL, "://"); ok {
				if at := strings.LastIndexByte(rest, '@'); at >= 0 {
					_, written, _ = strings.Cut(rest[:at], ":")
				}
			}
			_, escaped, _ := strings.Cut(u.User.String(), ":")
			for _, s := range []string{p, escaped, written} {
				if s != "" {
					msg = strings.ReplaceAll(msg, s, "xxxxx")
				}
			}
		}
		for k, vs := range u.Query() {
			if strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword") {
				for _, v := range vs {
					if v != "" {
						msg = strings.ReplaceAll(msg, v, "xxxxx")
					}
				}
			}
		}
	}
	return msg
}

// passwordFileProblem checks the password file as postgres.Open will read
// it: a readable regular file that group and others cannot read, no larger
// than a password file. It is opened without blocking (a FIFO would wait
// for a writer forever) and not read.
func passwordFileProblem(path string) string {
	f, fi, err := secretfile.Open(path, 0)
	if err != nil {
		return err.Error() // names the file
	}
	f.Close()
	if fi.Mode().Perm()&0o044 != 0 {
		return fmt.Sprintf("%s has mode %04o, which lets group or others read the database password; run: chmod 600 %s",
			path, fi.Mode().Perm(), path)
	}
	if fi.Size() > postgres.MaxPasswordFile {
		return fmt.Sprintf("%s is %d bytes long: a password file holds the password only (at most %d bytes)", path, fi.Size(), postgres.MaxPasswordFile)
	}
	return ""
}

// storeWarnings are what is allowed but unwise in the store section: a
// password inside store.url, which then sits in the config file.
func (c *Config) storeWarnings() []Problem {
	if c.Store.URL != "" && c.Store.URLHasPassword() {
		return []Problem{{Path: "store.url", Message: "carries a password, which then sits in the config file (and in every copy of it): " +
			"put it in store.password_file (mode 0600) or PGPASSFILE instead"}}
	}
	return nil
}

// WarnStore logs storeWarnings at start.
func (c *Config) WarnStore(log *slog.Logger) {
	for _, w := range c.storeWarnings() {
		log.Warn("store.url carries a password", "field", w.Path, "problem", w.Message, "database", c.Store.Redacted())
	}
}

// reportStoreWarnings prints storeWarnings for --check-config.
func (c *Config) reportStoreWarnings(w io.Writer) {
	for _, p := range c.storeWarnings() {
		fmt.Fprintf(w, "warning: %s: %s\n", p.Path, p.Message)
	}
}

// ClockSkewEnv names the environment variable that adds a duration to the
// host clock (server.Config.ClockSkew). It is a test knob: the tests start a
// replica whose clock is wrong, to check that times come from the
// database's clock. Production leaves it unset.
const ClockSkewEnv = "CARDSIGND_CLOCK_SKEW"

// maxClockSkew bounds ClockSkewEnv: more is a typo.
const maxClockSkew = 24 * time.Hour

// ApplyEnv reads the settings that come from the environment (getenv, e.g.
// os.Getenv): ClockSkewEnv.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	v := getenv(ClockSkewEnv)
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%s: %q is not a duration such as 30s or -1m: %v", ClockSkewEnv, v, err)
	}
	if d > maxClockSkew || d < -maxClockSkew {
		return fmt.Errorf("%s: %s is beyond ±%s", ClockSkewEnv, d, maxClockSkew)
	}
	c.ClockSkew = d
	return nil
}

// storeConnectTimeout bounds --check-config's connection attempt.
const storeConnectTimeout = 5 * time.Second

// checkStoreConnection is --check-config's look at the database of
// store.url: it connects (with the password file applied) within
// storeConnectTimeout, runs a query and reports the schema version (a
// newer one than this binary's is a problem), applying no migration. Lines for
// the operator go to w; a failure is a problem at store.url.
func (c *Config) checkStoreConnection(ctx context.Context, w io.Writer) *Error {
	where := c.Store.Redacted()
	problem := func(format string, args ...any) *Error {
		return &Error{File: c.file, positions: c.positions, Problems: []Problem{{Path: "store.url", Message: fmt.Sprintf(format, args...)}}}
	}
	// The daemon's own parser and connection (postgres.Open's), password
	// file applied: what connects here connects at start.
	version, err := postgres.Probe(ctx, c.Store.PostgresConfig(nil), storeConnectTimeout)
	var pe *postgres.ProbeError
	switch {
	case errors.As(err, &pe) && !pe.Connected:
		return problem("cannot connect to %s within %s (is the server running, and are the host, port, sslmode and password right?): %s",
			where, storeConnectTimeout, redactErr(err, c.Store.URL))
	case errors.As(err, &pe):
		return problem("connected to %s, but a query failed: %s", where, redactErr(err, c.Store.URL))
	case err != nil:
		return problem("%s: %s", where, redactErr(err, c.Store.URL))
	}
	schema, err := postgres.CheckSchema(ctx, c.Store.PostgresConfig(nil))
	if err != nil {
		return problem("connected to %s, but reading its schema version failed: %s", where, redactErr(err, c.Store.URL))
	}
	if schema.Refused() {
		return problem("%s: schema %s", where, schema)
	}
	fmt.Fprintf(w, "store.url: connected to %s (PostgreSQL %s); schema %s\n",
		where, version, schema)
	return nil
}
