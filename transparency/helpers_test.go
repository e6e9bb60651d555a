package transparency_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/memlog"
	"github.com/cardsign/cardsign/transparency"
	"golang.org/x/mod/sumdb/note"
)

const testOrigin = "cardsign.test/log"

// newLog returns an empty in-memory log of testOrigin and its verifiers.
func newLog(t testing.TB) (*memlog.Log, []note.Verifier) {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return newLogWith(t, testOrigin, key)
}

func newLogWith(t testing.TB, origin string, key ed25519.PrivateKey) (*memlog.Log, []note.Verifier) {
	t.Helper()
	l, err := memlog.New(origin, key)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := transparency.VerifierKey(origin, key.Public())
	if err != nil {
		t.Fatal(err)
	}
	vs, err := transparency.ParseVerifierKeys(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return l, vs
}

// entries returns the encoded entries of audit records first+1 to
// first+n: card "agent-I" at host aI.example.com, every tenth a refused
// request, prefix distinguishing one history from another (a fork's).
func entries(first, n int, prefix string) [][]byte {
	out := make([][]byte, n)
	prev := audit.Genesis()
	for i := range n {
		seq := int64(first + i + 1)
		rec := audit.Record{
			Seq: seq, Time: time.Date(2026, 1, 2, 3, 4, 5, int(seq), time.UTC), Caller: prefix + "caller",
			RequestID: fmt.Sprint("req-", seq), CardName: fmt.Sprintf("%sagent-%d", prefix, seq), CardVersion: "1.0",
			CanonicalSHA256: make([]byte, 32), KID: "k1", Alg: "ES256", Profile: "spec", Signature: fmt.Sprint("sig-", seq),
		}
		if seq%10 == 0 {
			rec.Outcome, rec.Reason, rec.KID, rec.Alg, rec.Profile, rec.Signature = audit.OutcomeRefused, "host not allowed", "", "", "", ""
		}
		rec.PrevHash = prev
		rec.Hash = rec.ComputeHash(prev)
		prev = rec.Hash
		out[i] = transparency.NewEntry(rec, []string{fmt.Sprintf("a%d.example.com", seq), "shared.example.org"}).Marshal()
	}
	return out
}

func appendN(t testing.TB, l *memlog.Log, n int, prefix string) {
	t.Helper()
	if err := l.Append(entries(int(l.Len()), n, prefix)...); err != nil {
		t.Fatal(err)
	}
}

// swapServer is an HTTP server whose handler a test can replace: the same
// URL serves an honest log, then a forked one.
type swapServer struct {
	*httptest.Server
	h atomic.Pointer[http.Handler]
}

func newSwapServer(t testing.TB, h http.Handler) *swapServer {
	s := &swapServer{}
	s.set(h)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }))
	t.Cleanup(s.Close)
	return s
}

func (s *swapServer) set(h http.Handler) { s.h.Store(&h) }

// mounted serves h at /log/ as cardsignd does.
func mounted(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/log/", http.StripPrefix("/log/", h))
	return mux
}

// flipByte returns h with one byte of the body of path flipped: a
// tampered tile or entry on the wire or in a cache.
func flipByte(h http.Handler, path string, at int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if at < len(body) {
			body[at] ^= 1
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}
