//go:build !nogcpkms

package gcpkms

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/backends/internal/retry"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

// TestThrottleBurst signs 200 cards at once while Cloud KMS throttles half
// of all calls: every signature must succeed within its 30s deadline, with
// the default rate limit, and every attempt must be one of ours (the client
// library retries nothing behind our back).
func TestThrottleBurst(t *testing.T) {
	const n = 200
	f := newFake(t, gcpkmsfake.Options{Latency: 5 * time.Millisecond})
	b, _ := newBackend(t, f, Config{})
	_, h := openKey(t, b, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	jwk, _ := jose.NewJWK(h.Signer.Public(), "", h.Alg)
	pub, _ := jwk.PublicKey()
	if err := f.Update(func(o *gcpkmsfake.Options) { o.ThrottleRate = 0.5 }); err != nil {
		t.Fatal(err)
	}
	before, calls := b.Stats(), f.Calls("AsymmetricSign")

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	errs := testsupport.SignConcurrently(ctx, h.Signer, h.Alg, pub, n, func(i int) []byte {
		return fmt.Appendf(nil, "eyJhbGciOiJFUzI1NiJ9.%d", i)
	})
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	elapsed := time.Since(start)

	s := b.Stats()
	attempts := s.Attempts - before.Attempts
	sent := uint64(f.Calls("AsymmetricSign") - calls)
	t.Logf("%d signatures in %v: %d attempts, %d throttled, %d retries", n, elapsed.Round(time.Millisecond), attempts, s.Throttled-before.Throttled, s.Retries-before.Retries)
	if attempts != sent {
		t.Errorf("the fake got %d calls, the backend made %d attempts: someone else retries", sent, attempts)
	}
	if s.Throttled-before.Throttled < n/4 || s.Retries-before.Retries < n/4 {
		t.Errorf("throttled %d, retries %d: the fault injection did not bite", s.Throttled-before.Throttled, s.Retries-before.Retries)
	}
	if attempts != n+(s.Retries-before.Retries) {
		t.Errorf("%d attempts for %d signatures and %d retries", attempts, n, s.Retries-before.Retries)
	}
	if s.Failures != before.Failures {
		t.Errorf("%d failures", s.Failures-before.Failures)
	}
	if s.Latency.Count != s.Attempts || s.Latency.Max < 5*time.Millisecond || s.Latency.Mean() < 5*time.Millisecond {
		t.Errorf("latency %+v for %d attempts at 5ms", s.Latency, s.Attempts)
	}
}

// TestUnavailableRetried makes the next N calls fail UNAVAILABLE, for Open
// (the key version read) and for signing: both recover, with exactly N
// retries.
func TestUnavailableRetried(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			_, uri := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
			f.Update(func(o *gcpkmsfake.Options) { o.Unavailable = n })
			before := b.Stats()
			h, err := b.Open(t.Context(), uri)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if r := b.Stats().Retries - before.Retries; r != uint64(n) {
				t.Errorf("Open: %d retries, want %d", r, n)
			}

			f.Update(func(o *gcpkmsfake.Options) { o.Unavailable = n })
			before, calls := b.Stats(), f.Calls("AsymmetricSign")
			if _, err := jose.Sign(t.Context(), h.Signer, h.Alg, []byte("e30.e30")); err != nil {
				t.Fatalf("Sign: %v", err)
			}
			s := b.Stats()
			if r := s.Retries - before.Retries; r != uint64(n) {
				t.Errorf("Sign: %d retries, want %d", r, n)
			}
			if c := f.Calls("AsymmetricSign") - calls; c != n+1 {
				t.Errorf("Sign: %d calls reached the fake, want %d", c, n+1)
			}
			if s.Failures != 0 || s.Throttled != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// TestIntegrity injects damaged and misdirected responses: each is refused
// with an *IntegrityError (not unavailability); damage is retried once, a
// wrong key version name is not retried at all.
func TestIntegrity(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	tests := []struct {
		name  string
		alg   kmspb.CryptoKeyVersion_CryptoKeyVersionAlgorithm
		fault func(*gcpkmsfake.Options)
		field string
		calls int
	}{
		{"corrupt signature CRC", kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256, func(o *gcpkmsfake.Options) { o.CorruptCRC = true }, "signature_crc32c", 2},
		{"corrupt signature CRC, Ed25519", kmspb.CryptoKeyVersion_EC_SIGN_ED25519, func(o *gcpkmsfake.Options) { o.CorruptCRC = true }, "signature_crc32c", 2},
		{"digest CRC not verified", kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256, func(o *gcpkmsfake.Options) { o.IgnoreCRC = true }, "verified_digest_crc32c", 2},
		{"data CRC not verified", kmspb.CryptoKeyVersion_EC_SIGN_ED25519, func(o *gcpkmsfake.Options) { o.IgnoreCRC = true }, "verified_data_crc32c", 2},
		{"wrong key version", kmspb.CryptoKeyVersion_EC_SIGN_P384_SHA384, func(o *gcpkmsfake.Options) { o.WrongName = true }, "name", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uri, h := openKey(t, b, f, tt.alg)
			f.Update(tt.fault)
			defer f.Update(func(o *gcpkmsfake.Options) { *o = gcpkmsfake.Options{} })
			calls := f.Calls("AsymmetricSign")
			_, err := jose.Sign(t.Context(), h.Signer, h.Alg, []byte("e30.e30"))
			var ie *IntegrityError
			if !errors.As(err, &ie) || ie.Field != tt.field || ie.Name != nameOf(uri) {
				t.Fatalf("err = %v, want an *IntegrityError on %s", err, tt.field)
			}
			if errors.Is(err, backends.ErrUnavailable) {
				t.Error("an integrity failure reported as unavailability")
			}
			if c := f.Calls("AsymmetricSign") - calls; c != tt.calls {
				t.Errorf("%d calls, want %d", c, tt.calls)
			}
			// The fault gone, the same signer works again.
			f.Update(func(o *gcpkmsfake.Options) { *o = gcpkmsfake.Options{} })
			if _, err := jose.Sign(t.Context(), h.Signer, h.Alg, []byte("e30.e30")); err != nil {
				t.Errorf("after the fault: %v", err)
			}
		})
	}

	// Public keys are checked at Open the same way.
	for _, tt := range []struct {
		fault func(*gcpkmsfake.Options)
		field string
	}{
		{func(o *gcpkmsfake.Options) { o.CorruptCRC = true }, "pem_crc32c"},
		{func(o *gcpkmsfake.Options) { o.WrongName = true }, "name"},
	} {
		_, uri := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
		f.Update(tt.fault)
		_, err := b.Open(t.Context(), uri)
		f.Update(func(o *gcpkmsfake.Options) { *o = gcpkmsfake.Options{} })
		var ie *IntegrityError
		if !errors.As(err, &ie) || ie.Field != tt.field {
			t.Errorf("Open with a bad %s: %v", tt.field, err)
		}
	}
}

// TestDeadline checks that retries end with the caller's deadline, not
// after it: the backend gives up as soon as the next backoff would pass it,
// and reports unavailability.
func TestDeadline(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	_, h := openKey(t, b, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	f.Update(func(o *gcpkmsfake.Options) { o.Unavailable = 1 << 30 })
	exact := func(d time.Duration) time.Duration { return d } // waits of 50ms, 100ms, 200ms...

	tests := []struct {
		name     string
		deadline time.Duration
		jitter   func(time.Duration) time.Duration
		attempts int           // 0: any
		within   time.Duration // the call must return before this
	}{
		// 1 attempt; the first wait (50ms) would pass the 30ms deadline.
		{"deadline shorter than the first backoff", 30 * time.Millisecond, exact, 1, 25 * time.Millisecond},
		// 50ms wait, 2nd attempt at ~50ms; 100ms more would pass 120ms.
		{"deadline within the second backoff", 120 * time.Millisecond, exact, 2, 100 * time.Millisecond},
		// With random waits, it returns at the deadline: the bound leaves
		// a loaded machine time to schedule the return (seen 304 ms), and
		// a wait slept past the deadline would overshoot by far more.
		{"random jitter", 300 * time.Millisecond, retry.FullJitter, 0, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b.retry.Backoff.Jitter = tt.jitter
			defer func() { b.retry.Backoff.Jitter = retry.FullJitter }()
			ctx, cancel := context.WithTimeout(t.Context(), tt.deadline)
			defer cancel()
			start := time.Now()
			_, err := h.Signer.(*signer).SignContext(ctx, nil, make([]byte, 32), crypto.SHA256)
			elapsed := time.Since(start)
			var ue *UnavailableError
			if !errors.As(err, &ue) || !errors.Is(err, backends.ErrUnavailable) {
				t.Fatalf("err = %v, want *UnavailableError", err)
			}
			if tt.attempts != 0 && ue.Attempts != tt.attempts {
				t.Errorf("%d attempts, want %d: %v", ue.Attempts, tt.attempts, err)
			}
			if elapsed > tt.within {
				t.Errorf("returned after %v, want within %v (deadline %v)", elapsed, tt.within, tt.deadline)
			}
			if !strings.Contains(err.Error(), "Unavailable") {
				t.Errorf("error does not name the provider's answer: %v", err)
			}
		})
	}
}

// TestAttemptTimeout has Cloud KMS answer slower than one attempt may take:
// each attempt ends in DEADLINE_EXCEEDED and is retried, until the caller's
// deadline.
func TestAttemptTimeout(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{AttemptTimeout: 60 * time.Millisecond})
	_, h := openKey(t, b, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	f.Update(func(o *gcpkmsfake.Options) { o.Latency = 500 * time.Millisecond })
	ctx, cancel := context.WithTimeout(t.Context(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := jose.Sign(ctx, h.Signer, h.Alg, []byte("e30.e30"))
	elapsed := time.Since(start)
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Attempts < 2 {
		t.Fatalf("err = %v, want *UnavailableError after several attempts", err)
	}
	if !strings.Contains(err.Error(), "DeadlineExceeded") {
		t.Errorf("error does not say the attempts timed out: %v", err)
	}
	if elapsed > 450*time.Millisecond {
		t.Errorf("returned after %v, deadline 400ms", elapsed)
	}
}

// TestRateLimit checks the per-key-version token bucket: a wait that would
// pass the deadline fails at once as unavailability, and other versions
// have their own bucket.
func TestRateLimit(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{RateLimit: 2}) // a burst of 2, then one per 500ms
	_, uri1 := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	_, uri2 := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	h1, err := b.Open(t.Context(), uri1)
	if err != nil {
		t.Fatal(err)
	}
	h1again, err := b.Open(t.Context(), uri1)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := b.Open(t.Context(), uri2)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(h backends.Handle, d time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		defer cancel()
		start := time.Now()
		_, err := jose.Sign(ctx, h.Signer, h.Alg, []byte("e30.e30"))
		return time.Since(start), err
	}
	for range 2 {
		if _, err := sign(h1, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// The bucket of uri1 is empty, also for a second Open of it.
	elapsed, err := sign(h1again, 200*time.Millisecond)
	if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "rate limit") || elapsed > 100*time.Millisecond {
		t.Errorf("over the rate limit: %v after %v, want fast unavailability", err, elapsed)
	}
	if _, err := sign(h2, 200*time.Millisecond); err != nil {
		t.Errorf("another key version: %v", err)
	}
	// With time, the limit lets the next one through.
	if elapsed, err := sign(h1, 2*time.Second); err != nil || elapsed < 300*time.Millisecond {
		t.Errorf("waiting for the rate limit: %v after %v", err, elapsed)
	}
}

// TestCancel: a caller that gives up is not an outage.
func TestCancel(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	_, h := openKey(t, b, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	f.Update(func(o *gcpkmsfake.Options) { o.Unavailable = 1 << 30 })
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(30*time.Millisecond, cancel)
	_, err := jose.Sign(ctx, h.Signer, h.Alg, []byte("e30.e30"))
	if !errors.Is(err, context.Canceled) || errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("err = %v, want context.Canceled and not unavailability", err)
	}
}

// TestClose: signers of a closed Backend fail as unavailable.
func TestClose(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	uri, h := openKey(t, b, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := jose.Sign(t.Context(), h.Signer, h.Alg, []byte("e30.e30"))
	if !errors.Is(err, ErrClosed) || !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("sign after Close: %v", err)
	}
	if _, err := b.Open(t.Context(), uri); !errors.Is(err, ErrClosed) {
		t.Errorf("Open after Close: %v", err)
	}
}
