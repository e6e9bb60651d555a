//go:build !noawskms

package awskms

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/jose"
)

// TestOpenSign opens keys of every supported KeySpec by every URI form,
// signs through jose.Sign and verifies with the fake's key and the JWK.
func TestOpenSign(t *testing.T) {
	e := newEnv(t, Config{}, awskmsfake.Options{})
	rsaKey := e.createKey(t, "RSA_2048")
	tests := []struct {
		name    string
		spec    string
		keyARN  string // reuse this key instead of making one of spec
		form    string // "id", "arn", "alias", "alias-arn"
		query   string
		wantAlg jose.Alg
	}{
		{name: "ES256 by key ID", spec: "ECC_NIST_P256", form: "id", wantAlg: jose.ES256},
		{name: "ES256 by ARN with alg", spec: "ECC_NIST_P256", form: "arn", query: "?alg=ES256", wantAlg: jose.ES256},
		{name: "ES384 by ARN", spec: "ECC_NIST_P384", form: "arn", wantAlg: jose.ES384},
		{name: "ES512 by alias", spec: "ECC_NIST_P521", form: "alias", wantAlg: jose.ES512},
		{name: "RS256 by default", keyARN: rsaKey, form: "arn", wantAlg: jose.RS256},
		{name: "RS256 by alias ARN", keyARN: rsaKey, form: "alias-arn", query: "?alg=RS256", wantAlg: jose.RS256},
		{name: "PS256 by ARN", keyARN: rsaKey, form: "arn", query: "?alg=PS256", wantAlg: jose.PS256},
		{name: "PS256 by alias", keyARN: rsaKey, form: "alias", query: "?alg=PS256", wantAlg: jose.PS256},
		{name: "EdDSA by key ID", spec: "ECC_NIST_EDWARDS25519", form: "id", wantAlg: jose.EdDSA},
		{name: "EdDSA by alias", spec: "ECC_NIST_EDWARDS25519", form: "alias", wantAlg: jose.EdDSA},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keyARN := tt.keyARN
			if keyARN == "" {
				keyARN = e.createKey(t, tt.spec)
			}
			var ref string
			switch tt.form {
			case "id":
				ref = keyID(keyARN)
			case "arn":
				ref = keyARN
			case "alias", "alias-arn":
				alias := fmt.Sprintf("alias/open-test-%d", i)
				if err := e.fake.CreateAlias(alias, keyARN); err != nil {
					t.Fatal(err)
				}
				ref = alias
				if tt.form == "alias-arn" {
					ref = "arn:aws:kms:us-east-1:111122223333:" + alias
				}
			}
			h := e.open(t, "awskms:///"+ref+tt.query)
			if h.Alg != tt.wantAlg || h.KID != "" {
				t.Fatalf("Handle alg %q kid %q, want alg %q and no kid", h.Alg, h.KID, tt.wantAlg)
			}
			for _, n := range []int{30, 3000} {
				e.signVerify(t, h, keyARN, signingInput(n))
			}
		})
	}
	// The public key is read once per Open, never per signature.
	if n := e.fake.Calls("GetPublicKey"); n != len(tests) {
		t.Errorf("GetPublicKey called %d times for %d opens", n, len(tests))
	}
}

// TestRegistryOpen checks the backend through a backends.Registry, as the
// daemon uses it: the alg comes from the backend, the kid is the thumbprint.
func TestRegistryOpen(t *testing.T) {
	e := newEnv(t, Config{}, awskmsfake.Options{})
	keyARN := e.createKey(t, "RSA_2048")
	reg := backends.NewRegistry()
	if err := reg.Add(Scheme, func(context.Context, backends.Config) (backends.Backend, error) { return e.b, nil }, backends.Config{}); err != nil {
		t.Fatal(err)
	}
	k, err := reg.Open(t.Context(), Scheme+":///"+keyARN+"?alg=PS256", backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	thumb, _ := jose.Thumbprint(k.Signer.Public())
	if k.Alg != jose.PS256 || k.KID != thumb {
		t.Errorf("Key alg %q kid %q, want PS256 and %q", k.Alg, k.KID, thumb)
	}
	e.signVerify(t, backends.Handle{Signer: k.Signer, Alg: k.Alg}, keyARN, signingInput(100))
}

// TestOpenErrors checks that every way a key can be unusable gives a typed
// error naming the problem, without credentials in it.
func TestOpenErrors(t *testing.T) {
	e := newEnv(t, Config{}, awskmsfake.Options{})
	ec := e.createKey(t, "ECC_NIST_P256")
	rsaKey := e.createKey(t, "RSA_2048")
	ed := e.createKey(t, "ECC_NIST_EDWARDS25519")
	sym := e.createKey(t, "SYMMETRIC_DEFAULT")
	disabled := e.createKey(t, "ECC_NIST_P384")
	if err := e.fake.DisableKey(disabled); err != nil {
		t.Fatal(err)
	}
	missing := "0badc0de-0000-4000-8000-000000000000"

	var (
		notFound    *KeyNotFoundError
		state       *KeyStateError
		unsupported *UnsupportedKeyError
		algMismatch *AlgMismatchError
		uriErr      *backends.URIError
	)
	tests := []struct {
		name   string
		uri    string
		as     any // pointer to the typed error wanted
		errHas string
	}{
		{"missing key ID", "awskms:///" + missing, &notFound, "not found"},
		{"missing key ARN", "awskms:///arn:aws:kms:us-east-1:111122223333:key/" + missing, &notFound, missing},
		{"other account", "awskms:///arn:aws:kms:us-east-1:999999999999:key/" + keyID(ec), &notFound, "not found"},
		{"missing alias", "awskms:///alias/nope", &notFound, "alias/nope"},
		{"disabled", "awskms:///" + disabled, &state, "is Disabled"},
		{"symmetric key", "awskms:///" + sym, &unsupported, "KeyUsage is ENCRYPT_DECRYPT"},
		{"PS256 on EC", "awskms:///" + ec + "?alg=PS256", &algMismatch, "ECC_NIST_P256, which cannot sign PS256"},
		{"ES384 on P-256", "awskms:///" + ec + "?alg=ES384", &algMismatch, "cannot sign ES384"},
		{"EdDSA on RSA", "awskms:///" + rsaKey + "?alg=EdDSA", &algMismatch, "cannot sign EdDSA"},
		{"ES256 on Ed25519", "awskms:///" + ed + "?alg=ES256", &algMismatch, "cannot sign ES256"},
		{"unknown alg", "awskms:///" + ec + "?alg=HS256", &uriErr, "unsupported alg"},
		{"no key", "awskms:///", &uriErr, "no key"},
		{"host", "awskms://us-east-1/" + keyID(ec), &uriErr, "empty host"},
		{"other region", "awskms:///arn:aws:kms:eu-west-1:111122223333:key/" + keyID(ec), nil, "serves Region us-east-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.b.Open(t.Context(), tt.uri)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if tt.as != nil && !errors.As(err, tt.as) {
				t.Errorf("err %T %v, want %T", err, err, tt.as)
			}
			if !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("err %q does not mention %q", err, tt.errHas)
			}
			if errors.Is(err, backends.ErrUnavailable) {
				t.Errorf("a refusal is reported as unavailable: %v", err)
			}
			noSecrets(t, "error", err.Error())
		})
	}
	if s := e.b.Stats(); s.Retries != 0 {
		t.Errorf("refusals were retried: %+v", s)
	}
}

// TestOpenWrongKeyID: a GetPublicKey answer for another key is refused.
func TestOpenWrongKeyID(t *testing.T) {
	e := newEnv(t, Config{}, awskmsfake.Options{WrongKeyID: true})
	keyARN := e.createKey(t, "ECC_NIST_P256")
	e.createKey(t, "ECC_NIST_P256")
	_, err := e.b.Open(t.Context(), "awskms:///"+keyARN)
	var mismatch *KeyIDMismatchError
	if !errors.As(err, &mismatch) || mismatch.Op != "GetPublicKey" || mismatch.Want != keyARN || mismatch.Got == keyARN {
		t.Fatalf("err %v, want a GetPublicKey *KeyIDMismatchError", err)
	}
}

// TestProviderKeySentinels: a key disabled or deleted at KMS behind an open
// signer's back fails signing (and a new Open) with errors matching the
// shared sentinels backends.ErrKeyDisabled and backends.ErrKeyNotFound, at
// once (no retries) and not as unavailability, naming the key.
func TestProviderKeySentinels(t *testing.T) {
	tests := []struct {
		name   string
		change func(f *awskmsfake.Server, arn string) error
		want   error
	}{
		{"disabled", func(f *awskmsfake.Server, arn string) error { return f.DisableKey(arn) }, backends.ErrKeyDisabled},
		{"deleted", func(f *awskmsfake.Server, arn string) error { return f.DeleteKey(arn) }, backends.ErrKeyNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{}, awskmsfake.Options{})
			arn := e.createKey(t, "ECC_NIST_P256")
			h := e.open(t, "awskms:///"+arn)
			if err := tt.change(e.fake, arn); err != nil {
				t.Fatal(err)
			}
			before := e.b.Stats()
			_, err := jose.Sign(t.Context(), h.Signer, h.Alg, signingInput(10))
			if !errors.Is(err, tt.want) || errors.Is(err, backends.ErrUnavailable) {
				t.Fatalf("Sign: %v, want %v and not unavailability", err, tt.want)
			}
			if !strings.Contains(err.Error(), arn) {
				t.Errorf("Sign: %v does not name the key %s", err, arn)
			}
			if s := e.b.Stats(); s.Retries != before.Retries || s.Failures != before.Failures+1 {
				t.Errorf("stats %+v after %+v: want no retry and one failure", s, before)
			}
			if _, err := e.b.Open(t.Context(), "awskms:///"+arn); !errors.Is(err, tt.want) {
				t.Errorf("Open: %v, want %v", err, tt.want)
			}
		})
	}
}
