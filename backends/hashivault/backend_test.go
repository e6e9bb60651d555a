//go:build !novault

package hashivault

import (
	"cmp"
	"context"
	"crypto"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/backendtest"
	"github.com/cardsign/cardsign/backends/hashivault/vaultfake"
	"github.com/cardsign/cardsign/jose"
)

var keySeq atomic.Int64

// TestContract runs the backend contract against the fake.
func TestContract(t *testing.T) {
	e := newEnv(t, Config{Key: "rotated"}, vaultfake.Options{})
	typeOf := map[jose.Alg]string{jose.ES256: "ecdsa-p256", jose.ES384: "ecdsa-p384", jose.ES512: "ecdsa-p521",
		jose.RS256: "rsa-2048", jose.PS256: "rsa-2048", jose.EdDSA: "ed25519"}
	backendtest.Run(t, backendtest.Env{
		Backend: e.b,
		Algs:    []jose.Alg{jose.ES256, jose.ES384, jose.ES512, jose.RS256, jose.PS256, jose.EdDSA},
		MakeKey: func(t *testing.T, alg jose.Alg) string {
			name := fmt.Sprintf("k%d", keySeq.Add(1))
			e.key(t, name, typeOf[alg])
			return keyURI(name, 1, alg)
		},
		Missing:    "hashivault://absent/1",
		CreateAlgs: []jose.Alg{jose.ES256},
		Secrets:    []string{e.fake.RootToken()},
	})
}

// TestVersionPinned: a URI without a version pins the latest at Open, and
// a rotation at Vault changes neither that key nor a URI with a version
// (cosign#1351: verification broke when "latest" moved).
func TestVersionPinned(t *testing.T) {
	e := newEnv(t, Config{}, vaultfake.Options{})
	e.key(t, "cards", "ecdsa-p256")
	k1, err := backends.OpenWith(t.Context(), e.b, "hashivault://cards", backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := e.fake.Rotate("cards"); err != nil || v != 2 {
		t.Fatalf("Rotate: %d, %v", v, err)
	}
	pub1, _ := e.fake.PublicKey("cards", 1)
	pub2, _ := e.fake.PublicKey("cards", 2)
	if !k1.Signer.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub1) {
		t.Fatal("the key opened before the rotation is not version 1")
	}
	sig, err := jose.Sign(t.Context(), k1.Signer, k1.Alg, []byte("eyJ9.after-rotation"))
	if err != nil {
		t.Fatal(err)
	}
	if err := jose.Verify(k1.Alg, pub1, []byte("eyJ9.after-rotation"), sig); err != nil {
		t.Fatalf("after a rotation at Vault the pinned key did not sign with version 1: %v", err)
	}
	k2, err := backends.OpenWith(t.Context(), e.b, "hashivault://cards/2", backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !k2.Signer.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub2) {
		t.Fatal("hashivault://cards/2 is not version 2")
	}
	if _, err := backends.OpenWith(t.Context(), e.b, "hashivault://cards/3", backends.OpenOptions{}); !errors.Is(err, backends.ErrKeyNotFound) {
		t.Fatalf("version 3 of a key at version 2: %v, want ErrKeyNotFound", err)
	}
}

// TestCreate: Create makes the configured key of the alg's type, then
// rotates it; each URI names its version; a key of another type is
// refused with the reason.
func TestCreate(t *testing.T) {
	e := newEnv(t, Config{Key: "signing"}, vaultfake.Options{})
	for i, want := range []string{"hashivault://signing/1?alg=PS256", "hashivault://signing/2?alg=PS256"} {
		uri, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: jose.PS256})
		if err != nil || uri != want {
			t.Fatalf("Create %d: %q, %v; want %q", i, uri, err, want)
		}
		k, err := backends.OpenWith(t.Context(), e.b, uri, backends.OpenOptions{})
		if err != nil || k.Alg != jose.PS256 {
			t.Fatalf("open %s: %v, %v", uri, k.Alg, err)
		}
	}
	_, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256})
	var ue *UnsupportedKeyError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "rsa-3072") {
		t.Fatalf("Create ES256 on an RSA key: %v, want an *UnsupportedKeyError naming the type", err)
	}
	none := e.newBackend(t, Config{Auth: Auth{Token: e.fake.RootToken()}})
	var pe *backends.PreconditionError
	if _, err := none.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256}); !errors.As(err, &pe) || !strings.Contains(err.Error(), "hashivault.key") {
		t.Fatalf("Create without a key: %v", err)
	}
}

// TestAuthMethods: AppRole and Kubernetes logins, a least-privilege policy,
// renewal, a new login after Vault forgets the token, and refusals that
// say what to grant.
func TestAuthMethods(t *testing.T) {
	e := newEnv(t, Config{}, vaultfake.Options{})
	e.key(t, "cards", "ecdsa-p256")
	e.key(t, "other", "ecdsa-p256")
	// What docs/keys.md grants cardsignd to sign with one key.
	if err := e.fake.AddPolicy("cardsign-sign", map[string][]string{
		"transit/keys/cards": {"read"}, "transit/sign/cards": {"update"}}); err != nil {
		t.Fatal(err)
	}
	e.fake.AddAppRole("role-1", "secret-1", time.Hour, "cardsign-sign")
	jwt := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(jwt, []byte("eyJhbGciOiJSUzI1NiJ9.sa-token.sig\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.fake.AddKubernetesRole("cardsign", "eyJhbGciOiJSUzI1NiJ9.sa-token.sig", time.Hour, "cardsign-sign")
	for _, a := range []Auth{
		{Method: AuthAppRole, RoleID: "role-1", SecretID: "secret-1"},
		{Method: AuthKubernetes, Role: "cardsign", JWTFile: jwt},
		{Token: e.fake.IssueToken(time.Hour, true, "cardsign-sign")},
	} {
		t.Run(cmp.Or(a.Method, AuthToken), func(t *testing.T) {
			b := e.newBackend(t, Config{Auth: a})
			k, err := backends.OpenWith(t.Context(), b, "hashivault://cards/1", backends.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := jose.Sign(t.Context(), k.Signer, k.Alg, []byte("eyJ9.x")); err != nil {
				t.Fatal(err)
			}
			logins := e.fake.Calls("Login")
			_, err = backends.OpenWith(t.Context(), b, "hashivault://other/1", backends.OpenOptions{})
			if got := e.fake.Calls("Login") - logins; got != 0 {
				t.Errorf("a policy's refusal made %d logins: only a refused token should", got)
			}
			var de *DeniedError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), "transit/keys/other") {
				t.Fatalf("a key the policy does not grant: %v, want a *DeniedError naming the path", err)
			}
			if a.Method == "" {
				return
			}
			// Vault forgets the token: the next call logs in again.
			e.fake.ExpireToken(b.sess.current())
			if _, err := jose.Sign(t.Context(), k.Signer, k.Alg, []byte("eyJ9.y")); err != nil {
				t.Fatalf("after the token expired: %v", err)
			}
		})
	}
	bad := e.newBackend(t, Config{Auth: Auth{Method: AuthAppRole, RoleID: "role-1", SecretID: "wrong-secret"}})
	_, err := bad.Open(t.Context(), "hashivault://cards/1")
	var le *LoginError
	if !errors.As(err, &le) || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("a wrong secret ID: %v", err)
	}
}

// TestTokenRenewal: a renewable token is renewed before it expires, so an
// idle backend still signs after the token's first TTL.
func TestTokenRenewal(t *testing.T) {
	e := newEnv(t, Config{}, vaultfake.Options{})
	e.key(t, "cards", "ed25519")
	if err := e.fake.AddPolicy("signer", map[string][]string{"transit/*": {"read", "update"}}); err != nil {
		t.Fatal(err)
	}
	e.fake.AddAppRole("r", "s", 3*time.Second, "signer")
	b := e.newBackend(t, Config{Auth: Auth{Method: AuthAppRole, RoleID: "r", SecretID: "s"}})
	k, err := backends.OpenWith(t.Context(), b, "hashivault://cards/1", backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logins := e.fake.Calls("Login")
	time.Sleep(5 * time.Second)
	if e.fake.Calls("Renew") == 0 {
		t.Fatalf("no renewal in 5s of a 3s token\n%s", e.logs.String())
	}
	if _, err := jose.Sign(t.Context(), k.Signer, k.Alg, []byte("eyJ9.later")); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.Calls("Login"); got != logins {
		t.Errorf("%d logins after the first: the token should have been renewed, not replaced", got-logins)
	}
}

// TestFaults: throttling and a sealed Vault are retried within the
// deadline; an outage past it is unavailability; a rotation is not
// repeated after a 500.
func TestFaults(t *testing.T) {
	e := newEnv(t, Config{Key: "rot"}, vaultfake.Options{})
	e.key(t, "cards", "ecdsa-p256")
	k, err := backends.OpenWith(t.Context(), e.b, "hashivault://cards/1", backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(ctx context.Context) error {
		_, err := jose.Sign(ctx, k.Signer, k.Alg, []byte("eyJ9.fault"))
		return err
	}
	_ = e.fake.Update(func(o *vaultfake.Options) { o.ThrottleRate = 0.5 })
	for range 10 {
		if err := sign(t.Context()); err != nil {
			t.Fatalf("under 50%% throttling: %v", err)
		}
	}
	if e.b.Stats().Throttled == 0 {
		t.Error("throttling not counted")
	}
	_ = e.fake.Update(func(o *vaultfake.Options) { o.ThrottleRate, o.Unavailable = 0, 3 })
	if err := sign(t.Context()); err != nil {
		t.Fatalf("after 3 sealed answers: %v", err)
	}
	_ = e.fake.Update(func(o *vaultfake.Options) { o.Unavailable = 1 << 20 })
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err = sign(ctx)
	var ue *UnavailableError
	if !errors.Is(err, backends.ErrUnavailable) || !errors.As(err, &ue) || !strings.Contains(err.Error(), "sealed") {
		t.Fatalf("a sealed Vault past the deadline: %v, want an *UnavailableError saying sealed", err)
	}
	e.key(t, "rot", "ecdsa-p256")
	_ = e.fake.Update(func(o *vaultfake.Options) { o.Unavailable, o.InternalErrors = 0, 1 })
	before := e.fake.Calls("Rotate")
	if _, err := e.b.rotate(t.Context()); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("a rotation answered 500: %v, want unavailability (not repeated)", err)
	}
	if got := e.fake.Calls("Rotate") - before; got != 1 {
		t.Fatalf("a rotation answered 500 was sent %d times, want 1", got)
	}
	// A rotation whose attempt timed out may have happened: not sent again.
	slow := e.newBackend(t, Config{Key: "rot", AttemptTimeout: 100 * time.Millisecond, Auth: Auth{Token: e.fake.RootToken()}})
	if _, err := slow.readKey(t.Context(), "rot"); err != nil {
		t.Fatal(err)
	}
	_ = e.fake.Update(func(o *vaultfake.Options) { o.InternalErrors, o.Latency = 0, 300*time.Millisecond })
	before = e.fake.Calls("Rotate")
	if _, err := slow.rotate(t.Context()); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("a rotation that timed out: %v, want unavailability (not repeated)", err)
	}
	if got := e.fake.Calls("Rotate") - before; got != 1 {
		t.Fatalf("a rotation that timed out was sent %d times, want 1", got)
	}
	_ = e.fake.Update(func(o *vaultfake.Options) { o.Latency = 0 })
}

// TestNamespace: the backend's namespace reaches Transit and the login;
// without it the key is not found.
func TestNamespace(t *testing.T) {
	e := newEnv(t, Config{Namespace: "team/signing"}, vaultfake.Options{Namespace: "team/signing"})
	e.key(t, "cards", "ecdsa-p384")
	e.fake.AddAppRole("r", "s", time.Hour, "root")
	for _, a := range []Auth{{Token: e.fake.RootToken()}, {Method: AuthAppRole, RoleID: "r", SecretID: "s"}} {
		b := e.newBackend(t, Config{Namespace: "team/signing", Auth: a})
		if _, err := backends.OpenWith(t.Context(), b, "hashivault://cards/1", backends.OpenOptions{}); err != nil {
			t.Fatalf("%s in the namespace: %v", a.Method, err)
		}
	}
	outside := e.newBackend(t, Config{Auth: Auth{Token: e.fake.RootToken()}})
	if _, err := backends.OpenWith(t.Context(), outside, "hashivault://cards/1", backends.OpenOptions{}); err == nil {
		t.Fatal("a key in a namespace opened without it")
	}
}

// TestTrimmed: a version trimmed at Vault no longer signs, and says so.
func TestTrimmed(t *testing.T) {
	e := newEnv(t, Config{}, vaultfake.Options{})
	e.key(t, "cards", "ecdsa-p256")
	k, err := backends.OpenWith(t.Context(), e.b, "hashivault://cards/1", backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.Rotate("cards"); err != nil {
		t.Fatal(err)
	}
	c, err := api.NewClient(&api.Config{Address: e.fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(e.fake.RootToken())
	for _, w := range []struct {
		path string
		body map[string]any
	}{
		{"transit/keys/cards/config", map[string]any{"min_decryption_version": 2, "min_encryption_version": 2}},
		{"transit/keys/cards/trim", map[string]any{"min_available_version": 2}},
	} {
		if _, err := c.Logical().Write(w.path, w.body); err != nil {
			t.Fatalf("%s: %v", w.path, err)
		}
	}
	_, err = jose.Sign(t.Context(), k.Signer, k.Alg, []byte("eyJ9.gone"))
	if !errors.Is(err, backends.ErrKeyNotFound) {
		t.Fatalf("signing with a trimmed version: %v, want ErrKeyNotFound", err)
	}
	if _, err := backends.OpenWith(t.Context(), e.b, "hashivault://cards/1", backends.OpenOptions{}); !errors.Is(err, backends.ErrKeyNotFound) || !strings.Contains(err.Error(), "trimmed") {
		t.Fatalf("opening a trimmed version: %v", err)
	}
}

// TestStaticToken: a token from a file is read again after Vault refuses
// it (a Vault Agent sink rewrote it); a static token that expired fails at
// once, saying so, instead of retrying until the deadline.
func TestStaticToken(t *testing.T) {
	e := newEnv(t, Config{}, vaultfake.Options{})
	e.key(t, "cards", "ecdsa-p256")
	file := filepath.Join(t.TempDir(), "token")
	first := e.fake.IssueToken(time.Hour, false, "root")
	if err := os.WriteFile(file, []byte(first+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := e.newBackend(t, Config{Auth: Auth{TokenFile: file}})
	k, err := backends.OpenWith(t.Context(), b, "hashivault://cards/1", backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.fake.ExpireToken(first)
	if err := os.WriteFile(file, []byte(e.fake.IssueToken(time.Hour, false, "root")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := jose.Sign(t.Context(), k.Signer, k.Alg, []byte("eyJ9.new-token")); err != nil {
		t.Fatalf("after the token file was rewritten: %v", err)
	}

	short := e.newBackend(t, Config{Auth: Auth{Token: e.fake.IssueToken(2*time.Second, false, "root")}})
	k2, err := backends.OpenWith(t.Context(), short, "hashivault://cards/1", backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	start := time.Now()
	_, err = jose.Sign(t.Context(), k2.Signer, k2.Alg, []byte("eyJ9.expired"))
	var le *LoginError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "expired") || time.Since(start) > 2*time.Second {
		t.Fatalf("an expired static token: %v after %v, want a *LoginError at once", err, time.Since(start))
	}
}
