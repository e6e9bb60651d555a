//go:build !noawskms

package awskms

import (
	"cmp"
	"crypto"
	"errors"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/jose"
)

// TestCreate makes a key per alg, with the alias moved to it, and signs
// with it by the returned URI and by the alias.
func TestCreate(t *testing.T) {
	tests := []struct {
		alg      jose.Alg
		keySpec  string // Config.KeySpec
		wantSpec string
		wantURI  string // suffix of the URI after the ARN
	}{
		{alg: jose.ES256, wantSpec: "ECC_NIST_P256"},
		{alg: jose.ES256, keySpec: "ECC_NIST_P256", wantSpec: "ECC_NIST_P256"},
		{alg: jose.ES384, wantSpec: "ECC_NIST_P384"},
		{alg: jose.ES512, wantSpec: "ECC_NIST_P521"},
		{alg: jose.RS256, keySpec: "RSA_2048", wantSpec: "RSA_2048"},
		{alg: jose.PS256, keySpec: "RSA_2048", wantSpec: "RSA_2048", wantURI: "?alg=PS256"},
		{alg: jose.RS256, wantSpec: DefaultRSAKeySpec},
		{alg: jose.EdDSA, wantSpec: "ECC_NIST_EDWARDS25519"},
		{alg: "", keySpec: "ECC_NIST_P384", wantSpec: "ECC_NIST_P384"}, // the KeySpec's alg
	}
	for _, tt := range tests {
		name := cmp.Or(string(tt.alg), "no alg") + "/" + cmp.Or(tt.keySpec, "default KeySpec")
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, Config{KeySpec: tt.keySpec, Alias: "cardsign-signing"}, awskmsfake.Options{})
			uri, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: tt.alg, Name: "agent.example"})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			keyARN, ok := strings.CutPrefix(strings.TrimSuffix(uri, tt.wantURI), "awskms:///")
			if !ok || !strings.HasPrefix(keyARN, "arn:aws:kms:us-east-1:111122223333:key/") || strings.Contains(keyARN, "?") {
				t.Fatalf("Create returned %q, want awskms:///KEY-ARN%s", uri, tt.wantURI)
			}
			ki, ok := e.fake.Key(keyARN)
			if !ok || !ki.Enabled || ki.KeySpec != tt.wantSpec || ki.KeyUsage != "SIGN_VERIFY" || !strings.Contains(ki.Description, "agent.example") {
				t.Fatalf("fake key %+v, want an enabled SIGN_VERIFY %s key", ki, tt.wantSpec)
			}
			if target, ok := e.fake.AliasTarget("alias/cardsign-signing"); !ok || target != keyARN {
				t.Errorf("alias points to %q, want %q", target, keyARN)
			}
			h := e.open(t, uri)
			wantAlg := tt.alg
			if wantAlg == "" {
				wantAlg = jose.ES384
			}
			if h.Alg != wantAlg {
				t.Errorf("opened as %s, want %s", h.Alg, wantAlg)
			}
			e.signVerify(t, h, keyARN, signingInput(500))
			byAlias := e.open(t, "awskms:///alias/cardsign-signing"+tt.wantURI)
			e.signVerify(t, byAlias, keyARN, signingInput(500))
		})
	}
}

// TestCreateMovesAlias: a second Create moves the alias from the first key
// (which stays usable by its URI) to the new one.
func TestCreateMovesAlias(t *testing.T) {
	e := newEnv(t, Config{Alias: "alias/rotating"}, awskmsfake.Options{})
	first, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	if first == second {
		t.Fatal("two Creates returned one URI")
	}
	if target, _ := e.fake.AliasTarget("alias/rotating"); "awskms:///"+target != second {
		t.Errorf("alias points to %s, want the second key %s", target, second)
	}
	h1, h2 := e.open(t, first), e.open(t, second)
	byAlias := e.open(t, "awskms:///alias/rotating")
	if !byAlias.Signer.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(h2.Signer.Public()) {
		t.Error("the alias does not open the second key")
	}
	if h1.Signer.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(h2.Signer.Public()) {
		t.Error("both keys have one public key")
	}
}

// TestCreateErrors: an alg the configured KeySpec cannot sign is refused
// before KMS is asked; an alias that cannot be moved gives an *AliasError
// that still names the new key.
func TestCreateErrors(t *testing.T) {
	t.Run("KeySpec mismatch", func(t *testing.T) {
		tests := []struct {
			keySpec string
			alg     jose.Alg
		}{
			{"ECC_NIST_P256", jose.ES384},
			{"ECC_NIST_P384", jose.RS256},
			{"RSA_2048", jose.EdDSA},
			{"ECC_NIST_EDWARDS25519", jose.PS256},
		}
		for _, tt := range tests {
			e := newEnv(t, Config{KeySpec: tt.keySpec}, awskmsfake.Options{})
			_, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: tt.alg})
			var am *AlgMismatchError
			if !errors.As(err, &am) || !strings.Contains(err.Error(), tt.keySpec+" cannot sign "+string(tt.alg)) {
				t.Errorf("Create %s with KeySpec %s: %v, want *AlgMismatchError", tt.alg, tt.keySpec, err)
			}
			if n := e.fake.Calls("CreateKey"); n != 0 {
				t.Errorf("CreateKey called %d times", n)
			}
		}
	})
	t.Run("unsupported alg", func(t *testing.T) {
		e := newEnv(t, Config{}, awskmsfake.Options{})
		_, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: "HS256"})
		if !errors.Is(err, jose.ErrUnsupportedAlg) {
			t.Errorf("err %v, want jose.ErrUnsupportedAlg", err)
		}
	})
	t.Run("alias not movable", func(t *testing.T) {
		e := newEnv(t, Config{Alias: "alias/taken"}, awskmsfake.Options{})
		// KMS does not move an alias from a symmetric key to a signing key.
		if err := e.fake.CreateAlias("alias/taken", e.createKey(t, "SYMMETRIC_DEFAULT")); err != nil {
			t.Fatal(err)
		}
		_, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256})
		var ae *AliasError
		if !errors.As(err, &ae) || ae.Alias != "alias/taken" || !strings.HasPrefix(ae.URI, "awskms:///arn:") {
			t.Fatalf("err %v, want *AliasError with the new key's URI", err)
		}
		if ki, ok := e.fake.Key(strings.TrimPrefix(ae.URI, "awskms:///")); !ok || !ki.Enabled {
			t.Errorf("the new key %s is not in the fake", ae.URI)
		}
	})
	t.Run("throttled CreateKey is retried", func(t *testing.T) {
		e := newEnv(t, Config{}, awskmsfake.Options{})
		e.fake.SetThrottleRate(0.5)
		for range 5 {
			if _, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256}); err != nil {
				t.Fatalf("Create under throttling: %v", err)
			}
		}
	})
	t.Run("CreateKey not retried after a 5xx", func(t *testing.T) {
		e := newEnv(t, Config{}, awskmsfake.Options{Unavailable: 1})
		_, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256})
		if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "may have taken effect") {
			t.Errorf("err %v, want ErrUnavailable without a retry", err)
		}
		if n := e.fake.Calls("CreateKey"); n != 1 {
			t.Errorf("CreateKey sent %d times, want 1", n)
		}
	})
}

// TestDisable: Disable disables the key in KMS (on_revoke: disable); the
// key then no longer opens. Alias URIs are refused.
func TestDisable(t *testing.T) {
	e := newEnv(t, Config{Alias: "alias/current"}, awskmsfake.Options{})
	uri, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	keyARN := strings.TrimPrefix(uri, "awskms:///")
	byID := e.createKey(t, "ECC_NIST_P256")

	var (
		notFound *KeyNotFoundError
		uriErr   *backends.URIError
	)
	tests := []struct {
		name   string
		uri    string
		as     any
		errHas string
		check  string // key the fake must record as disabled
	}{
		{name: "by ARN", uri: uri, check: keyARN},
		{name: "twice", uri: uri, check: keyARN},
		{name: "by key ID", uri: "awskms:///" + keyID(byID), check: byID},
		{name: "alias", uri: "awskms:///alias/current", as: &uriErr, errHas: "not an alias"},
		{name: "alias ARN", uri: "awskms:///arn:aws:kms:us-east-1:111122223333:alias/current", as: &uriErr, errHas: "not an alias"},
		{name: "missing", uri: "awskms:///0badc0de-0000-4000-8000-000000000000", as: &notFound, errHas: "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.b.Disable(t.Context(), tt.uri)
			if tt.as == nil {
				if err != nil {
					t.Fatalf("Disable: %v", err)
				}
				if !e.fake.Disabled(tt.check) {
					t.Errorf("the fake did not record %s as disabled", tt.check)
				}
				_, err := e.b.Open(t.Context(), tt.uri)
				var state *KeyStateError
				if !errors.As(err, &state) || state.State != "Disabled" {
					t.Errorf("Open of a disabled key: %v, want *KeyStateError Disabled", err)
				}
				return
			}
			if !errors.As(err, tt.as) || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("err %v, want %T mentioning %q", err, tt.as, tt.errHas)
			}
		})
	}
	if e.fake.Disabled("alias/nope") {
		t.Error("the fake reports an unknown alias as disabled")
	}
}
