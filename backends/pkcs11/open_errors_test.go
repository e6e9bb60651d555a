//go:build cgo && !nopkcs11

package pkcs11

import (
	"encoding/asn1"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
	p11 "github.com/miekg/pkcs11"
)

// genPair makes a key pair on the token through the raw handle, for the
// kinds of keys Create never makes.
func (r *rawToken) genPair(t *testing.T, mech uint, label string, id []byte, pub, priv []*p11.Attribute) (p11.ObjectHandle, p11.ObjectHandle) {
	t.Helper()
	common := []*p11.Attribute{
		p11.NewAttribute(p11.CKA_TOKEN, true),
		p11.NewAttribute(p11.CKA_LABEL, label),
		p11.NewAttribute(p11.CKA_ID, id),
	}
	pubH, privH, err := r.c.GenerateKeyPair(r.s, []*p11.Mechanism{p11.NewMechanism(mech, nil)},
		append(append([]*p11.Attribute{}, common...), pub...), append(append([]*p11.Attribute{}, common...), priv...))
	if err != nil {
		t.Fatalf("raw C_GenerateKeyPair %s: %v", label, err)
	}
	return pubH, privH
}

func oidParams(t *testing.T, oid asn1.ObjectIdentifier) []byte {
	b, err := asn1.Marshal(oid)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenErrors checks that each way of naming a key that cannot be used
// gives its own typed error, and that neither errors nor logs carry a PIN.
func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	notALib := filepath.Join(dir, "not-a-module.so")
	if err := os.WriteFile(notALib, []byte("not ELF"), 0o600); err != nil {
		t.Fatal(err)
	}
	missingLib := filepath.Join(dir, "missing.so")
	b, logs := newBackend(t, Config{PIN: env.main.pin, Token: env.main.label, AllowedModules: []string{notALib, missingLib}})
	loginTo(t, b, env.main)
	raw := openRaw(t, env.main)

	sfx := uniq("")
	p256 := oidParams(t, oidP256)
	signOnly := []*p11.Attribute{p11.NewAttribute(p11.CKA_SIGN, true)}
	raw.genPair(t, p11.CKM_EC_KEY_PAIR_GEN, "secp256k1"+sfx, []byte(sfx+"k1"),
		[]*p11.Attribute{p11.NewAttribute(p11.CKA_EC_PARAMS, oidParams(t, asn1.ObjectIdentifier{1, 3, 132, 0, 10}))}, signOnly)
	raw.genPair(t, ckmECEdwardsKeyPairGen, "ed448"+sfx, []byte(sfx+"ed448"),
		[]*p11.Attribute{p11.NewAttribute(p11.CKA_EC_PARAMS, oidParams(t, asn1.ObjectIdentifier{1, 3, 101, 113}))}, signOnly)
	raw.genPair(t, p11.CKM_RSA_PKCS_KEY_PAIR_GEN, "rsa1024"+sfx, []byte(sfx+"rsa1024"),
		[]*p11.Attribute{p11.NewAttribute(p11.CKA_MODULUS_BITS, 1024), p11.NewAttribute(p11.CKA_PUBLIC_EXPONENT, []byte{1, 0, 1})}, signOnly)
	raw.genPair(t, p11.CKM_EC_KEY_PAIR_GEN, "no-sign"+sfx, []byte(sfx+"no-sign"),
		[]*p11.Attribute{p11.NewAttribute(p11.CKA_EC_PARAMS, p256)}, []*p11.Attribute{p11.NewAttribute(p11.CKA_SIGN, false)})
	raw.genPair(t, p11.CKM_EC_KEY_PAIR_GEN, "hash-and-sign-only"+sfx, []byte(sfx+"hs"),
		[]*p11.Attribute{p11.NewAttribute(p11.CKA_EC_PARAMS, p256)},
		[]*p11.Attribute{p11.NewAttribute(p11.CKA_SIGN, true), p11.NewAttribute(p11.CKA_ALLOWED_MECHANISMS, encodeUlongs(p11.CKM_ECDSA_SHA256))})
	orphanPub, _ := raw.genPair(t, p11.CKM_EC_KEY_PAIR_GEN, "no-public"+sfx, []byte(sfx+"no-public"),
		[]*p11.Attribute{p11.NewAttribute(p11.CKA_EC_PARAMS, p256)}, signOnly)
	if err := raw.c.DestroyObject(raw.s, orphanPub); err != nil {
		t.Fatal(err)
	}
	raw.genPair(t, p11.CKM_EC_KEY_PAIR_GEN, "twin"+sfx, []byte(sfx+"twin-1"), []*p11.Attribute{p11.NewAttribute(p11.CKA_EC_PARAMS, p256)}, signOnly)
	raw.genPair(t, p11.CKM_EC_KEY_PAIR_GEN, "twin"+sfx, []byte(sfx+"twin-2"), []*p11.Attribute{p11.NewAttribute(p11.CKA_EC_PARAMS, p256)}, signOnly)
	if _, err := raw.c.GenerateKey(raw.s, []*p11.Mechanism{p11.NewMechanism(p11.CKM_AES_KEY_GEN, nil)}, []*p11.Attribute{
		p11.NewAttribute(p11.CKA_TOKEN, true), p11.NewAttribute(p11.CKA_VALUE_LEN, 32), p11.NewAttribute(p11.CKA_LABEL, "aes"+sfx),
	}); err != nil {
		t.Fatal(err)
	}
	good, err := b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256, Name: "good" + sfx})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(t.Context(), good+"?pin-value="+env.main.pin); err != nil {
		t.Fatalf("the control key does not open: %v", err)
	}

	main := "pkcs11:token=" + env.main.label
	type check func(t *testing.T, err error)
	as := func(target any) check {
		return func(t *testing.T, err error) {
			if !errors.As(err, target) {
				t.Errorf("error %T %v, want %T", err, err, target)
			}
		}
	}
	var (
		uriErr      *backends.URIError
		notAllowed  *ModuleNotAllowedError
		modErr      *ModuleError
		notFound    *TokenNotFoundError
		keyNotFound *KeyNotFoundError
		unsupported *UnsupportedKeyError
	)
	tests := []struct {
		name  string
		uri   string
		check check
		has   string
	}{
		{"module not allowed", main + ";object=good" + sfx + "?module-path=/usr/lib/evil/p11.so", as(&notAllowed), "/usr/lib/evil/p11.so is not allowed"},
		{"module missing", main + ";object=good" + sfx + "?module-path=" + missingLib, func(t *testing.T, err error) {
			if !errors.As(err, &modErr) || !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("error %v, want *ModuleError wrapping fs.ErrNotExist", err)
			}
		}, "missing.so"},
		{"module not a library", main + ";object=good" + sfx + "?module-path=" + notALib, as(&modErr), "cannot be loaded"},
		{"token missing", "pkcs11:token=nope;object=good" + sfx, func(t *testing.T, err error) {
			if !errors.As(err, &notFound) || !strings.Contains(strings.Join(notFound.Present, " "), env.main.label) {
				t.Errorf("error %v, want *TokenNotFoundError listing the present tokens", err)
			}
		}, `token="nope"`},
		{"serial missing", "pkcs11:serial=0000;object=good" + sfx, as(&notFound), `serial="0000"`},
		{"key missing", main + ";object=nope", as(&keyNotFound), "object=nope"},
		{"id missing", main + ";object=good" + sfx + ";id=%00%01", as(&keyNotFound), "id=%00%01"},
		{"secret key only", main + ";object=aes" + sfx, as(&keyNotFound), "no private key"},
		{"no public key object", main + ";object=no-public" + sfx, as(&keyNotFound), "no public key object"},
		{"two keys, one label", main + ";object=twin" + sfx, nil, "several private keys match"},
		{"secp256k1", main + ";object=secp256k1" + sfx, as(&unsupported), "1.3.132.0.10"},
		{"Ed448", main + ";object=ed448" + sfx, as(&unsupported), "other than Ed25519"},
		{"RSA 1024", main + ";object=rsa1024" + sfx, as(&unsupported), "1024 bits"},
		{"CKA_SIGN false", main + ";object=no-sign" + sfx, as(&unsupported), "CKA_SIGN is false"},
		{"mechanism not allowed", main + ";object=hash-and-sign-only" + sfx, as(&unsupported), "CKA_ALLOWED_MECHANISMS"},
		{"no key attribute", main, as(&uriErr), "no object= or id="},
		{"type=cert", main + ";object=good" + sfx + ";type=cert", as(&uriErr), "only private keys sign"},
		{"unknown attribute", main + ";object=good" + sfx + ";colour=blue", as(&uriErr), `"colour"`},
		{"module-name", main + ";object=good" + sfx + "?module-name=softhsm2", as(&uriErr), "module-name is not supported"},
		{"PIN in the path", main + ";object=good" + sfx + ";pin-value=" + env.main.pin, as(&uriErr), "unsupported path attribute"},
		{"bad escape in pin-value", main + ";object=good" + sfx + "?pin-value=" + env.main.pin + "%zz", as(&uriErr), "not validly %-encoded"},
		{"not pkcs11", "file:/k.pem", as(&uriErr), "not a pkcs11: URI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := b.Open(t.Context(), tt.uri)
			if err == nil {
				t.Fatalf("Open(%s) = %v, want an error", tt.uri, h)
			}
			t.Log(err)
			if tt.check != nil {
				tt.check(t, err)
			}
			if !strings.Contains(err.Error(), tt.has) {
				t.Errorf("error %q does not mention %q", err, tt.has)
			}
			noPIN(t, "error", err.Error())
		})
	}
	noPIN(t, "log", logs.String())
}

// TestPINErrors uses a token nothing else logs in to: once a process is
// logged in, PKCS#11 never checks a PIN again, so each wrong PIN is tried by
// a fresh Backend against a logged-out token.
func TestPINErrors(t *testing.T) {
	pinFile := filepath.Join(t.TempDir(), "pin")
	if err := os.WriteFile(pinFile, []byte(env.pin.pin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongFile := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrongFile, []byte(wrongPIN+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The right PIN, in a directory pin-source may not name.
	elsewhere := filepath.Join(t.TempDir(), "pin")
	if err := os.WriteFile(elsewhere, []byte(env.pin.pin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pinDirs := []string{filepath.Dir(pinFile), filepath.Dir(wrongFile)}
	tok := "pkcs11:token=" + env.pin.label + ";object=" + uniq("k")

	// A key to open, created with the right PIN from a pin-source file.
	setup, _ := newBackend(t, Config{PINSourceDirs: pinDirs})
	if _, err := setup.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256, Name: tok + "?pin-source=file:" + pinFile}); err != nil {
		t.Fatalf("Create with pin-source: %v", err)
	}
	if err := setup.Close(); err != nil { // logs out
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		cfgPIN  string
		uri     string
		wantErr string // "" for success
	}{
		{"config PIN wrong", wrongPIN, tok, "PIN incorrect"},
		{"pin-value wrong", env.pin.pin, tok + "?pin-value=" + wrongPIN, "PIN incorrect"},
		{"pin-source wrong", "", tok + "?pin-source=" + wrongFile, "PIN incorrect"},
		{"no PIN anywhere", "", tok, "PIN not given"},
		{"pin-source missing", "", tok + "?pin-source=" + filepath.Join(filepath.Dir(pinFile), "nope"), "no such file"},
		{"pin-source outside the allowed directories", "", tok + "?pin-source=/nonexistent/pin", "outside the allowed pin-source directories"},
		{"pin-source outside, holding the right PIN: no oracle", "", tok + "?pin-source=" + elsewhere, "outside the allowed pin-source directories"},
		{"config PIN right", env.pin.pin, tok, ""},
		{"pin-source right, newline dropped", wrongPIN, tok + "?pin-source=file://" + pinFile, ""},
		{"pin-value right", "", tok + "?pin-value=" + env.pin.pin, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, logs := newBackend(t, Config{PIN: tt.cfgPIN, PINSourceDirs: pinDirs})
			_, err := b.Open(t.Context(), tt.uri)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				// Logged in now: a second URI with another PIN is refused,
				// not silently accepted.
				_, err := b.Open(t.Context(), tok+"?pin-value="+wrongPIN)
				var pe *PINError
				if !errors.As(err, &pe) || !strings.Contains(err.Error(), "differs") {
					t.Errorf("Open with another PIN while logged in: %v, want *PINError", err)
				}
				if err != nil {
					noPIN(t, "error", err.Error())
				}
				return
			}
			if err == nil {
				t.Fatal("Open succeeded")
			}
			t.Log(err)
			var pe *PINError
			var ue *backends.URIError
			if !errors.As(err, &pe) && !errors.As(err, &ue) {
				t.Errorf("error %T %v, want *PINError (or *URIError for a pin-source problem)", err, err)
			}
			if strings.Contains(tt.wantErr, "incorrect") && !errors.Is(err, p11.Error(p11.CKR_PIN_INCORRECT)) {
				t.Errorf("error %v does not wrap CKR_PIN_INCORRECT", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
			noPIN(t, "error", err.Error())
			noPIN(t, "log", logs.String())
		})
	}
}
