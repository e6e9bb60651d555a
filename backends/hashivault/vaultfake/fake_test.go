package vaultfake

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"
)

// The fake is driven by the real OpenBao API client only. The client
// retries 5xx and 429 answers itself (go-retryablehttp, MaxRetries 2 by
// default); the tests turn that off, so every injected fault reaches them,
// except TestClientRetries, which shows the hidden retries.

func start(t *testing.T, opts Options) (*Server, *api.Client) {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, newClient(t, s, s.RootToken())
}

func newClient(t *testing.T, s *Server, token string) *api.Client {
	t.Helper()
	cfg := api.NewConfig() // no environment: BAO_TOKEN must not leak in
	cfg.Address = s.URL()
	cfg.MaxRetries = 0
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(token)
	return c
}

// wantError checks err is the *api.ResponseError the client makes of
// Vault's {"errors":[...]}, with status and a message containing text.
func wantError(t *testing.T, err error, status int, text string) {
	t.Helper()
	var re *api.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T), want an *api.ResponseError with %d", err, err, status)
	}
	if re.StatusCode != status || !strings.Contains(strings.Join(re.Errors, "\n"), text) {
		t.Fatalf("answer %d %q, want %d containing %q", re.StatusCode, re.Errors, status, text)
	}
}

func num(t *testing.T, v any) int {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a JSON number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return int(i)
}

func write(t *testing.T, c *api.Client, path string, body map[string]any) *api.Secret {
	t.Helper()
	sec, err := c.Logical().WriteWithContext(t.Context(), path, body)
	if err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return sec
}

// signRaw signs and returns the signature's version and bytes; jws
// signatures are base64url without padding, others standard base64.
func signRaw(t *testing.T, c *api.Client, path string, body map[string]any) (int, []byte) {
	t.Helper()
	sec := write(t, c, path, body)
	text, _ := sec.Data["signature"].(string)
	parts := strings.SplitN(text, ":", 3)
	if len(parts) != 3 || parts[0] != "vault" || !strings.HasPrefix(parts[1], "v") {
		t.Fatalf("signature %q is not vault:vN:...", text)
	}
	enc := base64.StdEncoding
	if body["marshaling_algorithm"] == "jws" {
		enc = base64.RawURLEncoding
	}
	sig, err := enc.DecodeString(parts[2])
	if err != nil {
		t.Fatalf("signature %q: %v", text, err)
	}
	v := num(t, sec.Data["key_version"])
	if parts[1] != "v"+strconv.Itoa(v) {
		t.Fatalf("signature %q, key_version %d", text, v)
	}
	return v, sig
}

// publicKey reads version's public key as a client does: PEM for ECDSA and
// RSA, base64 for Ed25519.
func publicKey(t *testing.T, c *api.Client, name string, version int) crypto.PublicKey {
	t.Helper()
	sec, err := c.Logical().ReadWithContext(t.Context(), "transit/keys/"+name)
	if err != nil || sec == nil {
		t.Fatalf("read %s: %v %v", name, sec, err)
	}
	keys, _ := sec.Data["keys"].(map[string]any)
	entry, _ := keys[strconv.Itoa(version)].(map[string]any)
	text, _ := entry["public_key"].(string)
	if sec.Data["type"] == "ed25519" {
		raw, err := base64.StdEncoding.DecodeString(text)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			t.Fatalf("ed25519 public key %q: %v", text, err)
		}
		return ed25519.PublicKey(raw)
	}
	block, _ := pem.Decode([]byte(text))
	if block == nil || block.Type != "PUBLIC KEY" {
		t.Fatalf("public key %q is not PEM", text)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func digest(h crypto.Hash, msg []byte) []byte {
	w := h.New()
	w.Write(msg)
	return w.Sum(nil)
}

func verifyECDSA(jws bool) func(crypto.PublicKey, []byte, []byte) bool {
	return func(pub crypto.PublicKey, d, sig []byte) bool {
		k := pub.(*ecdsa.PublicKey)
		if !jws {
			return ecdsa.VerifyASN1(k, d, sig)
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		if len(sig) != 2*size {
			return false
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		return ecdsa.Verify(k, d, r, s)
	}
}

func verifyPSS(h crypto.Hash, salt int) func(crypto.PublicKey, []byte, []byte) bool {
	return func(pub crypto.PublicKey, d, sig []byte) bool {
		return rsa.VerifyPSS(pub.(*rsa.PublicKey), h, d, sig, &rsa.PSSOptions{SaltLength: salt, Hash: h}) == nil
	}
}

func verifyPKCS1(h crypto.Hash) func(crypto.PublicKey, []byte, []byte) bool {
	return func(pub crypto.PublicKey, d, sig []byte) bool {
		return rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), h, d, sig) == nil
	}
}

func verifyEd25519(pub crypto.PublicKey, msg, sig []byte) bool {
	return ed25519.Verify(pub.(ed25519.PublicKey), msg, sig)
}

// maxSalt is the salt length Vault's salt_length=auto gives: Go's
// rsa.PSSSaltLengthAuto, the longest the key leaves room for.
func maxSalt(bits int, h crypto.Hash) int { return (bits-1+7)/8 - 2 - h.Size() }

// TestSignVerify signs with each key type, hash, marshaling and RSA
// scheme, and verifies with the public key the fake serves.
func TestSignVerify(t *testing.T) {
	s, c := start(t, Options{})
	for name, typ := range map[string]string{
		"p256": "ecdsa-p256", "p384": "ecdsa-p384", "p521": "ecdsa-p521",
		"rsa2048": "rsa-2048", "rsa3072": "rsa-3072", "rsa4096": "rsa-4096", "ed": "ed25519",
	} {
		sec := write(t, c, "transit/keys/"+name, map[string]any{"type": typ})
		if sec.Data["type"] != typ || num(t, sec.Data["latest_version"]) != 1 || len(sec.Warnings) != 0 {
			t.Fatalf("create %s: %v %v", name, sec.Data, sec.Warnings)
		}
	}
	msg := []byte("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJjYXJkIn0")
	tests := []struct {
		name   string
		key    string
		path   string // after transit/sign/KEY
		body   map[string]any
		hash   crypto.Hash // 0: the message itself is signed (Ed25519, hash none)
		verify func(pub crypto.PublicKey, digest, sig []byte) bool
	}{
		{"p256 defaults", "p256", "", map[string]any{}, crypto.SHA256, verifyECDSA(false)},
		{"p256 prehashed jws", "p256", "", map[string]any{"hash_algorithm": "sha2-256", "prehashed": true, "marshaling_algorithm": "jws"}, crypto.SHA256, verifyECDSA(true)},
		{"p256 hash in path", "p256", "/sha2-384", map[string]any{"hash_algorithm": "sha2-512"}, crypto.SHA384, verifyECDSA(false)},
		{"p384 asn1", "p384", "", map[string]any{"hash_algorithm": "sha2-384"}, crypto.SHA384, verifyECDSA(false)},
		{"p384 prehashed jws", "p384", "", map[string]any{"hash_algorithm": "sha2-384", "prehashed": true, "marshaling_algorithm": "jws"}, crypto.SHA384, verifyECDSA(true)},
		{"p521 jws", "p521", "", map[string]any{"hash_algorithm": "sha2-512", "marshaling_algorithm": "jws"}, crypto.SHA512, verifyECDSA(true)},
		{"p521 prehashed asn1", "p521", "", map[string]any{"hash_algorithm": "sha2-512", "prehashed": true, "marshaling_algorithm": "asn1"}, crypto.SHA512, verifyECDSA(false)},
		{"rsa defaults: pss, salt auto", "rsa2048", "", map[string]any{}, crypto.SHA256, verifyPSS(crypto.SHA256, maxSalt(2048, crypto.SHA256))},
		{"rsa pss salt hash prehashed", "rsa2048", "", map[string]any{"prehashed": true, "signature_algorithm": "pss", "salt_length": "hash"}, crypto.SHA256, verifyPSS(crypto.SHA256, rsa.PSSSaltLengthEqualsHash)},
		{"rsa pss salt 20", "rsa2048", "", map[string]any{"hash_algorithm": "sha2-384", "salt_length": 20}, crypto.SHA384, verifyPSS(crypto.SHA384, 20)},
		{"rsa pkcs1v15 sha2-512", "rsa2048", "", map[string]any{"hash_algorithm": "sha2-512", "signature_algorithm": "pkcs1v15"}, crypto.SHA512, verifyPKCS1(crypto.SHA512)},
		{"rsa pkcs1v15 hash none", "rsa2048", "", map[string]any{"hash_algorithm": "none", "prehashed": true, "signature_algorithm": "pkcs1v15"}, 0, verifyPKCS1(0)},
		{"rsa3072 pss prehashed sha2-384", "rsa3072", "", map[string]any{"hash_algorithm": "sha2-384", "prehashed": true, "salt_length": "hash"}, crypto.SHA384, verifyPSS(crypto.SHA384, rsa.PSSSaltLengthEqualsHash)},
		{"rsa4096 pkcs1v15 jws", "rsa4096", "", map[string]any{"prehashed": true, "signature_algorithm": "pkcs1v15", "marshaling_algorithm": "jws"}, crypto.SHA256, verifyPKCS1(crypto.SHA256)},
		{"ed25519", "ed", "", map[string]any{}, 0, verifyEd25519},
		{"ed25519 jws", "ed", "", map[string]any{"marshaling_algorithm": "jws"}, 0, verifyEd25519},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			signed := msg
			if tt.hash != 0 {
				signed = digest(tt.hash, msg)
			}
			input := msg
			if tt.body["prehashed"] == true {
				input = signed
			}
			if tt.key != "ed" && tt.hash == 0 { // hash none: the input is what is signed
				input = digest(crypto.SHA256, msg)
				signed = input
			}
			body := map[string]any{"input": base64.StdEncoding.EncodeToString(input)}
			for k, v := range tt.body {
				body[k] = v
			}
			v, sig := signRaw(t, c, "transit/sign/"+tt.key+tt.path, body)
			if v != 1 {
				t.Fatalf("key_version %d, want 1", v)
			}
			pub := publicKey(t, c, tt.key, 1)
			if own, ok := s.PublicKey(tt.key, 1); !ok || !own.(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
				t.Fatal("PublicKey differs from the key the API serves")
			}
			if !tt.verify(pub, signed, sig) {
				t.Fatal("the signature does not verify")
			}
			other := bytes.Clone(signed)
			other[0] ^= 1
			if tt.verify(pub, other, sig) {
				t.Fatal("the signature verifies another input")
			}
		})
	}
	t.Run("salt auto is not the hash length", func(t *testing.T) {
		_, sig := signRaw(t, c, "transit/sign/rsa2048", map[string]any{"input": base64.StdEncoding.EncodeToString(msg)})
		if verifyPSS(crypto.SHA256, rsa.PSSSaltLengthEqualsHash)(publicKey(t, c, "rsa2048", 1), digest(crypto.SHA256, msg), sig) {
			t.Fatal("salt_length=auto signed with a salt as long as the hash")
		}
	})
	if got := s.Calls("Sign"); got != len(tests)+1 {
		t.Fatalf("Calls(Sign) = %d, want %d", got, len(tests)+1)
	}
}

// TestSignRefused checks the requests Vault refuses, with its status and
// words.
func TestSignRefused(t *testing.T) {
	s, c := start(t, Options{})
	for name, typ := range map[string]string{"ec": "ecdsa-p256", "rsa": "rsa-2048", "ed": "ed25519", "aes": "aes256-gcm96"} {
		if err := s.CreateKey(name, typ); err != nil {
			t.Fatal(err)
		}
	}
	in := base64.StdEncoding.EncodeToString([]byte("message"))
	d := sha256.Sum256([]byte("message"))
	short := base64.StdEncoding.EncodeToString(d[:31])
	tests := []struct {
		name   string
		path   string
		body   map[string]any
		status int
		text   string
	}{
		{"unknown key", "transit/sign/nope", map[string]any{"input": in}, 400, "signing key not found"},
		{"symmetric key", "transit/sign/aes", map[string]any{"input": in}, 400, "key type aes256-gcm96 does not support signing"},
		{"ed25519 prehashed", "transit/sign/ed", map[string]any{"input": in, "prehashed": true}, 400, "prehashed input is not supported for ed25519"},
		{"digest too short", "transit/sign/ec", map[string]any{"input": short, "prehashed": true}, 400, "prehashed input is 31 bytes"},
		{"unknown hash", "transit/sign/ec", map[string]any{"input": in, "hash_algorithm": "md5"}, 400, `invalid hash algorithm "md5"`},
		{"unknown hash in path", "transit/sign/ec/sha2-999", map[string]any{"input": in}, 400, `invalid hash algorithm "sha2-999"`},
		{"unknown marshaling", "transit/sign/ec", map[string]any{"input": in, "marshaling_algorithm": "der"}, 400, `invalid marshaling type "der"`},
		{"version too new", "transit/sign/ec", map[string]any{"input": in, "key_version": 2}, 400, "requested version for signing is higher than the latest key version"},
		{"negative version", "transit/sign/ec", map[string]any{"input": in, "key_version": -1}, 400, "requested version for signing is negative"},
		{"salt too long", "transit/sign/rsa", map[string]any{"input": in, "salt_length": 300}, 400, "requested salt length 300 is invalid"},
		{"salt not a number", "transit/sign/rsa", map[string]any{"input": in, "salt_length": "long"}, 400, "salt length neither 'auto', 'hash', nor an int: long"},
		{"hash none with pss", "transit/sign/rsa", map[string]any{"input": in, "hash_algorithm": "none", "prehashed": true}, 400, "hash_algorithm=none requires both prehashed=true and signature_algorithm=pkcs1v15"},
		{"unknown rsa scheme", "transit/sign/rsa", map[string]any{"input": in, "signature_algorithm": "x931"}, 500, "unsupported rsa signature algorithm x931"},
		{"input not base64", "transit/sign/ec", map[string]any{"input": "%%%"}, 400, "unable to decode input as base64"},
		{"key_version not a number", "transit/sign/ec", map[string]any{"input": in, "key_version": "latest"}, 400, `for field "key_version"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Logical().WriteWithContext(t.Context(), tt.path, tt.body)
			wantError(t, err, tt.status, tt.text)
		})
	}
	_, err := c.Logical().ReadWithContext(t.Context(), "transit/sign/ec")
	wantError(t, err, 405, "unsupported operation")
}

// TestKeyLifecycle reads, creates, rotates, configures and trims a key.
func TestKeyLifecycle(t *testing.T) {
	s, c := start(t, Options{})
	if sec, err := c.Logical().ReadWithContext(t.Context(), "transit/keys/k"); sec != nil || err != nil {
		t.Fatalf("unknown key read as %v, %v; want the client's nil, nil for 404", sec, err)
	}
	write(t, c, "transit/keys/k", map[string]any{"type": "ecdsa-p256", "exportable": false})
	again := write(t, c, "transit/keys/k", map[string]any{"type": "rsa-2048"})
	if again.Data["type"] != "ecdsa-p256" || !slices.Equal(again.Warnings, []string{"key k already existed"}) {
		t.Fatalf("creating again: %v %v", again.Data["type"], again.Warnings)
	}
	sec, err := c.Logical().ReadWithContext(t.Context(), "transit/keys/k")
	if err != nil {
		t.Fatal(err)
	}
	d := sec.Data
	if d["name"] != "k" || d["type"] != "ecdsa-p256" || num(t, d["latest_version"]) != 1 || num(t, d["min_available_version"]) != 0 ||
		num(t, d["min_decryption_version"]) != 1 || d["supports_signing"] != true || d["exportable"] != false || d["deletion_allowed"] != false {
		t.Fatalf("key description %v", d)
	}
	v1 := d["keys"].(map[string]any)["1"].(map[string]any)
	if v1["name"] != "P-256" || !strings.HasPrefix(v1["public_key"].(string), "-----BEGIN PUBLIC KEY-----") {
		t.Fatalf("version 1: %v", v1)
	}
	if _, err := time.Parse(time.RFC3339Nano, v1["creation_time"].(string)); err != nil {
		t.Fatalf("creation_time: %v", err)
	}

	rot := write(t, c, "transit/keys/k/rotate", nil)
	if num(t, rot.Data["latest_version"]) != 2 {
		t.Fatalf("rotate answered %v", rot.Data)
	}
	if v, err := s.Rotate("k"); err != nil || v != 3 {
		t.Fatalf("Rotate = %d, %v; want 3", v, err)
	}
	in := map[string]any{"input": base64.StdEncoding.EncodeToString([]byte("m"))}
	if v, _ := signRaw(t, c, "transit/sign/k", in); v != 3 {
		t.Fatalf("latest signed as v%d, want v3", v)
	}
	in["key_version"] = 1
	v, sig := signRaw(t, c, "transit/sign/k", in)
	h := digest(crypto.SHA256, []byte("m"))
	if v != 1 || !verifyECDSA(false)(publicKey(t, c, "k", 1), h, sig) || verifyECDSA(false)(publicKey(t, c, "k", 3), h, sig) {
		t.Fatal("version 1 did not sign when pinned")
	}

	trim := func(min int) error {
		_, err := c.Logical().WriteWithContext(t.Context(), "transit/keys/k/trim", map[string]any{"min_available_version": min})
		return err
	}
	wantError(t, trim(2), 400, "minimum available version cannot be set when minimum encryption version is not set")
	cfg := write(t, c, "transit/keys/k/config", map[string]any{"min_decryption_version": 2, "min_encryption_version": 2})
	if num(t, cfg.Data["min_encryption_version"]) != 2 || num(t, cfg.Data["min_decryption_version"]) != 2 {
		t.Fatalf("config answered %v", cfg.Data)
	}
	_, err = c.Logical().WriteWithContext(t.Context(), "transit/sign/k", in)
	wantError(t, err, 400, "requested version for signing is less than the minimum encryption key version")
	wantError(t, trim(3), 400, "minimum available version cannot be greater than minmum encryption version")
	if err := trim(2); err != nil {
		t.Fatal(err)
	}
	sec, err = c.Logical().ReadWithContext(t.Context(), "transit/keys/k")
	if err != nil {
		t.Fatal(err)
	}
	if keys := sec.Data["keys"].(map[string]any); num(t, sec.Data["min_available_version"]) != 2 || keys["1"] != nil || keys["2"] == nil {
		t.Fatalf("after trim: %v", sec.Data)
	}
	if _, ok := s.PublicKey("k", 1); ok {
		t.Fatal("PublicKey has a trimmed version")
	}
	wantError(t, trim(1), 400, "minimum available version cannot be decremented")
	_, err = c.Logical().WriteWithContext(t.Context(), "transit/keys/k/config", map[string]any{"min_decryption_version": 1})
	wantError(t, err, 400, "min decryption version should not be less then min available version")
	_, err = c.Logical().WriteWithContext(t.Context(), "transit/keys/nope/rotate", nil)
	wantError(t, err, 400, "key not found")

	// Ed25519 public keys are base64, not PEM.
	if err := s.CreateKey("ed", "ed25519"); err != nil {
		t.Fatal(err)
	}
	own, _ := s.PublicKey("ed", 1)
	if !own.(ed25519.PublicKey).Equal(publicKey(t, c, "ed", 1)) {
		t.Fatal("ed25519 public key differs")
	}
	if s.Calls("Rotate") != 2 || s.Calls("CreateKey") != 2 || s.Calls("Trim") != 4 {
		t.Fatalf("calls: rotate %d create %d trim %d", s.Calls("Rotate"), s.Calls("CreateKey"), s.Calls("Trim"))
	}
}

// TestTokens checks token auth: no token or a dead one is refused;
// lookup-self and renew-self answer as Vault's.
func TestTokens(t *testing.T) {
	s, root := start(t, Options{TokenMaxTTL: 2 * time.Hour})
	if err := s.CreateKey("k", "ecdsa-p256"); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"", "hvs.unknown"} {
		_, err := newClient(t, s, tok).Logical().WriteWithContext(t.Context(), "transit/keys/k/rotate", nil)
		wantError(t, err, 403, "permission denied")
	}

	tok := s.IssueToken(time.Hour, true, "Signer")
	c := newClient(t, s, tok)
	sec, err := c.Auth().Token().LookupSelfWithContext(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ttl, _ := sec.TokenTTL()
	renewable, _ := sec.TokenIsRenewable()
	policies, _ := sec.TokenPolicies()
	if ttl < 59*time.Minute || ttl > time.Hour || !renewable || !slices.Equal(policies, []string{"default", "signer"}) || sec.Data["expire_time"] == nil {
		t.Fatalf("lookup-self: ttl %v renewable %v policies %v data %v", ttl, renewable, policies, sec.Data)
	}
	ren, err := c.Auth().Token().RenewSelfWithContext(t.Context(), 5400)
	if err != nil {
		t.Fatal(err)
	}
	if ren.Auth.LeaseDuration < 5399 || ren.Auth.LeaseDuration > 5400 || !ren.Auth.Renewable || ren.Auth.ClientToken != tok || len(ren.Warnings) != 0 {
		t.Fatalf("renew-self: %+v %v", ren.Auth, ren.Warnings)
	}
	// Past the max TTL (2h from issue), the renewal is capped, with
	// Vault's warning.
	ren, err = c.Auth().Token().RenewSelfWithContext(t.Context(), 3*3600)
	if err != nil {
		t.Fatal(err)
	}
	if ren.Auth.LeaseDuration > 7200 || ren.Auth.LeaseDuration < 7190 || len(ren.Warnings) != 1 || !strings.Contains(ren.Warnings[0], "capped") {
		t.Fatalf("capped renew-self: %d %v", ren.Auth.LeaseDuration, ren.Warnings)
	}

	_, err = newClient(t, s, s.IssueToken(time.Hour, false)).Auth().Token().RenewSelfWithContext(t.Context(), 60)
	wantError(t, err, 400, "lease is not renewable")

	sec, err = root.Auth().Token().LookupSelfWithContext(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := sec.TokenPolicies(); !slices.Equal(p, []string{"root"}) || num(t, sec.Data["ttl"]) != 0 || sec.Data["expire_time"] != nil {
		t.Fatalf("root lookup-self: %v", sec.Data)
	}

	s.ExpireToken(tok)
	_, err = c.Auth().Token().LookupSelfWithContext(t.Context())
	wantError(t, err, 403, "permission denied")

	short := newClient(t, s, s.IssueToken(time.Second, true))
	if _, err := short.Auth().Token().LookupSelfWithContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	_, err = short.Auth().Token().LookupSelfWithContext(t.Context())
	wantError(t, err, 403, "permission denied")
	if s.Calls("LookupSelf") != 5 || s.Calls("Renew") != 3 {
		t.Fatalf("calls: lookup-self %d renew %d", s.Calls("LookupSelf"), s.Calls("Renew"))
	}
}

// TestLogins logs in with AppRole and Kubernetes, and uses the tokens.
func TestLogins(t *testing.T) {
	s, _ := start(t, Options{})
	if err := s.CreateKey("k", "ed25519"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPolicy("signer", map[string][]string{"transit/sign/*": {"update"}, "transit/keys/*": {"read"}}); err != nil {
		t.Fatal(err)
	}
	s.AddAppRole("role-1", "secret-1", time.Hour, "signer")
	s.AddKubernetesRole("cardsign", "jwt-of-the-sa", 10*time.Minute, "signer")
	anon := newClient(t, s, "")
	login := func(path string, body map[string]any) (*api.Secret, error) {
		return anon.Logical().WriteWithContext(t.Context(), path, body)
	}

	for _, tt := range []struct {
		path string
		body map[string]any
		ttl  int
	}{
		{"auth/approle/login", map[string]any{"role_id": "role-1", "secret_id": "secret-1"}, 3600},
		{"auth/kubernetes/login", map[string]any{"role": "cardsign", "jwt": "jwt-of-the-sa"}, 600},
	} {
		sec, err := login(tt.path, tt.body)
		if err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		a := sec.Auth
		if a == nil || a.ClientToken == "" || a.LeaseDuration != tt.ttl || !a.Renewable || !slices.Equal(a.Policies, []string{"default", "signer"}) {
			t.Fatalf("%s: auth %+v", tt.path, a)
		}
		c := newClient(t, s, a.ClientToken)
		signRaw(t, c, "transit/sign/k", map[string]any{"input": "bWVzc2FnZQ=="})
		_, err = c.Logical().WriteWithContext(t.Context(), "transit/keys/k/rotate", nil)
		wantError(t, err, 403, "permission denied")
	}

	_, err := login("auth/approle/login", map[string]any{"role_id": "role-1", "secret_id": "wrong"})
	wantError(t, err, 400, "invalid role or secret ID")
	_, err = login("auth/approle/login", map[string]any{"secret_id": "secret-1"})
	wantError(t, err, 400, "missing role_id")
	_, err = login("auth/kubernetes/login", map[string]any{"role": "cardsign", "jwt": "another"})
	wantError(t, err, 403, "permission denied")
	_, err = login("auth/kubernetes/login", map[string]any{"role": "other", "jwt": "jwt-of-the-sa"})
	wantError(t, err, 400, `invalid role name "other"`)
	if s.Calls("Login") != 6 {
		t.Fatalf("Calls(Login) = %d, want 6", s.Calls("Login"))
	}
}

// TestLifetimeWatcher renews a login's token with the client's
// LifetimeWatcher, which renews at once and then at two thirds of the
// lease.
func TestLifetimeWatcher(t *testing.T) {
	s, _ := start(t, Options{})
	s.AddAppRole("r", "s", 30*time.Second)
	c := newClient(t, s, "")
	sec := write(t, c, "auth/approle/login", map[string]any{"role_id": "r", "secret_id": "s"})
	w, err := c.NewLifetimeWatcher(&api.LifetimeWatcherInput{Secret: sec})
	if err != nil {
		t.Fatal(err)
	}
	go w.Start()
	defer w.Stop()
	select {
	case r := <-w.RenewCh():
		if r.Secret.Auth == nil || r.Secret.Auth.LeaseDuration != 30 || r.Secret.Auth.ClientToken != sec.Auth.ClientToken {
			t.Fatalf("renewal %+v", r.Secret.Auth)
		}
	case err := <-w.DoneCh():
		t.Fatalf("watcher stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal")
	}
	if s.Calls("Renew") < 1 {
		t.Fatal("no renew-self reached the server")
	}
}

// TestPolicies shows least-privilege policies: exact paths, globs, the
// most specific rule winning, deny.
func TestPolicies(t *testing.T) {
	s, _ := start(t, Options{})
	for _, k := range []string{"k1", "k2"} {
		if err := s.CreateKey(k, "ecdsa-p256"); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.AddPolicy("k1-signer", map[string][]string{"transit/sign/k1": {"update"}, "transit/keys/k1": {"read"}}))
	must(s.AddPolicy("all-but-k2", map[string][]string{"transit/*": {"read"}, "transit/sign/*": {"update"}, "transit/sign/k2": {"deny"}}))
	in := map[string]any{"input": "bWVzc2FnZQ=="}
	denied := func(c *api.Client, path string) {
		t.Helper()
		_, err := c.Logical().WriteWithContext(t.Context(), path, in)
		wantError(t, err, 403, "permission denied")
	}

	c := newClient(t, s, s.IssueToken(time.Hour, true, "k1-signer"))
	signRaw(t, c, "transit/sign/k1", in)
	denied(c, "transit/sign/k2")
	denied(c, "transit/sign/k1/sha2-384") // an exact rule does not cover the hash in the path
	denied(c, "transit/keys/k1/rotate")
	if _, err := c.Logical().ReadWithContext(t.Context(), "transit/keys/k1"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Logical().ReadWithContext(t.Context(), "transit/keys/k2")
	wantError(t, err, 403, "permission denied")
	if _, err := c.Auth().Token().LookupSelfWithContext(t.Context()); err != nil {
		t.Fatalf("the default policy allows lookup-self: %v", err)
	}

	c = newClient(t, s, s.IssueToken(time.Hour, true, "all-but-k2"))
	signRaw(t, c, "transit/sign/k1/sha2-512", in)
	denied(c, "transit/sign/k2")
	denied(c, "transit/keys/k1/rotate") // "transit/*" grants read only

	denied(newClient(t, s, s.IssueToken(time.Hour, true, "no-such-policy")), "transit/sign/k1")
	for _, bad := range []struct {
		name  string
		paths map[string][]string
	}{
		{"root", map[string][]string{"transit/*": {"read"}}},
		{"typo", map[string][]string{"transit/*": {"raed"}}},
		{"mid-glob", map[string][]string{"transit/*/k1": {"read"}}},
	} {
		if err := s.AddPolicy(bad.name, bad.paths); err == nil {
			t.Errorf("AddPolicy(%s, %v) succeeded", bad.name, bad.paths)
		}
	}
}

// TestNamespace checks the namespace can be addressed by header, path
// prefix, or both, and not addressing it is refused.
func TestNamespace(t *testing.T) {
	s, root := start(t, Options{Namespace: "team/signing"})
	if err := s.CreateKey("k", "ecdsa-p256"); err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"input": "bWVzc2FnZQ=="}
	signRaw(t, root.WithNamespace("team/signing"), "transit/sign/k", in)
	signRaw(t, root.WithNamespace("team"), "signing/transit/sign/k", in)
	signRaw(t, root, "team/signing/transit/sign/k", in)
	_, err := root.Logical().WriteWithContext(t.Context(), "transit/sign/k", in)
	wantError(t, err, 404, `no handler for route "transit/sign/k"`)
	_, err = root.WithNamespace("team/other").Logical().WriteWithContext(t.Context(), "transit/sign/k", in)
	wantError(t, err, 404, "no handler for route")

	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.AddPolicy("signer", map[string][]string{"transit/sign/*": {"update"}}))
	s.AddAppRole("r", "s", time.Hour, "signer")
	anon := newClient(t, s, "")
	body := map[string]any{"role_id": "r", "secret_id": "s"}
	_, err = anon.Logical().WriteWithContext(t.Context(), "auth/approle/login", body)
	wantError(t, err, 404, "no handler for route")
	sec := write(t, anon.WithNamespace("team/signing"), "auth/approle/login", body)
	c := newClient(t, s, sec.Auth.ClientToken)
	signRaw(t, c.WithNamespace("team/signing"), "transit/sign/k", in)
	_, err = c.Logical().WriteWithContext(t.Context(), "transit/sign/k", in)
	wantError(t, err, 403, "permission denied")
	if _, err := root.Auth().Token().LookupSelfWithContext(t.Context()); err != nil {
		t.Fatalf("the root token outside the namespace: %v", err)
	}
}

// TestFaults injects each fault and checks the client sees it.
func TestFaults(t *testing.T) {
	s, c := start(t, Options{})
	if err := s.CreateKey("k", "ecdsa-p256"); err != nil {
		t.Fatal(err)
	}
	s.AddAppRole("r", "s", time.Hour)
	in := map[string]any{"input": "bWVzc2FnZQ=="}
	sign := func() error {
		_, err := c.Logical().WriteWithContext(t.Context(), "transit/sign/k", in)
		return err
	}
	login := func() error {
		_, err := newClient(t, s, "").Logical().WriteWithContext(t.Context(), "auth/approle/login", map[string]any{"role_id": "r", "secret_id": "s"})
		return err
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	must(s.Update(func(o *Options) { o.Unavailable = 2 }))
	must(login()) // auth calls are not faulted by default
	wantError(t, sign(), 503, "Vault is sealed")
	if s.Options().Unavailable != 1 {
		t.Fatalf("Unavailable = %d after one faulted call, want 1", s.Options().Unavailable)
	}
	wantError(t, sign(), 503, "Vault is sealed")
	must(sign())

	must(s.Update(func(o *Options) { o.InternalErrors = 1 }))
	wantError(t, sign(), 500, "internal error")
	must(sign())

	must(s.Update(func(o *Options) { o.Unavailable, o.AuthFaults = 1, true }))
	wantError(t, login(), 503, "Vault is sealed")
	must(s.Update(func(o *Options) { o.AuthFaults = false }))

	must(s.Update(func(o *Options) { o.ThrottleRate = 1 }))
	resp, err := c.Logical().ReadRawWithContext(t.Context(), "transit/keys/k")
	wantError(t, err, 429, `request path "transit/keys/k": rate limit quota exceeded`)
	if resp == nil || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("429 without Retry-After: %v", resp)
	}
	resp.Body.Close()
	must(s.Update(func(o *Options) { o.ThrottleRate = 0 }))

	must(s.Update(func(o *Options) { o.Latency = 150 * time.Millisecond }))
	begin := time.Now()
	must(sign())
	if took := time.Since(begin); took < 150*time.Millisecond {
		t.Fatalf("a call with 150ms latency took %v", took)
	}
	must(s.Update(func(o *Options) { o.Latency = 0 }))

	if err := s.Update(func(o *Options) { o.ThrottleRate, o.Latency = 2, time.Hour }); err == nil {
		t.Fatal("Update accepted a throttle rate of 2")
	}
	if o := s.Options(); o.ThrottleRate != 0 || o.Latency != 0 {
		t.Fatalf("a refused Update changed the options: %+v", o)
	}
	if got := s.Calls("Sign"); got != 6 {
		t.Fatalf("Calls(Sign) = %d, want 6", got)
	}
	if got := s.Calls("ReadKey"); got != 1 {
		t.Fatalf("Calls(ReadKey) = %d, want 1", got)
	}
}

// TestClientRetries shows the client's own retries, with the default
// MaxRetries: two sealed answers pass unseen, but the server counts three
// calls.
func TestClientRetries(t *testing.T) {
	s, err := Start(Options{Unavailable: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateKey("k", "rsa-2048"); err != nil {
		t.Fatal(err)
	}
	cfg := api.NewConfig()
	cfg.Address = s.URL()
	cfg.MinRetryWait, cfg.MaxRetryWait = 5*time.Millisecond, 10*time.Millisecond
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(s.RootToken())
	signRaw(t, c, "transit/sign/k", map[string]any{"input": "bWVzc2FnZQ=="})
	if got := s.Calls("Sign"); got != 3 {
		t.Fatalf("Calls(Sign) = %d, want 3", got)
	}
}

// TestCloseDuringLatency checks Close does not wait out a call's latency.
func TestCloseDuringLatency(t *testing.T) {
	s, c := start(t, Options{Latency: time.Minute})
	if err := s.CreateKey("k", "ed25519"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Logical().WriteWithContext(t.Context(), "transit/sign/k", map[string]any{"input": "bWVzc2FnZQ=="})
		done <- err
	}()
	for s.Calls("Sign") == 0 {
		time.Sleep(time.Millisecond)
	}
	begin := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Fatalf("Close took %v", took)
	}
	if err := <-done; err == nil {
		t.Fatal("a call cut by Close succeeded")
	}
}
