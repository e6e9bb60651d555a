package file

import (
	"bytes"
	"context"
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
			uri, err := Backend{}.Create(context.Background(), backends.CreateRequest{Alg: tt.alg, Name: path})
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
			h, err := Backend{}.Open(context.Background(), uri)
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
			_, err = Backend{}.Create(context.Background(), backends.CreateRequest{Alg: tt.alg, Name: path})
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
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		req  backends.CreateRequest
	}{
		{"no alg", context.Background(), backends.CreateRequest{Name: filepath.Join(dir, "a")}},
		{"bad alg", context.Background(), backends.CreateRequest{Alg: "HS256", Name: filepath.Join(dir, "b")}},
		{"no name", context.Background(), backends.CreateRequest{Alg: jose.ES256}},
		{"missing directory", context.Background(), backends.CreateRequest{Alg: jose.ES256, Name: filepath.Join(dir, "nope", "k")}},
		{"dangling symlink", context.Background(), backends.CreateRequest{Alg: jose.ES256, Name: link}},
		{"host URI", context.Background(), backends.CreateRequest{Alg: jose.ES256, Name: "file://host/k"}},
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
	uri, err := Backend{}.Create(context.Background(), backends.CreateRequest{Alg: jose.EdDSA, Name: "file://" + path})
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
