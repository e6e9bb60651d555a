package backends

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

// fixedBackend hands back one Handle; it tests the registry's own logic
// (override order, checks), not any real backend.
type fixedBackend struct{ h Handle }

func (f fixedBackend) Open(context.Context, string) (Handle, error) { return f.h, nil }

type failingBackend struct{}

var errBackend = errors.New("token not present")

func (failingBackend) Open(context.Context, string) (Handle, error) { return Handle{}, errBackend }

// constant is a constructor that hands back b, counting its calls.
func constant(b Backend, calls *int) Constructor {
	return func(context.Context, Config) (Backend, error) {
		if calls != nil {
			*calls++
		}
		return b, nil
	}
}

func newEC(t *testing.T) crypto.Signer {
	t.Helper()
	return testsupport.Key(t, jose.ES256)
}

func TestRegistry(t *testing.T) {
	ctx := t.Context()
	r := NewRegistry()
	calls := 0
	if err := r.Add("test-reg", constant(fixedBackend{}, &calls), Config{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("test-reg", constant(fixedBackend{}, nil), Config{}); err == nil {
		t.Error("a scheme added twice was accepted")
	}
	if err := r.Add("test-nil", nil, Config{}); err == nil {
		t.Error("a nil constructor was accepted")
	}
	for _, bad := range []string{"", "Test-upper", "1abc", "a b", "a:b"} {
		if err := r.Add(bad, constant(fixedBackend{}, nil), Config{}); err == nil {
			t.Errorf("scheme %q was accepted", bad)
		}
	}
	for range 3 {
		if _, err := r.Backend(ctx, "TEST-REG"); err != nil {
			t.Fatalf("Backend is not case-insensitive: %v", err)
		}
	}
	if calls != 1 {
		t.Errorf("the constructor ran %d times, want once", calls)
	}
	var unknown *UnknownSchemeError
	if _, err := r.Backend(ctx, "test-nil"); !errors.As(err, &unknown) {
		t.Errorf("a refused scheme is visible: %v", err)
	}
	if err := r.Add("test-built-without", Missing("test-built-without", "rebuild with it"), Config{}); err != nil {
		t.Fatal(err)
	}
	var nb *NotBuiltError
	if _, err := r.Backend(ctx, "test-built-without"); !errors.As(err, &nb) || !strings.Contains(err.Error(), "rebuild with it") {
		t.Errorf("a backend left out of the build: %v, want a NotBuiltError saying how to get it", err)
	}
	if err := r.Build(ctx); !errors.As(err, &nb) || !strings.Contains(err.Error(), "test-built-without backend") {
		t.Errorf("Build = %v, want the missing backend named", err)
	}
	if s := r.Schemes(); !slices.Equal(s, []string{"test-built-without", "test-reg"}) {
		t.Errorf("Schemes() = %v", s)
	}
	if _, err := Settings[string]("test", Config{Settings: 42}); err == nil {
		t.Error("settings of the wrong type were accepted")
	}
}

func TestScheme(t *testing.T) {
	tests := []struct {
		uri, want string
		wantErr   bool
	}{
		{"file:/k.pem", "file", false},
		{"FILE:/k.pem", "file", false},
		{"pkcs11:token=a;object=b?pin-value=1234", "pkcs11", false},
		{"gcpkms://projects/p", "gcpkms", false},
		{"awskms:///arn:aws:kms:eu-west-1:1:key/x", "awskms", false},
		{"a+b-c.d:x", "a+b-c.d", false},
		{"", "", true},
		{"/etc/k.pem", "", true},
		{":x", "", true},
		{"1x:y", "", true},
		{"c:\\keys\\k.pem", "c", false}, // a scheme, then unknown: see TestOpenErrors
	}
	for _, tt := range tests {
		got, err := Scheme(tt.uri)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Scheme(%q) = %q, %v; want %q, err %v", tt.uri, got, err, tt.want, tt.wantErr)
		}
		var ue *URIError
		if err != nil && !errors.As(err, &ue) {
			t.Errorf("Scheme(%q) error is %T, want *URIError", tt.uri, err)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"file:/k.pem", "file:/k.pem"},
		{"pkcs11:token=a;object=b?module-path=/m.so&pin-value=1234", "pkcs11:token=a;object=b?…"},
		{"https://user:pw@host/jwks?x=1", "https://…@host/jwks?…"},
		{"gcpkms://projects/p/cryptoKeyVersions/1", "gcpkms://projects/p/cryptoKeyVersions/1"},
		{"awskms:///arn:aws:kms:r:1:alias/a@b", "awskms:///arn:aws:kms:r:1:alias/a@b"},
	}
	for _, tt := range tests {
		if got := Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestOpen(t *testing.T) {
	ec := newEC(t)
	thumb, _ := jose.Thumbprint(ec.Public())
	r := NewRegistry()
	for scheme, b := range map[string]Backend{
		"test-plain":    fixedBackend{Handle{Signer: ec}},
		"test-known":    fixedBackend{Handle{Signer: ec, Alg: jose.ES256, KID: "backend-kid"}},
		"test-badalg":   fixedBackend{Handle{Signer: ec, Alg: jose.ES512}},
		"test-nosigner": fixedBackend{},
		"test-fail":     failingBackend{},
	} {
		if err := r.Add(scheme, constant(b, nil), Config{}); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name    string
		uri     string
		opts    OpenOptions
		wantAlg jose.Alg
		wantKID string
		errIs   error
		errHas  string
	}{
		{name: "defaults", uri: "test-plain:k", wantAlg: jose.ES256, wantKID: thumb},
		{name: "backend knowledge", uri: "test-known:k", wantAlg: jose.ES256, wantKID: "backend-kid"},
		{name: "overrides win", uri: "test-known:k", opts: OpenOptions{Alg: jose.ES256, KID: "o"}, wantAlg: jose.ES256, wantKID: "o"},
		{name: "override mismatch", uri: "test-plain:k", opts: OpenOptions{Alg: jose.ES384}, errHas: "ES384"},
		{name: "override unsupported", uri: "test-plain:k", opts: OpenOptions{Alg: "HS256"}, errIs: jose.ErrUnsupportedAlg},
		{name: "backend alg mismatch", uri: "test-badalg:k", errHas: "ES512"},
		{name: "override disagrees with the key's own alg", uri: "test-known:k", opts: OpenOptions{Alg: jose.ES384}, errHas: "the key itself is for ES256"},
		{name: "no signer", uri: "test-nosigner:k", errHas: "no signer"},
		{name: "backend error, URI redacted", uri: "test-fail:k?pin-value=1234", errIs: errBackend, errHas: "test-fail:k?…"},
		{name: "unknown scheme", uri: "nope:k", errHas: "test-plain"},
		{name: "windows path", uri: `c:\keys\k.pem`, errHas: `no backend for scheme "c"`},
	}
	for _, tt := range tests {
		k, err := r.Open(t.Context(), tt.uri, tt.opts)
		if tt.errIs == nil && tt.errHas == "" {
			if err != nil {
				t.Errorf("%s: Open: %v", tt.name, err)
				continue
			}
			if k.Alg != tt.wantAlg || k.KID != tt.wantKID || k.Signer.Public() == nil {
				t.Errorf("%s: Key = %+v, want alg %q kid %q", tt.name, k, tt.wantAlg, tt.wantKID)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: Open succeeded", tt.name)
			continue
		}
		if tt.errIs != nil && !errors.Is(err, tt.errIs) {
			t.Errorf("%s: err = %v, want errors.Is %v", tt.name, err, tt.errIs)
		}
		if !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: err %q does not mention %q", tt.name, err, tt.errHas)
		}
		if strings.Contains(err.Error(), "1234") {
			t.Errorf("%s: err leaks the PIN: %v", tt.name, err)
		}
	}
}

// TestAddBuilt: a backend the build has is added as it is; one it lacks is
// added as Missing, its error saying how to rebuild this binary.
func TestAddBuilt(t *testing.T) {
	ctx := t.Context()
	r := NewRegistry()
	built := func(context.Context, Config) (Backend, error) { return nil, errors.New("built constructor ran") }
	if err := r.AddBuilt("cardsignd", "test-built", built, "", Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Backend(ctx, "test-built"); err == nil || !strings.Contains(err.Error(), "built constructor ran") {
		t.Errorf("a built backend: %v, want its own constructor's answer", err)
	}
	if err := r.AddBuilt("cardsignd", "test-lacking", built, "without -tags notest", Config{}); err != nil {
		t.Fatal(err)
	}
	var nb *NotBuiltError
	if _, err := r.Backend(ctx, "test-lacking"); !errors.As(err, &nb) || nb.How != "rebuild cardsignd without -tags notest" {
		t.Errorf("a backend left out of the build: %v, want a NotBuiltError saying how to rebuild cardsignd", err)
	}
}

func TestJoinOrNone(t *testing.T) {
	for _, tt := range []struct {
		names []string
		want  string
	}{{nil, "none"}, {[]string{"file"}, "file"}, {[]string{"file", "pkcs11"}, "file, pkcs11"}} {
		if got := JoinOrNone(tt.names); got != tt.want {
			t.Errorf("JoinOrNone(%q) = %q, want %q", tt.names, got, tt.want)
		}
	}
}

func TestAsAny(t *testing.T) {
	err := fmt.Errorf("open: %w", &URIError{URI: "x:", Reason: "bad"})
	if !AsAny(err, new(*NotBuiltError), new(*URIError)) {
		t.Errorf("AsAny missed the wrapped *URIError in %v", err)
	}
	if AsAny(err, new(*NotBuiltError), new(*UnknownSchemeError)) || AsAny(err) {
		t.Errorf("AsAny found a type %v does not hold", err)
	}
}

func TestUnpinned(t *testing.T) {
	for uri, want := range map[string]bool{
		"azurekv://v.vault.azure.net/keys/k":                                  true,
		"azurekv://v.vault.azure.net/keys/k?alg=PS256":                        true,
		"azurekv://v.vault.azure.net/keys/k/0123456789abcdef0123456789abcdef": false,
		"hashivault://k":           true,
		"HashiVault://k?alg=PS256": true,
		"hashivault://k/3":         false,
		"file:/k.pem":              false,
		"awskms:///alias/k":        false, // refused by ImportKey on its own grounds
	} {
		if got := Unpinned(uri) != ""; got != want {
			t.Errorf("Unpinned(%q) = %q, want unpinned %v", uri, Unpinned(uri), want)
		}
	}
}
