package file

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

// ecKey is a new EC key for alg (ES256, ES384 or ES512), typed for the SEC1
// encoding.
func ecKey(t *testing.T, alg jose.Alg) *ecdsa.PrivateKey {
	t.Helper()
	return testsupport.Key(t, alg).(*ecdsa.PrivateKey)
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func pkcs8(t *testing.T, k crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pemOf("PRIVATE KEY", der)
}

func sec1(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pemOf("EC PRIVATE KEY", der)
}

func writeKey(t *testing.T, dir, name string, data []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is subject to umask
		t.Fatal(err)
	}
	return p
}

func equalPub(a, b crypto.PublicKey) bool {
	return a.(interface{ Equal(crypto.PublicKey) bool }).Equal(b)
}

func TestOpenFormats(t *testing.T) {
	dir := t.TempDir()
	p256, p384, p521, ed, rs := ecKey(t, jose.ES256), ecKey(t, jose.ES384), ecKey(t, jose.ES512), testsupport.Key(t, jose.EdDSA), testsupport.RSAKey(t)
	jwkOf := func(k crypto.Signer, kid string, alg jose.Alg) []byte {
		b, err := jose.MarshalPrivateJWK(k, kid, alg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ecParams := pemOf("EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07})
	tests := []struct {
		name    string
		data    []byte
		key     crypto.Signer
		wantAlg jose.Alg
		wantKID string
	}{
		{"PKCS#8 P-256", pkcs8(t, p256), p256, "", ""},
		{"PKCS#8 P-384", pkcs8(t, p384), p384, "", ""},
		{"PKCS#8 P-521", pkcs8(t, p521), p521, "", ""},
		{"PKCS#8 Ed25519", pkcs8(t, ed), ed, "", ""},
		{"PKCS#8 RSA", pkcs8(t, rs), rs, "", ""},
		{"SEC1 P-256", sec1(t, p256), p256, "", ""},
		{"SEC1 P-521 with EC PARAMETERS", append(ecParams, sec1(t, p521)...), p521, "", ""},
		{"PKCS#1 RSA", pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rs)), rs, "", ""},
		{"text before PEM", append([]byte("Bag Attributes\n    friendlyName: k\n"), pkcs8(t, p256)...), p256, "", ""},
		{"JWK EC with alg and kid", jwkOf(p256, "ec-key-1", jose.ES256), p256, jose.ES256, "ec-key-1"},
		{"JWK Ed25519", jwkOf(ed, "ed", jose.EdDSA), ed, jose.EdDSA, "ed"},
		{"JWK RSA PS256", jwkOf(rs, "", jose.PS256), rs, jose.PS256, ""},
		{"JWK no alg no kid", append([]byte("\n  "), jwkOf(p384, "", "")...), p384, "", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeKey(t, dir, fmt.Sprintf("key-%d", i), tt.data, 0o600)
			h, err := Backend{}.Open(t.Context(), "file:"+path)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !equalPub(h.Signer.Public(), tt.key.Public()) {
				t.Error("wrong key loaded")
			}
			if h.Alg != tt.wantAlg || h.KID != tt.wantKID {
				t.Errorf("Alg, KID = %q, %q; want %q, %q", h.Alg, h.KID, tt.wantAlg, tt.wantKID)
			}
			// The loaded key really signs.
			alg := h.Alg
			if alg == "" {
				alg, _ = jose.DefaultAlg(h.Signer.Public())
			}
			if _, err := jose.Sign(t.Context(), h.Signer, alg, []byte("e30.e30")); err != nil {
				t.Errorf("Sign: %v", err)
			}
		})
	}
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	p256 := ecKey(t, jose.ES256)
	good := pkcs8(t, p256)
	pubDER, _ := x509.MarshalPKIXPublicKey(p256.Public())
	pubJWK, _ := jose.NewJWK(p256.Public(), "", "")
	pubJWKBytes, _ := pubJWK.MarshalJSON()
	encrypted := pem.EncodeToMemory(&pem.Block{
		Type:    "EC PRIVATE KEY",
		Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00000000000000000000000000000000"},
		Bytes:   []byte{1, 2, 3},
	})
	x25519DER := func() []byte {
		// PKCS#8 X25519 key: parses, but cannot sign.
		b, _ := base64.StdEncoding.DecodeString("MC4CAQAwBQYDK2VuBCIEIGhwt4xAlzgbtQYpUZXE1nLW6lgwHsbIGqkS3NFWUIx/")
		return pemOf("PRIVATE KEY", b)
	}()
	secretJWK, _ := jose.MarshalPrivateJWK(p256, "", "")
	var m map[string]string
	if err := json.Unmarshal(secretJWK, &m); err != nil {
		t.Fatal(err)
	}
	otherJWK, _ := jose.MarshalPrivateJWK(ecKey(t, jose.ES256), "", "")
	var other map[string]string
	json.Unmarshal(otherJWK, &other)
	badJWK := strings.Replace(string(secretJWK), m["d"], other["d"], 1)
	tests := []struct {
		name   string
		data   []byte
		mode   os.FileMode
		errHas []string
	}{
		{"mode 0644", good, 0o644, []string{"0644", "chmod 600"}},
		{"mode 0640", good, 0o640, []string{"0640", "chmod 600"}},
		{"mode 0604", good, 0o604, []string{"0604", "chmod 600"}},
		{"two keys", append(append([]byte{}, good...), pkcs8(t, ecKey(t, jose.ES256))...), 0o600, []string{"more than one PEM block"}},
		{"key and certificate", append(append([]byte{}, good...), pemOf("CERTIFICATE", []byte{1})...), 0o600, []string{"more than one PEM block"}},
		{"trailing junk", append(append([]byte{}, good...), "junk"...), 0o600, []string{"after its PEM block"}},
		{"encrypted PKCS#8", pemOf("ENCRYPTED PRIVATE KEY", []byte{1, 2, 3}), 0o600, []string{"encrypted"}},
		{"encrypted legacy PEM", encrypted, 0o600, []string{"encrypted"}},
		{"public key PEM", pemOf("PUBLIC KEY", pubDER), 0o600, []string{"public-only"}},
		{"certificate", pemOf("CERTIFICATE", []byte{1}), 0o600, []string{"public-only"}},
		{"public JWK", pubJWKBytes, 0o600, []string{"public JWK only"}},
		{"JWK d of another key", []byte(badJWK), 0o600, []string{`does not match`}},
		{"OpenSSH key", pemOf("OPENSSH PRIVATE KEY", []byte{1}), 0o600, []string{"unsupported PEM block"}},
		{"corrupt PKCS#8", pemOf("PRIVATE KEY", []byte{0x30, 0x03, 1, 2, 3}), 0o600, []string{"PRIVATE KEY"}},
		{"X25519", x25519DER, 0o600, []string{"cannot sign"}},
		{"empty", nil, 0o600, []string{"empty"}},
		{"not a key", []byte("hello"), 0o600, []string{"neither"}},
		{"too big", append(append([]byte{}, good...), make([]byte, MaxFileSize)...), 0o600, []string{"limit"}},
	}
	// Secret material that must never show in an error: base64 of the PEM
	// body, and the JWK "d".
	body := strings.Split(string(good), "\n")[1]
	for i, tt := range tests {
		path := writeKey(t, dir, fmt.Sprintf("key-%d", i), tt.data, tt.mode)
		_, err := Backend{}.Open(t.Context(), "file:"+path)
		if err == nil {
			t.Errorf("%s: Open succeeded", tt.name)
			continue
		}
		for _, s := range tt.errHas {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not mention %q", tt.name, err, s)
			}
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %q does not name the file", tt.name, err)
		}
		if strings.Contains(err.Error(), body[:20]) || strings.Contains(err.Error(), m["d"]) || strings.Contains(err.Error(), other["d"]) {
			t.Errorf("%s: error contains key material: %q", tt.name, err)
		}
	}
	var me *InsecureModeError
	path := writeKey(t, dir, "insecure", good, 0o644)
	if _, err := (Backend{}).Open(t.Context(), "file:"+path); !errors.As(err, &me) || me.Mode.Perm() != 0o644 {
		t.Errorf("want *InsecureModeError with mode 0644, got %v", err)
	}
	// 0600 and stricter are fine.
	for _, mode := range []os.FileMode{0o600, 0o400} {
		path := writeKey(t, dir, fmt.Sprintf("ok-%o", mode), good, mode)
		if _, err := (Backend{}).Open(t.Context(), "file:"+path); err != nil {
			t.Errorf("mode %#o: %v", mode, err)
		}
	}
	if _, err := (Backend{}).Open(t.Context(), "file:"+dir); err == nil || !strings.Contains(err.Error(), "regular") {
		t.Errorf("directory: %v", err)
	}
	if _, err := (Backend{}).Open(t.Context(), "file:"+filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestPath(t *testing.T) {
	tests := []struct {
		uri     string
		want    string
		wantErr bool
	}{
		{"file:/etc/k.pem", "/etc/k.pem", false},
		{"file:///etc/k.pem", "/etc/k.pem", false},
		{"file:keys/k.pem", "keys/k.pem", false},
		{"FILE:k.pem", "k.pem", false},
		{"file:k%20x.pem", "k%20x.pem", false},
		{"file://host/etc/k.pem", "", true},
		{"file://", "", true},
		{"file:", "", true},
		{"pkcs11:token=x", "", true},
		{"file:a\x00b", "", true},
		{"/etc/k.pem", "", true},
	}
	for _, tt := range tests {
		got, err := Path(tt.uri)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Path(%q) = %q, %v; want %q, err %v", tt.uri, got, err, tt.want, tt.wantErr)
		}
		var ue *backends.URIError
		if err != nil && !errors.As(err, &ue) {
			t.Errorf("Path(%q) error %T, want *backends.URIError", tt.uri, err)
		}
	}
}

func TestOpenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (Backend{}).Open(ctx, "file:/nonexistent"); !errors.Is(err, context.Canceled) {
		t.Errorf("Open with cancelled ctx = %v", err)
	}
}

// TestOpenMissingKeyFile: a key file that is not there matches the shared
// sentinel backends.ErrKeyNotFound (and still fs.ErrNotExist), naming the
// path.
func TestOpenMissingKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gone.pem")
	_, err := Backend{}.Open(t.Context(), "file:"+path)
	var nf *KeyNotFoundError
	if !errors.Is(err, backends.ErrKeyNotFound) || !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &nf) {
		t.Fatalf("err %v, want a *KeyNotFoundError matching backends.ErrKeyNotFound and fs.ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("err %v does not name %s", err, path)
	}
}

func TestOpenRefusesSpecialFilesWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := testsupport.FIFO(t, filepath.Join(dir, "fifo"))
	tests := []struct{ name, path, want string }{
		{"FIFO nobody writes to", fifo, "not a regular file"},
		{"character device", "/dev/zero", "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := testsupport.Within(t, "Open("+tt.path+")", func() (backends.Handle, error) {
				return Backend{}.Open(t.Context(), "file:"+tt.path)
			})
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
			_, err := Backend{}.Open(t.Context(), "file:"+path)
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
	if _, err := (Backend{}).Open(t.Context(), "file:"+path); err == nil || !strings.Contains(err.Error(), `"PUBLIC KEY"`) {
		t.Errorf("public key PEM: %v", err)
	}
}
