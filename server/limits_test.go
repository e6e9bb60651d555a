package server

import (
	"context"
	"crypto"
	"crypto/rand"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/signer"
)

// slowSigner records how many signatures run at once.
type slowSigner struct {
	crypto.Signer
	running, peak atomic.Int32
}

func (s *slowSigner) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	n := s.running.Add(1)
	defer s.running.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	time.Sleep(5 * time.Millisecond)
	return s.Signer.Sign(r, d, o)
}

func TestLimitedSignerBoundsConcurrency(t *testing.T) {
	key := testsupport.Key(t, jose.ES256)
	inner := &slowSigner{Signer: key}
	var observed atomic.Int32
	ls := &limitedSigner{inner: inner, slots: make(chan struct{}, 3), observe: func(time.Duration) { observed.Add(1) }}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			digest := make([]byte, 32)
			if _, err := ls.SignContext(context.Background(), rand.Reader, digest, crypto.SHA256); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if p := inner.peak.Load(); p > 3 || p < 2 {
		t.Fatalf("peak concurrency %d with 3 slots", p)
	}
	if observed.Load() != 20 {
		t.Fatalf("observed %d signatures, want 20", observed.Load())
	}
	// A caller whose deadline passes while every slot is taken gives up.
	for range 3 {
		ls.slots <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := ls.SignContext(ctx, rand.Reader, make([]byte, 32), crypto.SHA256); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a slot past the deadline: %v", err)
	}
}

// TestBackendLimitsSlots: each scheme has one set of slots, sized by its
// entry, else the "default" entry, else DefaultBackendConcurrency; every key
// of a backend shares them.
func TestBackendLimitsSlots(t *testing.T) {
	m := NewMetrics()
	l := newBackendLimits(map[string]int{"pkcs11": 2, "default": 5}, m.backendSign)
	if n := cap(l.slots("pkcs11")); n != 2 {
		t.Fatalf("pkcs11 slots: %d, want 2", n)
	}
	if n := cap(l.slots("gcpkms")); n != 5 {
		t.Fatalf("gcpkms slots: %d, want the default entry's 5", n)
	}
	if first, again := l.slots("gcpkms"), l.slots("gcpkms"); first != again {
		t.Fatal("a scheme's slots made twice")
	}
	if n := cap(newBackendLimits(nil, m.backendSign).slots("file")); n != DefaultBackendConcurrency {
		t.Fatalf("unconfigured slots: %d, want %d", n, DefaultBackendConcurrency)
	}

	key := testsupport.Key(t, jose.ES256)
	k := signer.Key{Signer: key, Alg: jose.ES256, KID: "k"}
	w := l.wrap(k, "pkcs11")
	ls, ok := w.Signer.(*limitedSigner)
	if !ok || ls.inner != crypto.Signer(key) || ls.slots != l.slots("pkcs11") || w.KID != "k" || k.Signer != crypto.Signer(key) {
		t.Fatalf("wrapped key: %+v", w)
	}
}
