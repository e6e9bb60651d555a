//go:build !nogcpkms

package gcpkms

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestConfig(t *testing.T) {
	key := keyRing + "/cryptoKeys/k"
	tests := []struct {
		name    string
		cfg     Config
		errHas  string
		check   func(Config) bool
		comment string
	}{
		{name: "defaults", cfg: Config{}, check: func(c Config) bool {
			return c.RateLimit == DefaultRateLimit && c.AttemptTimeout == DefaultAttemptTimeout && c.Logger != nil
		}},
		{name: "crypto key URI", cfg: Config{CryptoKey: Scheme + "://" + key}, check: func(c Config) bool { return c.CryptoKey == key }},
		{name: "crypto key name", cfg: Config{CryptoKey: key}, check: func(c Config) bool { return c.CryptoKey == key }},
		{name: "no rate limit", cfg: Config{RateLimit: math.Inf(1)}, check: func(c Config) bool { return math.IsInf(c.RateLimit, 1) }},
		{name: "insecure localhost", cfg: Config{Insecure: true, Endpoint: "localhost:8443"}},
		{name: "insecure IPv6 loopback", cfg: Config{Insecure: true, Endpoint: "[::1]:8443"}},
		{name: "crypto key version", cfg: Config{CryptoKey: key + "/cryptoKeyVersions/1"}, errHas: "want a CryptoKey"},
		{name: "crypto key typo", cfg: Config{CryptoKey: "projects/p/keyRings/r/cryptoKeys/k"}, errHas: "want a CryptoKey"},
		{name: "negative rate", cfg: Config{RateLimit: -1}, errHas: "rate limit"},
		{name: "NaN rate", cfg: Config{RateLimit: math.NaN()}, errHas: "rate limit"},
		{name: "negative attempt timeout", cfg: Config{AttemptTimeout: -time.Second}, errHas: "attempt timeout"},
		{name: "insecure remote", cfg: Config{Insecure: true, Endpoint: "kms.example.com:443"}, errHas: "only loopback"},
		{name: "insecure remote IP", cfg: Config{Insecure: true, Endpoint: "10.0.0.1:443"}, errHas: "only loopback"},
		{name: "insecure default endpoint", cfg: Config{Insecure: true}, errHas: "needs an endpoint"},
		{name: "insecure no port", cfg: Config{Insecure: true, Endpoint: "127.0.0.1"}, errHas: "port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.cfg.normalize()
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("err = %v, want %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil && !tt.check(c) {
				t.Errorf("normalized to %+v", c)
			}
		})
	}
}

// TestNoCredentialsInErrors gives the client an API key and makes calls
// fail (a TLS client against the plaintext fake; a missing key): neither
// errors nor logs may contain the key.
func TestNoCredentialsInErrors(t *testing.T) {
	const secret = "AIzaSy-cardsign-test-secret-4c1d2e"
	f := newFake(t, gcpkmsfake.Options{})
	_, uri := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	logs := &testsupport.SyncBuffer{}
	cfg := Config{Endpoint: f.Addr(), ClientOptions: []option.ClientOption{option.WithAPIKey(secret)}}
	cfg.Logger = newTestLogger(logs)
	b, err := New(t.Context(), cfg)
	if err != nil {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("New leaks the key: %v", err)
		}
		t.Fatalf("New: %v", err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err = b.Open(ctx, uri)
	if err == nil {
		t.Fatal("TLS to a plaintext server succeeded")
	}
	t.Logf("Open: %v", err)
	if !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("a server that cannot be reached: %v, want unavailability", err)
	}
	for what, text := range map[string]string{"error": err.Error(), "log": logs.String()} {
		if strings.Contains(text, secret) {
			t.Errorf("the %s contains the API key: %s", what, text)
		}
	}
}

// TestCreate adds versions to CryptoKeys of each supported template and
// signs with them.
func TestCreate(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	tests := []struct {
		template kmspb.CryptoKeyVersion_CryptoKeyVersionAlgorithm
		alg      jose.Alg
	}{
		{kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256, jose.ES256},
		{kmspb.CryptoKeyVersion_EC_SIGN_P384_SHA384, jose.ES384},
		{kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_2048_SHA256, jose.RS256},
		{kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256, jose.PS256},
		{kmspb.CryptoKeyVersion_EC_SIGN_ED25519, jose.EdDSA},
	}
	for _, tt := range tests {
		t.Run(string(tt.alg), func(t *testing.T) {
			key, first := addKey(t, f, tt.template)
			b, _ := newBackend(t, f, Config{CryptoKey: key})
			uri, err := b.Create(t.Context(), backends.CreateRequest{Alg: tt.alg, Name: "cardsign-20250101T000000Z-0123"})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if want := strings.TrimSuffix(first, "1") + "2"; uri != want {
				t.Errorf("Create = %q, want %q", uri, want)
			}
			if st, err := f.State(nameOf(uri)); err != nil || st != kmspb.CryptoKeyVersion_ENABLED {
				t.Errorf("new version state %v, %v", st, err)
			}
			signWith(t, b, uri, tt.alg)
		})
	}
}

// signWith opens uri, signs and verifies with its JWK.
func signWith(t *testing.T, b *Backend, uri string, alg jose.Alg) {
	t.Helper()
	h, err := b.Open(t.Context(), uri)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if h.Alg != alg {
		t.Errorf("alg %q, want %q", h.Alg, alg)
	}
	sig, err := jose.Sign(t.Context(), h.Signer, alg, []byte("e30.e30"))
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	jwk, _ := jose.NewJWK(h.Signer.Public(), "", alg)
	pub, _ := jwk.PublicKey()
	if err := jose.Verify(alg, pub, []byte("e30.e30"), sig); err != nil {
		t.Error(err)
	}
}

// TestCreatePending: an HSM-like version that is PENDING_GENERATION at
// first is waited for, within the deadline.
func TestCreatePending(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{Pending: 400 * time.Millisecond})
	key, _ := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	b, _ := newBackend(t, f, Config{CryptoKey: key})

	start := time.Now()
	uri, err := b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256, Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("Create returned after %v, before the version was generated", d)
	}
	if f.Calls("GetCryptoKeyVersion") < 2 {
		t.Errorf("%d polls", f.Calls("GetCryptoKeyVersion"))
	}
	signWith(t, b, uri, jose.ES256)

	// A deadline before the generation ends: a clear error naming the state.
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	_, err = b.Create(ctx, backends.CreateRequest{Alg: jose.ES256, Name: "x"})
	var ks *KeyStateError
	if !errors.As(err, &ks) || ks.State != "PENDING_GENERATION" || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want *KeyStateError PENDING_GENERATION at the deadline", err)
	}
}

// TestCreateErrors: a template of another alg, a key that cannot sign, no
// CryptoKey: each refused before any version is made.
func TestCreateErrors(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	p256, _ := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	rsa, _ := addKey(t, f, kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_2048_SHA256)
	secp, _ := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_SECP256K1_SHA256)
	sym, _ := addKey(t, f, kmspb.CryptoKeyVersion_GOOGLE_SYMMETRIC_ENCRYPTION)

	mismatch := func(want, template string, have jose.Alg) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			var e *AlgorithmMismatchError
			if !errors.As(err, &e) || string(e.Want) != want || e.Template != template || e.Have != have {
				t.Errorf("err = %v, want *AlgorithmMismatchError %s vs %s", err, want, template)
			}
			if !strings.Contains(err.Error(), template) || !strings.Contains(err.Error(), want) {
				t.Errorf("error %q should name both algorithms", err)
			}
		}
	}
	tests := []struct {
		name  string
		cfg   string // Config.CryptoKey
		req   backends.CreateRequest
		check func(*testing.T, error)
		key   string // where no version may appear
	}{
		{"RS256 from a P-256 template", p256, backends.CreateRequest{Alg: jose.RS256, Name: "x"}, mismatch("RS256", "EC_SIGN_P256_SHA256", jose.ES256), p256},
		{"ES384 from a P-256 template", p256, backends.CreateRequest{Alg: jose.ES384, Name: "x"}, mismatch("ES384", "EC_SIGN_P256_SHA256", jose.ES256), p256},
		{"PS256 from a PKCS#1 template", rsa, backends.CreateRequest{Alg: jose.PS256, Name: "x"}, mismatch("PS256", "RSA_SIGN_PKCS1_2048_SHA256", jose.RS256), rsa},
		{"unsupported template", secp, backends.CreateRequest{Alg: jose.ES256, Name: "x"}, mismatch("ES256", "EC_SIGN_SECP256K1_SHA256", ""), secp},
		{"symmetric key", sym, backends.CreateRequest{Alg: jose.ES256, Name: "x"}, func(t *testing.T, err error) {
			if !errors.As(err, new(*UnsupportedAlgorithmError)) || !strings.Contains(err.Error(), "ENCRYPT_DECRYPT") {
				t.Errorf("err = %v, want *UnsupportedAlgorithmError naming the purpose", err)
			}
		}, sym},
		{"no CryptoKey", "", backends.CreateRequest{Alg: jose.ES256, Name: "x"}, func(t *testing.T, err error) {
			if err == nil || !strings.Contains(err.Error(), "no CryptoKey configured") {
				t.Errorf("err = %v", err)
			}
		}, ""},
		{"bad alg", p256, backends.CreateRequest{Alg: "HS256", Name: "x"}, func(t *testing.T, err error) {
			if !errors.Is(err, jose.ErrUnsupportedAlg) {
				t.Errorf("err = %v", err)
			}
		}, p256},
		{"missing CryptoKey", keyRing + "/cryptoKeys/absent", backends.CreateRequest{Alg: jose.ES256, Name: "x"}, func(t *testing.T, err error) {
			if !errors.As(err, new(*KeyNotFoundError)) {
				t.Errorf("err = %v, want *KeyNotFoundError", err)
			}
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newBackend(t, f, Config{CryptoKey: tt.cfg})
			var n int
			if tt.key != "" {
				v, _ := f.Versions(tt.key)
				n = len(v)
			}
			uri, err := b.Create(t.Context(), tt.req)
			if err == nil {
				t.Fatalf("Create = %q", uri)
			}
			tt.check(t, err)
			if tt.key != "" {
				if v, _ := f.Versions(tt.key); len(v) != n {
					t.Errorf("a version was created: %v", v)
				}
			}
		})
	}
}

// TestCreateName: a CryptoKey in CreateRequest.Name overrides the
// configured one.
func TestCreateName(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	conf, _ := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	other, _ := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P384_SHA384)
	b, _ := newBackend(t, f, Config{CryptoKey: conf})
	for _, name := range []string{other, Scheme + "://" + other} {
		uri, err := b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES384, Name: name})
		if err != nil {
			t.Fatalf("Create(%q): %v", name, err)
		}
		if !strings.HasPrefix(uri, Scheme+"://"+other+"/cryptoKeyVersions/") {
			t.Errorf("Create(%q) = %q", name, uri)
		}
	}
	if v, _ := f.Versions(conf); len(v) != 1 {
		t.Errorf("the configured key got versions: %v", v)
	}
}

// TestCreateNotRepeated: creating is retried when Cloud KMS refused it
// outright (UNAVAILABLE), making one version, but an attempt that timed out,
// which may have created a version, is not repeated.
func TestCreateNotRepeated(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	key, _ := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	b, _ := newBackend(t, f, Config{CryptoKey: key})

	f.Update(func(o *gcpkmsfake.Options) { o.Unavailable = 2 })
	if _, err := b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256, Name: "x"}); err != nil {
		t.Fatalf("Create after UNAVAILABLE: %v", err)
	}
	if v, _ := f.Versions(key); len(v) != 2 {
		t.Errorf("versions %v, want 2", v)
	}

	tests := []struct {
		code  codes.Code
		once  bool
		calls int
	}{
		{codes.DeadlineExceeded, true, 1},
		{codes.DeadlineExceeded, false, 3},
		{codes.Unavailable, true, 3},
		{codes.ResourceExhausted, true, 3},
		{codes.Internal, false, 1},
		{codes.InvalidArgument, false, 1},
		{codes.PermissionDenied, false, 1},
	}
	for _, tt := range tests {
		calls := 0
		err := b.call(t.Context(), op{what: "test", name: key, once: tt.once}, func(context.Context) error {
			if calls++; calls < 3 {
				return status.Error(tt.code, "injected")
			}
			return nil
		})
		if calls != tt.calls || (err == nil) != (tt.calls == 3) {
			t.Errorf("%v once=%v: %d calls, err %v; want %d calls", tt.code, tt.once, calls, err, tt.calls)
		}
	}
}
