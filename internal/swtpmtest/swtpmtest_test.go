//go:build cgo && !nopkcs11

package swtpmtest

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/pkcs11"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/signer"
	p11 "github.com/miekg/pkcs11"
	pkcs11uri "github.com/stefanberger/go-pkcs11uri"
)

// outcome is how far an alg gets with libtpm2-pkcs11 1.9 on swtpm through
// the pkcs11 backend as it is.
type outcome int

const (
	signs       outcome = iota // created, opened, signs and verifies
	createFails                // Create returns an error
	openFails                  // Create succeeds, Open refuses the key
)

// TestBackendKeysInTPM creates a key of every JOSE alg inside the TPM
// through the pkcs11 backend, opens each by the URI Create returned, signs
// and verifies, and reads the private key's protection back through
// PKCS#11. The algs the TPM's module cannot do fail with an error that says
// which.
func TestBackendKeysInTPM(t *testing.T) {
	tpm := Start(t)
	tpm.Setenv(t)
	logs := &syncBuffer{}
	reg := newRegistry(t, tpm, logs)
	b, err := reg.Backend(t.Context(), pkcs11.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	creator, ok := b.(backends.Creator)
	if !ok {
		t.Fatalf("the pkcs11 backend (%T) does not create keys", b)
	}

	tests := []struct {
		alg  jose.Alg
		want outcome
		// has: what the error must say (the alg, the PKCS#11 code).
		has []string
		why string
	}{
		{alg: jose.ES256, want: signs},
		{alg: jose.ES384, want: signs},
		{alg: jose.ES512, want: openFails, has: []string{"CKA_EC_POINT is 135 bytes, want a 133-byte point"},
			why: "libtpm2-pkcs11 (1.9, and upstream still) encodes CKA_EC_POINT's DER length in one byte: 04 85 <133 bytes> for P-521, which it cannot parse back itself either"},
		{alg: jose.RS256, want: openFails, has: []string{"CKR_MECHANISM_INVALID"},
			why: "the module signs CKM_RSA_PKCS only as raw RSA (CKM_RSA_X_509), which needs the key's decrypt bit: a key that decrypts anything; RS256 is not offered on a TPM"},
		{alg: jose.PS256, want: signs},
		{alg: jose.EdDSA, want: createFails, has: []string{"create EdDSA key", "C_GenerateKeyPair", "CKR_MECHANISM_INVALID"},
			why: "TPM 2.0 has no Ed25519; the module only generates with CKM_RSA_PKCS_KEY_PAIR_GEN and CKM_EC_KEY_PAIR_GEN"},
	}
	if len(tests) != len(jose.Algs()) {
		t.Fatalf("the table covers %d algs, jose has %d: add the new ones", len(tests), len(jose.Algs()))
	}
	var raw *rawSession
	var created []string // URIs of the keys that sign
	top := t
	for i, tt := range tests {
		t.Run(string(tt.alg), func(t *testing.T) {
			// The label does not name the alg, so errors that do name it
			// have it from the backend.
			label := fmt.Sprintf("tpm-key-%d", i+1)
			uri, err := creator.Create(t.Context(), backends.CreateRequest{Alg: tt.alg, Name: label})
			if tt.want == createFails {
				wantError(t, "Create", err, tt.has, tt.why)
				return
			}
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			id := checkURI(t, uri, tpm.Token, label)

			key, err := reg.Open(t.Context(), uri, backends.OpenOptions{})
			if tt.want == openFails {
				wantError(t, "Open", err, tt.has, tt.why)
				return
			}
			if err != nil {
				t.Fatalf("Open(%s): %v", uri, err)
			}
			signVerify(t, key, tt.alg)
			if raw == nil {
				raw = openRaw(top, tpm) // after the backend initialized the module
			}
			raw.checkPrivate(t, id)
			created = append(created, uri)
		})
	}
	if len(created) == 0 {
		t.Fatal("no key signs")
	}

	// Another process reaches the TPM while this one holds the module:
	// tpm2_ptool verify unseals the token's user key with the PIN.
	ptool, err := exec.LookPath("tpm2_ptool")
	if err != nil {
		t.Fatal(err)
	}
	tpm.run(t, ptool, "verify", "--label", tpm.Token, "--userpin", tpm.PIN, "--path", tpm.Store)

	// The keys outlive the backend: a new one (module finalized and
	// initialized again, a new login) opens them and signs.
	if raw != nil {
		raw.close()
	}
	if err := reg.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	reg2 := newRegistry(t, tpm, logs)
	for _, uri := range created {
		key, err := reg2.Open(t.Context(), uri, backends.OpenOptions{})
		if err != nil {
			t.Fatalf("reopening %s with a new backend: %v", uri, err)
		}
		signVerify(t, key, key.Alg)
	}
	if err := reg2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, pin := range []string{tpm.PIN, tpm.SOPIN} {
		if strings.Contains(logs.String(), pin) {
			t.Errorf("the backend's log contains a PIN:\n%s", logs)
		}
	}
}

// newRegistry returns a registry with the pkcs11 backend on tpm's token,
// logging to logs, closed when t ends.
func newRegistry(t *testing.T, tpm *TPM, logs *syncBuffer) *backends.Registry {
	t.Helper()
	reg := backends.NewRegistry()
	cfg := pkcs11.Config{
		DefaultModule: tpm.Module,
		Token:         tpm.Token,
		PIN:           tpm.PIN,
		Logger:        slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if err := reg.Add(pkcs11.Scheme, pkcs11.Constructor, backends.Config{Settings: cfg}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		reg.Close()
		if t.Failed() {
			t.Logf("backend log:\n%s", logs)
		}
	})
	return reg
}

// wantError fails t unless err is an error that says all of has.
func wantError(t *testing.T, op string, err error, has []string, why string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded; it was expected to fail (%s): if the module or the backend now supports this alg, move it to the algs that sign", op, why)
	}
	for _, s := range has {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s error does not say %q:\n%v", op, s, err)
		}
	}
	t.Logf("%s fails as expected (%s):\n%v", op, why, err)
}

// checkURI checks the URI Create returned: the token, the label, a 16-byte
// id, no module-path (the module is the default) and no PIN. It returns the
// id.
func checkURI(t *testing.T, uri, token, label string) []byte {
	t.Helper()
	u := pkcs11uri.New()
	if err := u.Parse(uri); err != nil {
		t.Fatalf("go-pkcs11uri cannot parse %q: %v", uri, err)
	}
	tok, _ := u.GetPathAttribute("token", false)
	obj, _ := u.GetPathAttribute("object", false)
	id, _ := u.GetPathAttribute("id", false)
	if tok != token || obj != label || len(id) != 16 {
		t.Errorf("URI %s: token %q object %q id of %d bytes, want %q, %q, 16 bytes", uri, tok, obj, len(id), token, label)
	}
	if _, ok := u.GetQueryAttribute("module-path", false); ok || strings.Contains(uri, "pin") {
		t.Errorf("URI %s has a module-path or a PIN", uri)
	}
	return []byte(id)
}

// signVerify signs with key as the daemon does and verifies with its
// public key.
func signVerify(t *testing.T, key signer.Key, alg jose.Alg) {
	t.Helper()
	if key.Alg != alg {
		t.Errorf("key alg %q, want %q", key.Alg, alg)
	}
	pub := key.Signer.Public()
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if want := map[jose.Alg]string{jose.ES256: "P-256", jose.ES384: "P-384", jose.ES512: "P-521"}[alg]; k.Curve.Params().Name != want {
			t.Errorf("%s key on curve %s", alg, k.Curve.Params().Name)
		}
	case *rsa.PublicKey:
		if k.N.BitLen() != pkcs11.RSABits {
			t.Errorf("RSA key of %d bits, want %d", k.N.BitLen(), pkcs11.RSABits)
		}
	default:
		t.Errorf("public key is %s", jose.KeyType(pub))
	}
	input := []byte("eyJhbGciOiJ" + string(alg) + "In0.eyJuYW1lIjoidHBtIn0")
	sig, err := jose.Sign(t.Context(), key.Signer, key.Alg, input)
	if err != nil {
		t.Fatalf("jose.Sign: %v", err)
	}
	if err := jose.Verify(key.Alg, pub, input, sig); err != nil {
		t.Errorf("jose.Verify: %v", err)
	}
	if err := jose.Verify(key.Alg, pub, append(input, '.'), sig); err == nil {
		t.Error("the signature also verifies over other input")
	}
}

// rawSession is a second miekg/pkcs11 handle on the module, logged in, to
// read what the backend does not show. It joins the backend's
// initialization and never finalizes it.
type rawSession struct {
	c      *p11.Ctx
	s      p11.SessionHandle
	closed bool
}

func openRaw(t *testing.T, tpm *TPM) *rawSession {
	t.Helper()
	c := p11.New(tpm.Module)
	if c == nil {
		t.Fatalf("cannot load %s", tpm.Module)
	}
	if err := c.Initialize(); err != nil && !errors.Is(err, p11.Error(p11.CKR_CRYPTOKI_ALREADY_INITIALIZED)) {
		t.Fatalf("C_Initialize: %v", err)
	}
	slots, err := c.GetSlotList(true)
	if err != nil {
		t.Fatal(err)
	}
	r := &rawSession{c: c}
	found := false
	for _, s := range slots {
		if info, err := c.GetTokenInfo(s); err == nil && info.Label == tpm.Token {
			if r.s, err = c.OpenSession(s, p11.CKF_SERIAL_SESSION); err != nil {
				t.Fatalf("C_OpenSession: %v", err)
			}
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("no token %q", tpm.Token)
	}
	if err := c.Login(r.s, p11.CKU_USER, tpm.PIN); err != nil && !errors.Is(err, p11.Error(p11.CKR_USER_ALREADY_LOGGED_IN)) {
		t.Fatalf("C_Login: %v", err)
	}
	t.Cleanup(r.close) // registered after the backend's, so it runs first
	return r
}

// close closes the session, only ours (C_CloseAllSessions would log the
// backend out), and unloads this handle on the module.
func (r *rawSession) close() {
	if r.closed {
		return
	}
	r.closed = true
	_ = r.c.CloseSession(r.s)
	r.c.Destroy()
}

// checkPrivate reads the private key with this CKA_ID back: a token object,
// private, sensitive, never extractable, signing; its secret value cannot
// be read.
func (r *rawSession) checkPrivate(t *testing.T, id []byte) {
	t.Helper()
	hs, err := r.find(id)
	if err != nil || len(hs) != 1 {
		t.Fatalf("finding the private key %x: %v, %d found", id, err, len(hs))
	}
	want := []struct {
		attr uint
		name string
		v    bool
	}{
		{p11.CKA_TOKEN, "CKA_TOKEN", true},
		{p11.CKA_PRIVATE, "CKA_PRIVATE", true},
		{p11.CKA_SENSITIVE, "CKA_SENSITIVE", true},
		{p11.CKA_EXTRACTABLE, "CKA_EXTRACTABLE", false},
		{p11.CKA_ALWAYS_SENSITIVE, "CKA_ALWAYS_SENSITIVE", true},
		{p11.CKA_NEVER_EXTRACTABLE, "CKA_NEVER_EXTRACTABLE", true},
		{p11.CKA_SIGN, "CKA_SIGN", true},
	}
	for _, w := range want {
		a, err := r.c.GetAttributeValue(r.s, hs[0], []*p11.Attribute{p11.NewAttribute(w.attr, nil)})
		if err != nil {
			t.Errorf("C_GetAttributeValue(%s): %v", w.name, err)
			continue
		}
		if got := len(a[0].Value) == 1 && a[0].Value[0] != 0; got != w.v {
			t.Errorf("%s = %v, want %v", w.name, got, w.v)
		}
	}
	// The private key is a blob only the TPM can load: the module has no
	// private value to give (CKR_ATTRIBUTE_TYPE_INVALID) or must refuse it
	// (CKR_ATTRIBUTE_SENSITIVE).
	for _, secret := range []struct {
		attr uint
		name string
	}{{p11.CKA_VALUE, "CKA_VALUE"}, {p11.CKA_PRIVATE_EXPONENT, "CKA_PRIVATE_EXPONENT"}, {p11.CKA_PRIME_1, "CKA_PRIME_1"}} {
		a, err := r.c.GetAttributeValue(r.s, hs[0], []*p11.Attribute{p11.NewAttribute(secret.attr, nil)})
		if !errors.Is(err, p11.Error(p11.CKR_ATTRIBUTE_SENSITIVE)) && !errors.Is(err, p11.Error(p11.CKR_ATTRIBUTE_TYPE_INVALID)) {
			t.Errorf("reading %s of the private key: %v (%d bytes), want CKR_ATTRIBUTE_SENSITIVE or CKR_ATTRIBUTE_TYPE_INVALID", secret.name, err, len(a))
		}
	}
}

// find returns the private keys with this CKA_ID.
func (r *rawSession) find(id []byte) ([]p11.ObjectHandle, error) {
	tmpl := []*p11.Attribute{p11.NewAttribute(p11.CKA_CLASS, p11.CKO_PRIVATE_KEY), p11.NewAttribute(p11.CKA_ID, id)}
	if err := r.c.FindObjectsInit(r.s, tmpl); err != nil {
		return nil, err
	}
	hs, _, err := r.c.FindObjects(r.s, 2)
	if ferr := r.c.FindObjectsFinal(r.s); err == nil {
		err = ferr
	}
	return hs, err
}
