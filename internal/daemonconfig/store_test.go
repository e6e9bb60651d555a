package daemonconfig

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
)

func TestConfigStore(t *testing.T) {
	dir := t.TempDir()
	private := testsupport.WriteFileMode(t, filepath.Join(dir, "pw"), "s3cret\n", 0o600)
	readable := testsupport.WriteFileMode(t, filepath.Join(dir, "pw-readable"), "s3cret\n", 0o644)
	tests := []struct {
		name, yaml string
		wantErr    []string // every substring must appear; none: valid
	}{
		{"embedded default", "", nil},
		{"postgres URL with libpq parameters", "store:\n  url: postgres://cardsign@db.example.com:5432/cardsign?sslmode=require&application_name=cardsignd&connect_timeout=5\n  max_conns: 20\n", nil},
		{"CA file missing", "store:\n  url: postgres://cardsign@db.example.com/cardsign?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem\n",
			[]string{"c.yaml:2:3: store.url:", "/nonexistent/ca.pem"}},
		{"postgresql scheme, Unix socket, password file", "store:\n  url: postgresql:///cardsign?host=/var/run/postgresql\n  password_file: PRIVATE\n", nil},
		{"replica name", "replica: cardsignd-1.example.com/a\n", nil},
		{"other scheme", "store:\n  url: mysql://cardsign:hunter2@db.example.com/cardsign\n",
			[]string{`c.yaml:2:3: store.url: scheme "mysql" is not postgres or postgresql`, "leave store.url empty"}},
		// docs/replicas.md's forms: what the daemon accepts, validation accepts
		// (one parser, postgres.ParseConfig).
		{"keyword/value string", "store:\n  url: host=db.example.com dbname=cardsign user=cardsign sslmode=verify-full password=hunter2\n", nil},
		{"PgBouncer without prepared statements", "store:\n  url: postgres://cardsign@pgbouncer.example.com:6432/cardsign?sslmode=require&default_query_exec_mode=exec\n", nil},
		{"keyword/value string with a bad sslmode", "store:\n  url: host=db.example.com dbname=cardsign sslmode=sometimes password=hunter2\n",
			[]string{"c.yaml:2:3: store.url: host=db.example.com dbname=cardsign sslmode=sometimes password=xxxxx:", "sslmode", "or a keyword/value string"}},
		{"unknown query exec mode", "store:\n  url: postgres://db.example.com/cardsign?default_query_exec_mode=sometimes\n",
			[]string{"c.yaml:2:3: store.url:", "default_query_exec_mode"}},
		{"bad sslmode", "store:\n  url: postgres://cardsign:hunter2@db.example.com/cardsign?sslmode=sometimes\n",
			[]string{"c.yaml:2:3: store.url: postgres://cardsign:xxxxx@db.example.com/cardsign?sslmode=sometimes:", "sslmode"}},
		{"pool size out of bounds", "store:\n  url: postgres://db.example.com/cardsign\n  max_conns: 0\n",
			[]string{"c.yaml:3:3: store.max_conns: 0 must be between 1 and 1000 (default 8)"}},
		{"pool size too large", "store:\n  url: postgres://db.example.com/cardsign\n  max_conns: 1001\n", []string{"store.max_conns: 1001"}},
		{"PostgreSQL settings without a URL", "store:\n  password_file: PRIVATE\n  max_conns: 4\n",
			[]string{"c.yaml:2:3: store.password_file: applies to PostgreSQL only", "c.yaml:3:3: store.max_conns: applies to PostgreSQL only"}},
		{"missing password file", "store:\n  url: postgres://db.example.com/cardsign\n  password_file: /nonexistent/pw\n",
			[]string{"c.yaml:3:3: store.password_file:", "/nonexistent/pw", "no such file"}},
		{"readable password file", "store:\n  url: postgres://db.example.com/cardsign\n  password_file: READABLE\n",
			[]string{"c.yaml:3:3: store.password_file: READABLE has mode 0644, which lets group or others read the database password; run: chmod 600 READABLE"}},
		{"password in the URL and a password file", "store:\n  url: postgres://cardsign:hunter2@db.example.com/cardsign\n  password_file: PRIVATE\n",
			[]string{"store.password_file: store.url carries a password too"}},
		{"replica name with a space", "replica: my replica\n", []string{"c.yaml:1:1: replica", "spaces or control characters"}},
		{"replica name too long", "replica: " + strings.Repeat("r", 129) + "\n", []string{"replica: is 129 bytes long"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			yml := strings.NewReplacer("PRIVATE", private, "READABLE", readable).Replace(tc.yaml)
			cfg, _, err := loadValidated(t, yml)
			want := make([]string, len(tc.wantErr))
			for i, w := range tc.wantErr {
				want[i] = strings.ReplaceAll(w, "READABLE", readable)
			}
			wantMentions(t, cfg, err, want)
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("a problem shows the password:\n%v", err)
			}
		})
	}
}

func TestStoreDefaults(t *testing.T) {
	c := Defaults()
	if c.Store.URL != "" || c.Store.Postgres() || c.Store.MaxConns != 8 || c.Replica != "" || c.ClockSkew != 0 {
		t.Fatalf("defaults: store %+v, replica %q, clock skew %s", c.Store, c.Replica, c.ClockSkew)
	}
	c.Store.URL = "postgres://cardsign:hunter2@db.example.com/cardsign?sslmode=require"
	pc := c.Store.PostgresConfig(nil)
	if pc.URL != c.Store.URL || pc.MaxConns != 8 {
		t.Errorf("postgres config: %+v", pc)
	}
	if r := c.Store.Redacted(); strings.Contains(r, "hunter2") || !strings.Contains(r, "db.example.com/cardsign") {
		t.Errorf("Redacted() = %q", r)
	}
}

// A password in store.url is allowed, with a warning at start (and in
// --check-config) that never shows it.
func TestStorePasswordInURLWarns(t *testing.T) {
	for _, tc := range []struct {
		url  string
		warn bool
	}{
		{"postgres://cardsign:hunter2@db.example.com/cardsign", true},
		{"postgres://cardsign@db.example.com/cardsign?password=hunter2", true},
		{"postgres://cardsign@db.example.com/cardsign?sslmode=verify-full", false},
		{"", false},
	} {
		c := Defaults()
		c.Store.URL = tc.url
		var logged, printed bytes.Buffer
		c.WarnStore(slog.New(slog.NewTextHandler(&logged, nil)))
		c.reportStoreWarnings(&printed)
		for _, out := range []string{logged.String(), printed.String()} {
			if got := strings.Contains(out, "carries a password"); got != tc.warn {
				t.Errorf("%q: warned %v, want %v:\n%s", tc.url, got, tc.warn, out)
			}
			if strings.Contains(out, "hunter2") {
				t.Errorf("%q: the warning shows the password:\n%s", tc.url, out)
			}
		}
		if tc.warn && !strings.Contains(printed.String(), "warning: store.url: carries a password") {
			t.Errorf("--check-config warning: %s", printed.String())
		}
	}
}

func TestRedactErr(t *testing.T) {
	err := errors.New(`cannot parse "postgres://u:p%40ss@h/db": failed with p@ss and hunter2`)
	got := redactErr(err, "postgres://u:p%40ss@h/db?sslpassword=hunter2")
	if strings.Contains(got, "p@ss") || strings.Contains(got, "p%40ss") || strings.Contains(got, "hunter2") {
		t.Errorf("redactErr left a password: %s", got)
	}
}

func TestApplyEnvClockSkew(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    time.Duration
		wantErr string
	}{
		{"", 0, ""},
		{"30s", 30 * time.Second, ""},
		{"-1m30s", -90 * time.Second, ""},
		{"soon", 0, `CARDSIGND_CLOCK_SKEW: "soon" is not a duration`},
		{"25h", 0, "CARDSIGND_CLOCK_SKEW: 25h0m0s is beyond ±24h0m0s"},
	} {
		c := Defaults()
		err := c.ApplyEnv(func(k string) string {
			if k == ClockSkewEnv {
				return tc.value
			}
			return ""
		})
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want %q", tc.value, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || c.ClockSkew != tc.want):
			t.Errorf("%q: skew %s, %v; want %s", tc.value, c.ClockSkew, err, tc.want)
		}
	}
}

// TestLocatedStoreMessages pins the store section's whole messages.
func TestLocatedStoreMessages(t *testing.T) {
	yml := "store:\n  url: mysql://cardsign:hunter2@db.example.com/cardsign\n  max_conns: 2000\nreplica: \"a\\tb\"\n"
	_, path, err := loadValidated(t, yml)
	want := "invalid configuration:\n  " + strings.ReplaceAll(
		`{f}:2:3: store.url: scheme "mysql" is not postgres or postgresql: give a postgres:// URL (e.g. postgres://cardsign@db.example.com/cardsign?sslmode=verify-full), or leave store.url empty for the embedded SQLite database in data_dir
  {f}:3:3: store.max_conns: 2000 must be between 1 and 1000 (default 8)
  {f}:4:1: replica: "a\tb" has spaces or control characters; use a name such as cardsignd-1 or the host name`, "{f}", path)
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}
