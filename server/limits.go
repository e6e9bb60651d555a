package server

import (
	"context"
	"crypto"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/signer"
)

// DefaultBackendConcurrency is how many signatures one key backend makes at
// once unless configured: enough to keep a KMS at its latency bound, few
// enough that a slow HSM queues here, under the request deadline, instead
// of inside the module.
const DefaultBackendConcurrency = 64

// backendLimits bounds concurrent signatures per backend scheme: one set of
// slots shared by every key of a backend, so a slow HSM queues here, under
// the request deadline, and not inside the module.
type backendLimits struct {
	sizes map[string]int // slots per scheme; "default" for the others
	hist  *prometheus.HistogramVec

	mu   sync.Mutex
	sems map[string]chan struct{} // made on first use of a scheme
}

// newBackendLimits sizes each scheme's slots from sizes (its "default"
// entry, then DefaultBackendConcurrency, for schemes not listed) and times
// each signature in hist, by scheme and algorithm.
func newBackendLimits(sizes map[string]int, hist *prometheus.HistogramVec) *backendLimits {
	return &backendLimits{sizes: sizes, hist: hist, sems: map[string]chan struct{}{}}
}

// slots returns the semaphore bounding concurrent signatures in a backend.
func (l *backendLimits) slots(scheme string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.sems[scheme]; ok {
		return s
	}
	n := l.sizes[scheme]
	if n <= 0 {
		n = l.sizes["default"]
	}
	if n <= 0 {
		n = DefaultBackendConcurrency
	}
	s := make(chan struct{}, n)
	l.sems[scheme] = s
	return s
}

// wrap returns an opened key whose signer waits for a slot of its backend.
func (l *backendLimits) wrap(k signer.Key, scheme string) signer.Key {
	hist := l.hist.WithLabelValues(scheme, string(k.Alg))
	k.Signer = &limitedSigner{inner: k.Signer, slots: l.slots(scheme), observe: func(d time.Duration) { hist.Observe(d.Seconds()) }}
	return k
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
