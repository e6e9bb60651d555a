package jwksfetch

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
)

func TestLoad(t *testing.T) {
	doc := oneKeySet(t, "k1")
	dir := t.TempDir()
	good := filepath.Join(dir, "jwks.json")
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(good, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, []byte(strings.Repeat(" ", jwks.MaxSize+1)), 0o644); err != nil {
		t.Fatal(err)
	}

	var gotAccept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAccept = r.Header.Get("Accept")
		switch r.URL.Path {
		case "/jwks.json":
			w.Header().Set("Content-Type", jwks.MediaType)
			w.Write(doc)
		case "/big":
			w.Write([]byte(`{"keys":[],"pad":"`))
			w.Write([]byte(strings.Repeat("a", jwks.MaxSize)))
			w.Write([]byte(`"}`))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		case "/garbage":
			w.Write([]byte(`<html>`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	tests := []struct {
		name    string
		src     string
		timeout time.Duration
		errHas  string // "" means success
	}{
		{"file", good, 0, ""},
		{"URL", srv.URL + "/jwks.json", 0, ""},
		{"404 names status", srv.URL + "/missing?token=secret", 0, "404 Not Found"},
		{"URL over cap", srv.URL + "/big", 0, "larger than"},
		{"URL not JSON", srv.URL + "/garbage", 0, "JSON"},
		{"deadline reaches fetch", srv.URL + "/slow", 50 * time.Millisecond, "deadline"},
		{"file over cap", big, 0, "larger than"},
		{"missing file", filepath.Join(dir, "nope.json"), 0, "nope.json"},
		{"device is not read", "/dev/zero", 0, "not a regular file (a device)"},
		{"directory", dir, 0, "not a regular file (a directory)"},
		{"other scheme", "ftp://example.test/jwks.json", 0, "unsupported URL scheme"},
		{"empty", "", 0, "empty"},
	}
	for _, tt := range tests {
		ctx := context.Background()
		if tt.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, tt.timeout)
			defer cancel()
		}
		set, err := Load(ctx, tt.src, srv.Client())
		if tt.errHas == "" {
			if err != nil {
				t.Errorf("%s: Load: %v", tt.name, err)
			} else if _, ok := set.Lookup("k1"); !ok {
				t.Errorf("%s: key k1 missing", tt.name)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: Load err = %v, want it to mention %q", tt.name, err, tt.errHas)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error shows the URL query: %v", tt.name, err)
		}
	}
	var se *StatusError
	if _, err := ReadDocument(context.Background(), srv.URL+"/missing", srv.Client()); !errors.As(err, &se) || se.Code != http.StatusNotFound {
		t.Errorf("ReadDocument of a 404: %v, want a *StatusError with code 404", err)
	}
	if !strings.Contains(gotAccept, jwks.MediaType) {
		t.Errorf("Accept = %q", gotAccept)
	}
}

// oneKeySet returns a JWK Set of one fresh P-256 key named kid.
func oneKeySet(t *testing.T, kid string) []byte {
	t.Helper()
	k, err := jose.NewJWK(testsupport.Key(t, jose.ES256).Public(), kid, jose.ES256)
	var doc []byte
	if err == nil {
		doc, err = jwks.Set{Keys: []jose.JWK{k}}.MarshalJSON()
	}
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
