package postgres

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/pgtest"
	"github.com/cardsign/cardsign/store"
)

func TestIsURL(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"postgres://h/db", true},
		{"postgresql://u:p@h:5432/db?sslmode=require", true},
		{"POSTGRES://h/db", true},
		{"host=h dbname=db", false},
		{"/var/lib/cardsign/cardsign.db", false},
		{"cardsign.db", false},
		{"postgres:/h", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsURL(tt.in); got != tt.want {
			t.Errorf("IsURL(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"postgres://u:s3cret@h:5432/db?sslmode=require", "postgres://u:xxxxx@h:5432/db?sslmode=require"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgresql://h/db?password=s3cret&sslmode=disable", "postgresql://h/db?password=xxxxx&sslmode=disable"},
		{"postgres://h/db?sslpassword=s3cret", "postgres://h/db?sslpassword=xxxxx"},
		// The rest of the query as written: not sorted, not percent-encoded.
		{"postgres://u@/db?sslmode=disable&host=/var/run/postgresql&Password=s3cret", "postgres://u@/db?sslmode=disable&host=/var/run/postgresql&Password=xxxxx"},
		{"postgres://u@h/db?application_name=card sign&sslmode=require", "postgres://u@h/db?application_name=card sign&sslmode=require"},
		{"postgres://u:s3cret@h1:5432,h2:5433/db", "postgres://u:xxxxx@h1:5432,h2:5433/db"},
		{"host=h user=u password=s3cret dbname=db", "host=h user=u password=xxxxx dbname=db"},
		{"host=h password='s3 cret' dbname=db", "host=h password=xxxxx dbname=db"},
		{"host=h sslpassword=s3cret", "host=h sslpassword=xxxxx"},
		{"host=h password = s3cret", "host=h password=xxxxx"},
		// Not a valid URL (a space in the host): still no password.
		{"postgres://u:s3cret@h h/db", "postgres://xxxxx@h h/db"},
	}
	for _, tt := range tests {
		got := Redact(tt.in)
		if got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "s3") {
			t.Errorf("Redact(%q) = %q keeps the password", tt.in, got)
		}
	}
}

func writeFile(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

// TestPasswordFile opens a real database with the password from a file, and
// checks the refusals say what is wrong without the password.
func TestPasswordFile(t *testing.T) {
	url := newDB(t)
	db := dbName(t, url)
	bare := cluster.URLWithoutPassword(db)
	pw := cluster.Password()
	t.Setenv("PGPASSFILE", os.DevNull) // no ~/.pgpass of the machine's
	tests := []struct {
		name    string
		url     string
		content string
		mode    os.FileMode
		wantErr string // "" for success
	}{
		{"newline", bare, pw + "\n", 0o600, ""},
		{"CRLF", bare, pw + "\r\n", 0o400, ""},
		{"no newline", bare, pw, 0o600, ""},
		{"group readable", bare, pw + "\n", 0o640, "chmod 600"},
		{"world readable", bare, pw + "\n", 0o604, "chmod 600"},
		{"empty", bare, "", 0o600, "is empty"},
		{"two lines", bare, pw + "\nmore\n", 0o600, "more than one line"},
		{"password in the URL too", url, pw + "\n", 0o600, "keep the password in one place"},
		{"wrong password", bare, "not-" + pw + "\n", 0o600, "password authentication failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "password", tt.content, tt.mode)
			s, err := Open(t.Context(), Config{URL: tt.url, PasswordFile: path})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer s.Close()
				if _, err := s.ListKeys(t.Context()); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded, want an error saying %q", tt.wantErr)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.wantErr) {
				t.Errorf("error %q does not say %q", msg, tt.wantErr)
			}
			if strings.Contains(msg, pw) {
				t.Errorf("error %q holds the password", msg)
			}
			if tt.mode&0o044 != 0 && !strings.Contains(msg, path) {
				t.Errorf("error %q does not name the file", msg)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nothing")
		if _, err := Open(t.Context(), Config{URL: bare, PasswordFile: path}); err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("Open with a missing password file: %v", err)
		}
	})
}

// TestPGPASSFILE: without a password file, libpq's password file is read, as
// pgx does.
func TestPGPASSFILE(t *testing.T) {
	url := newDB(t)
	db := dbName(t, url)
	line := fmt.Sprintf("127.0.0.1:%d:%s:%s:%s\n", cluster.Port(), db, pgtest.Role, cluster.Password())
	t.Setenv("PGPASSFILE", writeFile(t, "pgpass", line, 0o600))
	s := openT(t, cluster.URLWithoutPassword(db))
	if _, err := s.Now(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestOpenUnreachable: a server that is not there is reported as such, with
// the URL but not its password, and as store.ErrUnavailable.
func TestOpenUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	url := "postgres://u:s3cret@" + addr + "/db?sslmode=disable&connect_timeout=5"
	_, err = Open(t.Context(), Config{URL: url})
	if err == nil {
		t.Fatal("Open succeeded")
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("error %v is not store.ErrUnavailable", err)
	}
	if msg := err.Error(); strings.Contains(msg, "s3cret") || !strings.Contains(msg, addr) || !strings.Contains(msg, "cannot reach PostgreSQL") {
		t.Errorf("error %q: want it to name %s, say it cannot reach PostgreSQL, and hide the password", msg, addr)
	}
}

func TestConfigRefusals(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no URL", Config{}, "no database URL"},
		{"negative max_conns", Config{URL: "postgres://h/db", MaxConns: -1}, "max_conns"},
		{"unparsable", Config{URL: "postgres://u:s3cret@h:notaport/db"}, "open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(t.Context(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v, want an error saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error %q holds the password", err)
			}
		})
	}
}

func TestMaxConns(t *testing.T) {
	url := newDB(t)
	for _, tt := range []struct{ in, want int32 }{{0, DefaultMaxConns}, {1, 1}, {20, 20}} {
		s, err := Open(t.Context(), Config{URL: url, MaxConns: tt.in})
		if err != nil {
			t.Fatal(err)
		}
		got := s.pool.Config().MaxConns
		// A pool of one connection still works: migrations use their own.
		_, err = s.ListKeys(t.Context())
		s.Close()
		if err != nil || got != tt.want {
			t.Errorf("MaxConns %d: pool of %d (%v), want %d", tt.in, got, err, tt.want)
		}
	}
}
