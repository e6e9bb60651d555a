package file

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
)

// openWithin runs Open in a goroutine and fails the test, instead of hanging
// it, when Open does not return within 10s (as an open(2) of a FIFO nobody
// writes to would not).
func openWithin(t *testing.T, b Backend, uri string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := b.Open(context.Background(), uri)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Open(%s) did not return within 10s", uri)
		return nil
	}
}

// unblockFIFO opens the write end of a FIFO, so that a reader stuck in
// open(2) by a failing test is released when the test ends.
func unblockFIFO(t *testing.T, path string) {
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}

func TestOpenRefusesSpecialFilesWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	unblockFIFO(t, fifo)
	tests := []struct{ name, path, want string }{
		{"FIFO nobody writes to", fifo, "not a regular file"},
		{"character device", "/dev/zero", "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := openWithin(t, Backend{}, "file:"+tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("Open(%s) = %v; want an error naming the file and saying %q", tt.path, err, tt.want)
			}
		})
	}
}

// secret stands for the content of a file the daemon can read but the
// caller cannot: no error may show it.
const secret = "TOPSECRET-VALUE-123"

func TestErrorsNeverQuoteFileContent(t *testing.T) {
	dir := t.TempDir()
	p256 := ecKey(t, jose.ES256)
	good := pkcs8(t, p256)
	jwk, err := jose.MarshalPrivateJWK(p256, "", "")
	if err != nil {
		t.Fatal(err)
	}
	// withMember replaces (or adds) one member of the good JWK.
	withMember := func(name, raw string) []byte {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(jwk, &m); err != nil {
			t.Fatal(err)
		}
		m[name] = json.RawMessage(raw)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		data []byte
		want string // what the error says instead
	}{
		{"PEM block type", pemOf(secret, []byte{1, 2, 3}), "unsupported PEM block type"},
		{"second PEM block type", append(append([]byte{}, good...), pemOf(secret, []byte{1})...), "more than one PEM block"},
		{"first PEM block type", append(pemOf(secret, []byte{1}), good...), "more than one PEM block"},
		{"JWK kty", []byte(`{"kty":"` + secret + `","d":"AAAA"}`), "kty"},
		{"JWK kty not a string", []byte(`{"kty":["` + secret + `"],"d":"AAAA"}`), "kty"},
		{"JWK crv", withMember("crv", `"`+secret+`"`), "crv"},
		{"JWK alg", withMember("alg", `"`+secret+`"`), "alg"},
		{"JWK x", withMember("x", `"`+secret+`"`), "JWK"},
		{"JWK d", withMember("d", `"`+secret+`"`), "JWK"},
		{"JWK kid not a string", withMember("kid", `{"`+secret+`":1}`), "JWK"},
		{"JWK member name", []byte(`{"kty":"EC","` + secret + `":1,"` + secret + `":2,"d":"AAAA"}`), "JWK"},
		{"malformed JSON", []byte(`{"kty": ` + secret + `}`), "JSON"},
		{"malformed JSON at the first byte of the value", []byte(`{"kty":"EC","d":"AAAA",` + secret + `}`), "JSON"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeKey(t, dir, fmt.Sprintf("key-%d", i), tt.data, 0o600)
			_, err := Backend{}.Open(context.Background(), "file:"+path)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			t.Log(msg)
			for _, leak := range []string{secret, "TOPSECRET", "VALUE-123", "'T'"} {
				if strings.Contains(msg, leak) {
					t.Errorf("error quotes the file's content (%q): %s", leak, msg)
				}
			}
			if !strings.Contains(msg, path) || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q should name the file and mention %q", msg, tt.want)
			}
		})
	}
	// Names from the fixed vocabulary may still be quoted: they tell the
	// operator what the file is without revealing anything.
	path := writeKey(t, dir, "public", pemOf("PUBLIC KEY", []byte{1}), 0o600)
	if _, err := (Backend{}).Open(context.Background(), "file:"+path); err == nil || !strings.Contains(err.Error(), `"PUBLIC KEY"`) {
		t.Errorf("public key PEM: %v", err)
	}
}
