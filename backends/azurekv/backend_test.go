//go:build !noazurekv

package azurekv

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/azurekv/azurekvfake"
	"github.com/cardsign/cardsign/backends/backendtest"
	"github.com/cardsign/cardsign/jose"
)

var keySeq atomic.Int64

// TestContract runs the backend contract against the fake.
func TestContract(t *testing.T) {
	e := newEnv(t, Config{}, azurekvfake.Options{})
	e.b = e.newBackend(t, Config{Key: Scheme + "://" + e.fake.Host() + "/keys/rotated"})
	spec := map[jose.Alg][2]string{jose.ES256: {"EC", "P-256"}, jose.ES384: {"EC-HSM", "P-384"}, jose.ES512: {"EC", "P-521"},
		jose.RS256: {"RSA", "2048"}, jose.PS256: {"RSA-HSM", "2048"}}
	backendtest.Run(t, backendtest.Env{
		Backend: e.b,
		Algs:    []jose.Alg{jose.ES256, jose.ES384, jose.ES512, jose.RS256, jose.PS256},
		MakeKey: func(t *testing.T, alg jose.Alg) string {
			name := fmt.Sprintf("k%d", keySeq.Add(1))
			uri := e.key(t, name, spec[alg][0], spec[alg][1])
			if alg == jose.PS256 {
				uri += "?alg=PS256"
			}
			return uri
		},
		Missing:    keyURI(e.fake.Host(), "absent", strings.Repeat("ab", 16), ""),
		CreateAlgs: []jose.Alg{jose.ES256, jose.PS256},
		DisableAtProvider: func(t *testing.T, uri string) {
			ref, err := parseURI(uri)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.fake.SetEnabled(ref.name, ref.version, false); err != nil {
				t.Fatal(err)
			}
		},
		Secrets: []string{e.fake.IdentityHeader()},
	})
}

// TestHostAllowList: a URI naming a host the configuration does not allow
// is refused before any request, so no token goes there.
func TestHostAllowList(t *testing.T) {
	e := newEnv(t, Config{}, azurekvfake.Options{})
	uri := e.key(t, "cards", "EC", "P-256")
	strict := e.newBackend(t, Config{AllowedHosts: []string{".vault.azure.net"}})
	tokens, gets := e.fake.Calls("Token"), e.fake.Calls("GetKey")
	_, err := strict.Open(t.Context(), uri)
	var he *HostError
	if !errors.As(err, &he) || !strings.Contains(err.Error(), "allowed_hosts") {
		t.Fatalf("a host not allowed: %v, want a *HostError saying where to allow it", err)
	}
	if e.fake.Calls("Token") != tokens || e.fake.Calls("GetKey") != gets {
		t.Fatal("a request was made for a host that is not allowed")
	}
	for _, uri := range []string{"azurekv://evil.vault.azure.net.example/keys/k", "azurekv://vault.azure.net/keys/k"} {
		if _, err := strict.Open(t.Context(), uri); !errors.As(err, &he) {
			t.Errorf("%s: %v, want a *HostError", uri, err)
		}
	}
	if _, err := New(t.Context(), Config{AllowedHosts: []string{"a/b"}}); err == nil {
		t.Error("an allowed host with a path was accepted")
	}
}

// TestVersionPinned: a URI without a version pins the current version at
// Open; a new version at the vault changes nothing for it.
func TestVersionPinned(t *testing.T) {
	e := newEnv(t, Config{}, azurekvfake.Options{})
	e.key(t, "cards", "EC", "P-256")
	k, err := backends.OpenWith(t.Context(), e.b, Scheme+"://"+e.fake.Host()+"/keys/cards", backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v1 := e.fake.Versions("cards")[0]
	e.key(t, "cards", "EC", "P-256")
	pub1, _ := e.fake.PublicKey("cards", v1)
	if !k.Signer.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub1) {
		t.Fatal("the key opened is not the first version")
	}
	input := []byte("eyJ9.pinned")
	sig, err := jose.Sign(t.Context(), k.Signer, k.Alg, input)
	if err != nil {
		t.Fatal(err)
	}
	if err := jose.Verify(k.Alg, pub1, input, sig); err != nil {
		t.Fatalf("after a new version the pinned key signed with another: %v", err)
	}
}

// TestFaults: throttling and 503 are retried within the deadline; an
// outage past it is unavailability; CreateKey is not repeated after a 500;
// a credential that cannot get a token fails at once.
func TestFaults(t *testing.T) {
	e := newEnv(t, Config{}, azurekvfake.Options{})
	e.b = e.newBackend(t, Config{Key: Scheme + "://" + e.fake.Host() + "/keys/rotated"})
	k, err := backends.OpenWith(t.Context(), e.b, e.key(t, "cards", "EC", "P-384"), backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(ctx context.Context) error {
		_, err := jose.Sign(ctx, k.Signer, k.Alg, []byte("eyJ9.fault"))
		return err
	}
	_ = e.fake.Update(func(o *azurekvfake.Options) { o.ThrottleRate, o.RetryAfter = 0.5, "0" })
	for range 10 {
		if err := sign(t.Context()); err != nil {
			t.Fatalf("under 50%% throttling: %v", err)
		}
	}
	if e.b.Stats().Throttled == 0 {
		t.Error("throttling not counted")
	}
	// Retry-After is honoured: with every call throttled and "wait 1s", a
	// call with 1.5s to live tries at most twice, a second apart (once, if
	// the first attempt left less than a second), then gives up; without
	// it, the 50ms backoff would try a dozen times.
	_ = e.fake.Update(func(o *azurekvfake.Options) { o.ThrottleRate, o.RetryAfter = 1, "1" })
	signs := e.fake.Calls("Sign")
	ctx15, cancel15 := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	start := time.Now()
	err = sign(ctx15)
	cancel15()
	if n, took := e.fake.Calls("Sign")-signs, time.Since(start); !errors.Is(err, backends.ErrUnavailable) || n < 1 || n > 2 || (n == 2 && took < time.Second) {
		t.Fatalf("throttled with Retry-After 1: %v after %v and %d attempts, want unavailability after at most 2 attempts a second apart", err, took, n)
	}
	_ = e.fake.Update(func(o *azurekvfake.Options) { o.ThrottleRate, o.RetryAfter, o.Unavailable = 0, "", 3 })
	if err := sign(t.Context()); err != nil {
		t.Fatalf("after three 503s: %v", err)
	}
	_ = e.fake.Update(func(o *azurekvfake.Options) { o.Unavailable = 1 << 20 })
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := sign(ctx); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("503 past the deadline: %v, want ErrUnavailable", err)
	}
	_ = e.fake.Update(func(o *azurekvfake.Options) { o.Unavailable, o.InternalErrors = 0, 1 })
	before := e.fake.Calls("CreateKey")
	if _, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256}); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("CreateKey answered 500: %v, want unavailability (not repeated)", err)
	}
	if got := e.fake.Calls("CreateKey") - before; got != 1 {
		t.Fatalf("CreateKey answered 500 was sent %d times, want 1", got)
	}
	t.Setenv("IDENTITY_HEADER", "wrong-header")
	nocred := e.newBackend(t, Config{})
	start = time.Now()
	if _, err := nocred.Open(t.Context(), e.key(t, "more", "EC", "P-256")); err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("a credential refused its token: %v after %v, want an error at once", err, time.Since(start))
	}
}

// TestDisabledRefusesOpen: a disabled version is refused at Open with
// the reason, and Disable needs a version.
func TestDisabledRefusesOpen(t *testing.T) {
	e := newEnv(t, Config{}, azurekvfake.Options{})
	uri := e.key(t, "cards", "RSA", "2048")
	if err := e.b.Disable(t.Context(), uri); err != nil {
		t.Fatal(err)
	}
	_, err := e.b.Open(t.Context(), uri)
	if !errors.Is(err, backends.ErrKeyDisabled) || !strings.Contains(err.Error(), "disabled") {
		t.Fatalf("opening a disabled version: %v", err)
	}
	var ue *backends.URIError
	if err := e.b.Disable(t.Context(), Scheme+"://"+e.fake.Host()+"/keys/cards"); !errors.As(err, &ue) {
		t.Fatalf("Disable without a version: %v, want a *backends.URIError", err)
	}
}

func TestParseURI(t *testing.T) {
	v := strings.Repeat("0a", 16)
	tests := []struct {
		uri  string
		want keyRef
		bad  string
	}{
		{uri: "azurekv://v.vault.azure.net/keys/cards/" + v, want: keyRef{host: "v.vault.azure.net", name: "cards", version: v}},
		{uri: "AzureKV://V.Vault.Azure.Net/keys/cards", want: keyRef{host: "v.vault.azure.net", name: "cards"}},
		{uri: "azurekv://127.0.0.1:8443/keys/a-b/" + v + "?alg=PS256", want: keyRef{host: "127.0.0.1:8443", name: "a-b", version: v, alg: jose.PS256}},
		{uri: "azurekv://v.vault.azure.net/secrets/cards", bad: "keys/NAME"},
		{uri: "azurekv://v.vault.azure.net/keys/ca_rds", bad: "key name"},
		{uri: "azurekv://v.vault.azure.net/keys/cards/latest", bad: "32 hexadecimal"},
		{uri: "azurekv://user@v.vault.azure.net/keys/cards", bad: "DNS name"},
		{uri: "azurekv://v.vault.azure.net/keys/cards?api-version=1", bad: "unknown query"},
		{uri: "azurekv://v.vault.azure.net/keys/cards/" + v + "/x", bad: "keys/NAME"},
	}
	for _, tt := range tests {
		got, err := parseURI(tt.uri)
		if tt.bad != "" {
			var ue *backends.URIError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.bad) {
				t.Errorf("parseURI(%q) = %v, want a *backends.URIError with %q", tt.uri, err, tt.bad)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseURI(%q) = %+v, %v; want %+v", tt.uri, got, err, tt.want)
		}
	}
}

// TestKIDParts: a kid of any shape is read without a panic (the SDK's
// ID.Name dereferences nil on some).
func TestKIDParts(t *testing.T) {
	v := strings.Repeat("ab", 16)
	for kid, want := range map[string][2]string{
		"https://v.vault.azure.net/keys/k/" + v:        {"k", v},
		"https://v.vault.azure.net/keys/k":             {"k", ""},
		"https://v.vault.azure.net/keys":               {"", ""},
		"https://v.vault.azure.net/secrets/k/1":        {"", ""},
		"https://v.vault.azure.net/keys/k/" + v + "/x": {"", ""},
		"%zz": {"", ""},
		"":    {"", ""},
	} {
		id := azkeys.ID(kid)
		if n, ver := kidParts(&id); n != want[0] || ver != want[1] {
			t.Errorf("kidParts(%q) = %q, %q; want %q", kid, n, ver, want)
		}
	}
	if n, ver := kidParts(nil); n != "" || ver != "" {
		t.Error("kidParts(nil)")
	}
}
