package memlog

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
	"github.com/cardsign/cardsign/transparency"
)

// The helpers of the tests of package transparency and its client and
// server: a log's history, and a server that can misbehave.

// TestOrigin is the origin of NewTest's log.
const TestOrigin = "cardsign.test/log"

// NewTest returns an in-memory log of TestOrigin, with a new key, holding
// the entries of n records (AppendN with no prefix), and its verifiers.
func NewTest(t testing.TB, n int) (*Log, []transparency.Verifier) {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	l, keys := NewTestWith(t, TestOrigin, key)
	l.AppendN(t, n, "")
	return l, keys
}

// NewTestWith returns an empty in-memory log of origin signed with key, and
// its verifiers.
func NewTestWith(t testing.TB, origin string, key ed25519.PrivateKey) (*Log, []transparency.Verifier) {
	t.Helper()
	l, err := New(origin, key)
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

// Records returns audit records first+1 to first+n as a store holds them
// (chained from the genesis hash): card "agent-I", every tenth a refused
// request, prefix distinguishing one history from another (a fork's).
func Records(first, n int, prefix string) []audit.Record {
	out := make([]audit.Record, n)
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
		out[i] = rec
	}
	return out
}

// Entries returns the encoded entries of Records(first, n, prefix), record
// I at hosts aI.example.com and shared.example.org.
func Entries(first, n int, prefix string) [][]byte {
	out := make([][]byte, n)
	for i, rec := range Records(first, n, prefix) {
		out[i] = transparency.NewEntry(rec, []string{fmt.Sprintf("a%d.example.com", rec.Seq), "shared.example.org"}).Marshal()
	}
	return out
}

// AppendN appends the entries of the next n records of the history prefix
// names (Entries).
func (l *Log) AppendN(t testing.TB, n int, prefix string) {
	t.Helper()
	if err := l.Append(Entries(int(l.Len()), n, prefix)...); err != nil {
		t.Fatal(err)
	}
}

// SwapServer is an HTTP server whose handler a test can replace: the same
// URL serves an honest log, then a forked one.
type SwapServer struct {
	*httptest.Server
	h atomic.Pointer[http.Handler]
}

// NewSwapServer starts a SwapServer serving h, closed when t ends.
func NewSwapServer(t testing.TB, h http.Handler) *SwapServer {
	s := &SwapServer{}
	s.Set(h)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }))
	t.Cleanup(s.Close)
	return s
}

// Set makes s serve h from now on.
func (s *SwapServer) Set(h http.Handler) { s.h.Store(&h) }

// Request returns h's answer to a request of method for path.
func Request(t testing.TB, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// Mounted serves h at /log/ as cardsignd does.
func Mounted(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/log/", http.StripPrefix("/log/", h))
	return mux
}

// FlipByte returns h with one byte of the body of path flipped: a
// tampered tile or entry on the wire or in a cache.
func FlipByte(h http.Handler, path string, at int) http.Handler {
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
		_, _ = w.Write(body)
	})
}
