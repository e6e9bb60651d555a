package file

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		alg     jose.Alg
		pemFile bool     // PEM PKCS#8; otherwise a JWK
		wantAlg jose.Alg // Handle.Alg on reopening
		check   func(any) bool
	}{
		{jose.ES256, true, "", func(k any) bool { e, ok := k.(*ecdsa.PublicKey); return ok && e.Curve.Params().Name == "P-256" }},
		{jose.ES384, true, "", func(k any) bool { e, ok := k.(*ecdsa.PublicKey); return ok && e.Curve.Params().Name == "P-384" }},
		{jose.ES512, true, "", func(k any) bool { e, ok := k.(*ecdsa.PublicKey); return ok && e.Curve.Params().Name == "P-521" }},
		{jose.EdDSA, true, "", func(k any) bool { _, ok := k.(ed25519.PublicKey); return ok }},
		{jose.RS256, true, "", func(k any) bool { r, ok := k.(*rsa.PublicKey); return ok && r.N.BitLen() == RSABits }},
		{jose.PS256, false, jose.PS256, func(k any) bool { r, ok := k.(*rsa.PublicKey); return ok && r.N.BitLen() == RSABits }},
	}
	for _, tt := range tests {
		t.Run(string(tt.alg), func(t *testing.T) {
			path := filepath.Join(dir, string(tt.alg)+".key")
			uri, err := Backend{}.Create(t.Context(), backends.CreateRequest{Alg: tt.alg, Name: path})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if uri != "file:"+path {
				t.Errorf("uri = %q, want file:%s", uri, path)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("mode = %#o, want 0600", st.Mode().Perm())
			}
			data, _ := os.ReadFile(path)
			if got := bytes.HasPrefix(data, []byte("-----BEGIN PRIVATE KEY-----")); got != tt.pemFile {
				t.Errorf("PEM PKCS#8 = %v, want %v:\n%.40s", got, tt.pemFile, data)
			}
			h, err := Backend{}.Open(t.Context(), uri)
			if err != nil {
				t.Fatalf("Open(%s): %v", uri, err)
			}
			if !tt.check(h.Signer.Public()) {
				t.Errorf("wrong key type %s", jose.KeyType(h.Signer.Public()))
			}
			if h.Alg != tt.wantAlg {
				t.Errorf("Handle.Alg = %q, want %q", h.Alg, tt.wantAlg)
			}

			// Never overwrite: the second Create fails and the file is unchanged.
			_, err = Backend{}.Create(t.Context(), backends.CreateRequest{Alg: tt.alg, Name: path})
			if !errors.Is(err, ErrExist) {
				t.Errorf("second Create = %v, want ErrExist", err)
			}
			if again, _ := os.ReadFile(path); !bytes.Equal(again, data) {
				t.Error("existing key file was changed")
			}
		})
	}
}

func TestCreateErrors(t *testing.T) {
	dir := t.TempDir()
	// A dangling symlink must not be followed: O_EXCL refuses it.
	link := filepath.Join(dir, "link")
	target := filepath.Join(dir, "target")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		req  backends.CreateRequest
	}{
		{"no alg", t.Context(), backends.CreateRequest{Name: filepath.Join(dir, "a")}},
		{"bad alg", t.Context(), backends.CreateRequest{Alg: "HS256", Name: filepath.Join(dir, "b")}},
		{"no name", t.Context(), backends.CreateRequest{Alg: jose.ES256}},
		{"missing directory", t.Context(), backends.CreateRequest{Alg: jose.ES256, Name: filepath.Join(dir, "nope", "k")}},
		{"dangling symlink", t.Context(), backends.CreateRequest{Alg: jose.ES256, Name: link}},
		{"host URI", t.Context(), backends.CreateRequest{Alg: jose.ES256, Name: "file://host/k"}},
		{"cancelled", cancelled, backends.CreateRequest{Alg: jose.ES256, Name: filepath.Join(dir, "c")}},
	}
	for _, tt := range tests {
		if uri, err := (Backend{}).Create(tt.ctx, tt.req); err == nil {
			t.Errorf("%s: Create = %q, want error", tt.name, uri)
		}
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Error("Create wrote through a symlink")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 { // only the symlink
		t.Errorf("failed Creates left files behind: %v", entries)
	}
}

func TestCreateFileURI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.pem")
	uri, err := Backend{}.Create(t.Context(), backends.CreateRequest{Alg: jose.EdDSA, Name: "file://" + path})
	if err != nil || uri != "file:"+path {
		t.Fatalf("Create = %q, %v", uri, err)
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	ec := ecKey(t, jose.ES256)
	tests := []struct {
		name    string
		alg     jose.Alg
		wantErr string
		wantPEM bool
	}{
		{"default alg", "", "", true},
		{"explicit alg", jose.ES256, "", true},
		{"mismatched alg", jose.ES384, "does not fit", false},
	}
	for i, tt := range tests {
		path := filepath.Join(dir, string(rune('a'+i)))
		err := Write(path, ec, tt.alg)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: Write = %v, want %q", tt.name, err, tt.wantErr)
			}
			if _, err := os.Stat(path); err == nil {
				t.Errorf("%s: failed Write left a file", tt.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Write: %v", tt.name, err)
		}
	}
	if err := Write(filepath.Join(dir, "nil"), nil, ""); err == nil {
		t.Error("Write(nil key) succeeded")
	}
}

func TestAllowedDirs(t *testing.T) {
	root := t.TempDir()
	allowed := filepath.Join(root, "keys")
	outside := filepath.Join(root, "elsewhere")
	for _, d := range []string{allowed, outside, filepath.Join(allowed, "sub")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key := pkcs8(t, ecKey(t, jose.ES256))
	inside := writeKey(t, allowed, "in.pem", key, 0o600)
	writeKey(t, filepath.Join(allowed, "sub"), "deep.pem", key, 0o600)
	secretFile := writeKey(t, outside, "secret", []byte(secret), 0o600)
	outKey := writeKey(t, outside, "out.pem", key, 0o600)
	if err := os.Symlink(outKey, filepath.Join(allowed, "escape.pem")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(inside, filepath.Join(outside, "into.pem")); err != nil {
		t.Fatal(err)
	}
	// The allowed directory named through a symlink still allows its files.
	viaLink := filepath.Join(root, "keys-link")
	if err := os.Symlink(allowed, viaLink); err != nil {
		t.Fatal(err)
	}

	b, err := New(Config{AllowedDirs: []string{viaLink}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       string // "" means allowed
	}{
		{"inside", inside, ""},
		{"in a subdirectory", filepath.Join(allowed, "sub", "deep.pem"), ""},
		{"through the directory's symlink", filepath.Join(viaLink, "in.pem"), ""},
		{"symlink from outside into the directory", filepath.Join(outside, "into.pem"), ""},
		{"outside", outKey, "outside the allowed directories"},
		{"outside, content never read", secretFile, "outside the allowed directories"},
		{"dot-dot out of the directory", filepath.Join(allowed, "..", "elsewhere", "out.pem"), "outside the allowed directories"},
		{"dot-dot written literally", allowed + "/sub/../../elsewhere/out.pem", "outside the allowed directories"},
		{"symlink inside pointing out", filepath.Join(allowed, "escape.pem"), "outside the allowed directories"},
		{"missing file outside: no existence oracle", filepath.Join(outside, "nope"), "outside the allowed directories"},
		{"missing directory outside", "/nonexistent-dir/k.pem", "outside the allowed directories"},
		{"system file", "/etc/passwd", "outside the allowed directories"},
		{"missing file inside", filepath.Join(allowed, "nope.pem"), "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr := b.CheckURI("file:" + tt.path)
			_, openErr := b.Open(t.Context(), "file:"+tt.path)
			for what, err := range map[string]error{"CheckURI": checkErr, "Open": openErr} {
				if tt.want == "" || (what == "CheckURI" && tt.want == "no such file") {
					if err != nil {
						t.Errorf("%s: %v", what, err)
					}
					continue
				}
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("%s = %v; want an error saying %q", what, err, tt.want)
					continue
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("%s: error shows the file's content: %v", what, err)
				}
				if tt.want != "no such file" && !strings.Contains(err.Error(), allowed) && !strings.Contains(err.Error(), viaLink) {
					t.Errorf("%s: error %q should name the allowed directories", what, err)
				}
			}
		})
	}
	var de *DirNotAllowedError
	if err := b.CheckURI("file:" + outKey); !errors.As(err, &de) {
		t.Errorf("want a *DirNotAllowedError, got %v", err)
	}
	// The zero Backend (the CLI's: the user's own process) reads anywhere.
	if _, err := (Backend{}).Open(t.Context(), "file:"+outKey); err != nil {
		t.Errorf("zero Backend: %v", err)
	}
	if err := (Backend{}).CheckURI("file:" + outKey); err != nil {
		t.Errorf("zero Backend CheckURI: %v", err)
	}
	// Create is bound by the same directories.
	if _, err := b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256, Name: filepath.Join(outside, "new.pem")}); err == nil || !strings.Contains(err.Error(), "outside the allowed directories") {
		t.Errorf("Create outside: %v", err)
	}
	if _, err := b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256, Name: filepath.Join(allowed, "new.pem")}); err != nil {
		t.Errorf("Create inside: %v", err)
	}
}

func TestNewConfig(t *testing.T) {
	for _, tt := range []struct {
		name string
		dirs []string
		want string
	}{
		{"relative", []string{"keys"}, "not an absolute path"},
		{"empty", []string{""}, "not an absolute path"},
	} {
		if _, err := New(Config{AllowedDirs: tt.dirs}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New = %v; want %q", tt.name, err, tt.want)
		}
	}
}

// healthy is the optional interface the daemon's readiness check looks for
// on an opened key's signer.
type healthy interface{ Healthy(context.Context) error }

func TestOpenedKeyNoticesItsFile(t *testing.T) {
	dir := t.TempDir()
	k1, k2 := ecKey(t, jose.ES256), ecKey(t, jose.ES256)
	path := writeKey(t, dir, "k.pem", pkcs8(t, k1), 0o600)
	h, err := Backend{}.Open(t.Context(), "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	hc, ok := h.Signer.(healthy)
	if !ok {
		t.Fatalf("the signer of a file key (%T) has no Healthy method", h.Signer)
	}
	if _, ok := h.Signer.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok {
		t.Fatal("Public() lost its type")
	}
	ctx := t.Context()
	if err := hc.Healthy(ctx); err != nil {
		t.Fatalf("fresh key: %v", err)
	}
	replace := func(data []byte) {
		t.Helper()
		tmp := writeKey(t, dir, "tmp", data, 0o600)
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	// The same key written again (a restore from backup) is fine.
	replace(pkcs8(t, k1))
	if err := hc.Healthy(ctx); err != nil {
		t.Errorf("same key rewritten: %v", err)
	}
	replace(pkcs8(t, k2))
	if err := hc.Healthy(ctx); err == nil || !strings.Contains(err.Error(), "different key") || !strings.Contains(err.Error(), path) {
		t.Errorf("replaced key: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := hc.Healthy(ctx); err == nil || !strings.Contains(err.Error(), "gone") || !strings.Contains(err.Error(), path) {
		t.Errorf("deleted key: %v", err)
	}
	// Signing still works from memory: readiness, not signing, reports it.
	if _, err := jose.Sign(ctx, h.Signer, jose.ES256, []byte("e30.e30")); err != nil {
		t.Errorf("Sign: %v", err)
	}
}

func TestCreateSaysWhereAndHow(t *testing.T) {
	dir := t.TempDir()
	notDir := writeKey(t, dir, "plain", []byte("x"), 0o600)
	tests := []struct{ name, keyDir, want string }{
		{"missing directory", filepath.Join(dir, "nope"), "create the directory"},
		{"not a directory", notDir, "not a directory"},
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct{ name, keyDir, want string }{"unwritable directory", ro, "make the directory writable by the daemon's user"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Backend{}.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256, Name: filepath.Join(tt.keyDir, "k.pem")})
			var pe *backends.PreconditionError
			if !errors.As(err, &pe) {
				t.Fatalf("Create = %v; want a *backends.PreconditionError", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "create key in "+tt.keyDir) || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q should say create key in %s and %q", msg, tt.keyDir, tt.want)
			}
		})
	}
}
