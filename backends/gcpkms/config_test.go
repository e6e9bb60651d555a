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
	"google.golang.org/api/option"
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
