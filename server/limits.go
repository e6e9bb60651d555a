package server

import (
	"context"
	"crypto"
	"io"
	"time"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// DefaultBackendConcurrency is how many signatures one key backend makes at
// once unless configured: enough to keep a KMS at its latency bound, few
// enough that a slow HSM queues here, under the request deadline, instead
// of inside the module.
const DefaultBackendConcurrency = 64

// slots returns the semaphore bounding concurrent signatures in a backend.
func (a *Authority) slots(scheme string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.sems[scheme]; ok {
		return s
	}
	n := a.cfg.BackendConcurrency[scheme]
	if n <= 0 {
		n = a.cfg.BackendConcurrency["default"]
	}
	if n <= 0 {
		n = DefaultBackendConcurrency
	}
	s := make(chan struct{}, n)
	a.sems[scheme] = s
	return s
}

// limitedSigner bounds a backend's concurrent signatures and times each one.
// Waiting for a slot honours the request's deadline.
type limitedSigner struct {
	inner   crypto.Signer
	slots   chan struct{}
	observe func(time.Duration)
}

var _ jose.ContextSigner = (*limitedSigner)(nil)

func (s *limitedSigner) Public() crypto.PublicKey { return s.inner.Public() }

func (s *limitedSigner) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return s.SignContext(context.Background(), rand, digest, opts)
}

func (s *limitedSigner) SignContext(ctx context.Context, rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	start := time.Now()
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.slots }()
	var (
		sig []byte
		err error
	)
	if cs, ok := s.inner.(jose.ContextSigner); ok {
		sig, err = cs.SignContext(ctx, rand, digest, opts)
	} else {
		sig, err = s.inner.Sign(rand, digest, opts)
	}
	s.observe(time.Since(start))
	return sig, err
}

// limit wraps an opened key's signer in its backend's concurrency limit.
func (a *Authority) limit(k *backends.Key) *backends.Key {
	scheme, _ := backends.Scheme(k.URI)
	hist := a.metrics.backendSign.WithLabelValues(scheme, string(k.Alg))
	wrapped := *k
	wrapped.Signer = &limitedSigner{inner: k.Signer, slots: a.slots(scheme), observe: func(d time.Duration) { hist.Observe(d.Seconds()) }}
	return &wrapped
}

// backendOf names the backend of an opened key, for metrics.
func (a *Authority) backendOf(kid string) string {
	a.mu.Lock()
	k := a.signers[kid]
	a.mu.Unlock()
	if k == nil {
		return noLabel
	}
	scheme, err := backends.Scheme(k.URI)
	if err != nil {
		return noLabel
	}
	return scheme
}
