//go:build !noawskms

package awskms

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

// TestThrottleBurst: 200 concurrent signatures against a KMS that throttles
// half of all requests all succeed within a 30 s deadline, at the default
// rate limit, and none fails with the SDK's "retry quota exceeded".
func TestThrottleBurst(t *testing.T) {
	e := newEnv(t, Config{}, awskmsfake.Options{})
	keyARN := e.createKey(t, "ECC_NIST_P256")
	h := e.open(t, "awskms:///"+keyARN)
	e.fake.SetThrottleRate(0.5)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const n = 200
	input := signingInput(200)
	errs := testsupport.SignConcurrently(ctx, h.Signer, h.Alg, h.Signer.Public(), n, func(int) []byte { return input })
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if strings.Contains(err.Error(), "retry quota exceeded") {
				t.Errorf("the SDK's retry quota surfaced: %v", err)
			}
			if failed <= 3 {
				t.Errorf("signature failed: %v", err)
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d signatures failed", failed, n)
	}
	s := e.b.Stats()
	calls := e.fake.Calls("Sign")
	t.Logf("stats %+v, fake saw %d Sign requests", s, calls)
	if s.Signatures != n || s.Throttled == 0 || s.Retries == 0 || s.Failures != 0 {
		t.Errorf("stats %+v: want %d signatures, some throttling and retries, no failures", s, n)
	}
	// Every request the fake saw is one of ours: the SDK did not retry.
	if s.Attempts != uint64(calls)+2 { // + DescribeKey and GetPublicKey of Open
		t.Errorf("backend made %d attempts, fake saw %d Sign requests (+2 for Open)", s.Attempts, calls)
	}
	if s.Latency.Count != s.Attempts || s.Latency.Max <= 0 || s.Latency.Total < s.Latency.Max || s.Latency.Mean() <= 0 {
		t.Errorf("latency summary %+v does not fit %d attempts", s.Latency, s.Attempts)
	}
}

// TestUnavailable: a KMS failing the next N requests with 503 is retried
// until it answers; one that keeps failing gives ErrUnavailable at the
// deadline, not after it.
func TestUnavailable(t *testing.T) {
	tests := []struct {
		name        string
		unavailable int
		timeout     time.Duration
		wantErr     bool
	}{
		{name: "3 then success", unavailable: 3, timeout: 10 * time.Second},
		{name: "until the deadline", unavailable: 1 << 30, timeout: 300 * time.Millisecond, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{}, awskmsfake.Options{})
			keyARN := e.createKey(t, "ECC_NIST_P384")
			h := e.open(t, "awskms:///"+keyARN)
			e.fake.SetUnavailable(tt.unavailable)
			ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
			defer cancel()
			start := time.Now()
			_, err := jose.Sign(ctx, h.Signer, h.Alg, signingInput(50))
			elapsed := time.Since(start)
			s := e.b.Stats()
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Sign: %v", err)
				}
				if got := e.fake.Calls("Sign"); got != tt.unavailable+1 || s.Retries != uint64(tt.unavailable) {
					t.Errorf("fake saw %d Sign requests, backend retried %d times; want %d and %d", got, s.Retries, tt.unavailable+1, tt.unavailable)
				}
				return
			}
			var una *UnavailableError
			if !errors.Is(err, backends.ErrUnavailable) || !errors.As(err, &una) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err %v, want an *UnavailableError wrapping backends.ErrUnavailable and DeadlineExceeded", err)
			}
			if !strings.Contains(err.Error(), "KMSInternalException") || una.Attempts < 2 {
				t.Errorf("err %q (after %d attempts) should report the last KMS error after several attempts", err, una.Attempts)
			}
			if elapsed > tt.timeout+100*time.Millisecond {
				t.Errorf("gave up after %v, deadline was %v", elapsed, tt.timeout)
			}
			if s.Failures != 1 {
				t.Errorf("stats %+v, want 1 failure", s)
			}
			noSecrets(t, "error", err.Error())
		})
	}
}

// TestShortDeadline: whatever keeps KMS from answering, a short deadline
// fails fast with ErrUnavailable and never sleeps past it.
func TestShortDeadline(t *testing.T) {
	tests := []struct {
		name     string
		opts     awskmsfake.Options
		rate     float64
		timeout  time.Duration
		maxSleep time.Duration // the call must return within this
	}{
		{name: "always throttled", opts: awskmsfake.Options{ThrottleRate: 1}, timeout: 200 * time.Millisecond, maxSleep: 200 * time.Millisecond},
		{name: "slow KMS", opts: awskmsfake.Options{Latency: 5 * time.Second}, timeout: 100 * time.Millisecond, maxSleep: 100 * time.Millisecond},
		// The bucket (1/s, burst 1) is empty after the first signature:
		// waiting a second cannot fit, so the limiter refuses at once.
		{name: "rate limited", rate: 1, timeout: 300 * time.Millisecond, maxSleep: 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{RateLimit: tt.rate}, awskmsfake.Options{})
			keyARN := e.createKey(t, "ECC_NIST_P256")
			h := e.open(t, "awskms:///"+keyARN)
			if tt.rate > 0 {
				if _, err := jose.Sign(t.Context(), h.Signer, h.Alg, signingInput(10)); err != nil {
					t.Fatal(err)
				}
			}
			e.fake.SetThrottleRate(tt.opts.ThrottleRate)
			e.fake.SetLatency(tt.opts.Latency)
			ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
			defer cancel()
			start := time.Now()
			_, err := jose.Sign(ctx, h.Signer, h.Alg, signingInput(10))
			elapsed := time.Since(start)
			if !errors.Is(err, backends.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err %v, want ErrUnavailable and DeadlineExceeded", err)
			}
			if elapsed > tt.maxSleep+50*time.Millisecond {
				t.Errorf("returned after %v, want within %v (deadline %v)", elapsed, tt.maxSleep, tt.timeout)
			}
			t.Logf("%v after %v", err, elapsed)
		})
	}
}

// TestCanceled: a caller that cancels gets its context error, not "KMS
// unavailable".
func TestCanceled(t *testing.T) {
	e := newEnv(t, Config{}, awskmsfake.Options{Latency: 5 * time.Second})
	keyARN := e.createKey(t, "ECC_NIST_P256")
	e.fake.SetLatency(0)
	h := e.open(t, "awskms:///"+keyARN)
	e.fake.SetLatency(5 * time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := jose.Sign(ctx, h.Signer, h.Alg, signingInput(10))
	if !errors.Is(err, context.Canceled) || errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("err %v, want context.Canceled and not ErrUnavailable", err)
	}
}

// TestSignRefusals: a wrong KeyId in the answer, a key disabled after Open,
// an oversize EdDSA message and inputs the key cannot sign each give a
// typed or clear error; the local checks never reach KMS.
func TestSignRefusals(t *testing.T) {
	e := newEnv(t, Config{}, awskmsfake.Options{})
	ec := e.open(t, "awskms:///"+e.createKey(t, "ECC_NIST_P256"))
	ed := e.open(t, "awskms:///"+e.createKey(t, "ECC_NIST_EDWARDS25519"))
	rsaKey := e.createKey(t, "RSA_2048")
	rs := e.open(t, "awskms:///"+rsaKey)
	ps := e.open(t, "awskms:///"+rsaKey+"?alg=PS256")
	disabledARN := e.createKey(t, "ECC_NIST_P256")
	disabled := e.open(t, "awskms:///"+disabledARN)
	digest := sha256.Sum256([]byte("x"))
	// joseSign signs an n-byte JWS signing input through jose.Sign; raw calls
	// the crypto.Signer directly, as jose.Sign never would with bad options.
	joseSign := func(h backends.Handle, n int) func() error {
		return func() error { _, err := jose.Sign(t.Context(), h.Signer, h.Alg, signingInput(n)); return err }
	}
	raw := func(h backends.Handle, digest []byte, opts crypto.SignerOpts) func() error {
		return func() error { _, err := h.Signer.Sign(nil, digest, opts); return err }
	}
	pss := func(salt int) *rsa.PSSOptions { return &rsa.PSSOptions{Hash: crypto.SHA256, SaltLength: salt} }

	var (
		mismatch *KeyIDMismatchError
		tooLarge *MessageTooLargeError
		state    *KeyStateError
	)
	tests := []struct {
		name      string
		setup     func()
		sign      func() error
		as        any
		errHas    string
		callsKMS  bool
		wantLimit bool
	}{
		{
			name:  "wrong KeyId in the answer",
			setup: func() { e.fake.SetWrongKeyID(true) },
			sign:  joseSign(ec, 10),
			as:    &mismatch, errHas: "not the key asked for", callsKMS: true,
		},
		{
			name:  "disabled after Open",
			setup: func() { _ = e.fake.DisableKey(disabledARN) },
			sign:  joseSign(disabled, 10),
			as:    &state, errHas: "is Disabled", callsKMS: true,
		},
		{name: "EdDSA 4097 bytes", sign: joseSign(ed, 4097), as: &tooLarge, errHas: "4097 bytes, over the 4096-byte limit"},
		{name: "ES256 with a SHA-384 digest", sign: raw(ec, make([]byte, 48), crypto.SHA384), errHas: "signs SHA-256 digests, not SHA-384"},
		{name: "short digest", sign: raw(ec, digest[:31], crypto.SHA256), errHas: "digest is 31 bytes, want 32"},
		{name: "PSS on an RS256 key", sign: raw(rs, digest[:], pss(rsa.PSSSaltLengthEqualsHash)), errHas: "?alg=PS256"},
		{name: "PKCS #1 v1.5 on a PS256 key", sign: raw(ps, digest[:], crypto.SHA256), errHas: "PKCS #1 v1.5 requested"},
		{name: "PSS with another salt length", sign: raw(ps, digest[:], pss(rsa.PSSSaltLengthAuto)), errHas: "salt as long as the hash"},
		{name: "digest for Ed25519", sign: raw(ed, digest[:], crypto.SHA256), errHas: "signs the message itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer e.fake.SetWrongKeyID(false)
			if tt.setup != nil {
				tt.setup()
			}
			before := e.fake.Calls("Sign")
			checkRefusal(t, "signing", tt.sign(), tt.as, tt.errHas)
			if called := e.fake.Calls("Sign") > before; called != tt.callsKMS {
				t.Errorf("KMS called: %v, want %v", called, tt.callsKMS)
			}
		})
	}
	// The largest message KMS takes still signs.
	e.signVerify(t, ed, keyARNOf(t, ed), signingInput(MaxRawMessage))
}

// keyARNOf returns the key ARN a handle signs with.
func keyARNOf(t testing.TB, h backends.Handle) string {
	t.Helper()
	s, ok := h.Signer.(*signer)
	if !ok {
		t.Fatalf("signer is %T", h.Signer)
	}
	return s.arn
}

// TestClosed: after Close, everything fails as unavailable with ErrClosed.
func TestClosed(t *testing.T) {
	e := newEnv(t, Config{}, awskmsfake.Options{})
	keyARN := e.createKey(t, "ECC_NIST_P256")
	h := e.open(t, "awskms:///"+keyARN)
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		f    func() error
	}{
		{"sign", func() error { _, err := jose.Sign(t.Context(), h.Signer, h.Alg, signingInput(10)); return err }},
		{"open", func() error { _, err := e.b.Open(t.Context(), "awskms:///"+keyARN); return err }},
		{"create", func() error {
			_, err := e.b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256})
			return err
		}},
		{"disable", func() error { return e.b.Disable(t.Context(), "awskms:///"+keyARN) }},
	}
	for _, c := range calls {
		if err := c.f(); !errors.Is(err, ErrClosed) || !errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("%s after Close: %v, want ErrClosed and ErrUnavailable", c.name, err)
		}
	}
	if err := e.b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

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
			checkRefusal(t, "Open", err, tt.as, tt.errHas)
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

// checkRefusal checks the error of a call the backend must refuse (what
// names the call): an error of as's type (when as is not nil) mentioning
// errHas, not reported as unavailable (a refusal is final) and naming no
// secret.
func checkRefusal(t *testing.T, what string, err error, as any, errHas string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded", what)
	}
	if as != nil && !errors.As(err, as) {
		t.Errorf("err %T %v, want %T", err, err, as)
	}
	if !strings.Contains(err.Error(), errHas) {
		t.Errorf("err %q does not mention %q", err, errHas)
	}
	if errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("a refusal is reported as unavailable: %v", err)
	}
	noSecrets(t, "error", err.Error())
}
