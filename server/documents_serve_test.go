package server

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// served is one answer of a document handler.
type served struct {
	code     int
	etag, cc string
	body     []byte
	maxAge   time.Duration
	kids     []string
}

func serveDoc(t *testing.T, h http.Handler, ifNoneMatch string) served {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/doc", nil)
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	s := served{code: rec.Code, etag: rec.Header().Get("ETag"), cc: rec.Header().Get("Cache-Control"), body: rec.Body.Bytes()}
	if n, ok := strings.CutPrefix(s.cc, "public, max-age="); ok {
		secs, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("Cache-Control %q", s.cc)
		}
		s.maxAge = time.Duration(secs) * time.Second
	}
	if s.code == http.StatusOK && strings.Contains(rec.Header().Get("Content-Type"), "jwk-set") {
		set, err := jwks.Parse(s.body)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range set.Keys {
			s.kids = append(s.kids, k.Kid)
		}
		if got := rec.Header().Get("Content-Length"); got != strconv.Itoa(len(s.body)) || s.etag != jwks.ETagOf(s.body) {
			t.Fatalf("Content-Length %s, ETag %s for %d bytes", got, s.etag, len(s.body))
		}
	}
	return s
}

// TestJWKSPrerenderedAtTransitions: with a controlled clock, the
// pre-rendered JWKS never carries a max-age reaching past the next key
// transition, however late it is served, and it is rendered again at the
// transition: a retired key leaves the set at its expiry without any change
// to the records.
func TestJWKSPrerenderedAtTransitions(t *testing.T) {
	ctx := t.Context()
	a, _ := newAuthority(t)
	var mu sync.Mutex
	now := a.now()
	a.setClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	set := func(t0 time.Time) { mu.Lock(); now = t0; mu.Unlock() }
	first := activeKID(t, a)
	second, err := a.admin.RotateKey(ctx, "", durationPtr(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	activation := *second.ActivateAt
	expiry := activation.Add(a.cfg.RetireGrace) // first leaves the set then
	h := a.docs.newDocumentHandlers().jwks
	both := []string{first, second.KID}
	slices.Sort(both)

	for _, tt := range []struct {
		at        time.Time
		next      time.Time
		kids      []string
		maxAgeMax time.Duration
	}{
		{now, activation, both, time.Hour},
		{activation.Add(-90 * time.Second), activation, both, 90 * time.Second},
		{activation.Add(-1500 * time.Millisecond), activation, both, time.Second},
		{activation.Add(-200 * time.Millisecond), activation, both, 0},
		{activation, expiry, both, time.Hour},
		{expiry.Add(-10 * time.Second), expiry, both, 10 * time.Second},
		{expiry.Add(-time.Millisecond), expiry, both, 0},
		{expiry, time.Time{}, []string{second.KID}, time.Hour},
		{expiry.Add(time.Millisecond), time.Time{}, []string{second.KID}, time.Hour},
	} {
		set(tt.at)
		// Served several times: the first answer renders, the others are
		// the rendition (the clock stands still).
		var etag string
		for i := range 3 {
			s := serveDoc(t, h, "")
			if s.code != http.StatusOK || !slices.Equal(s.kids, tt.kids) {
				t.Fatalf("at %s: %d, kids %v, want %v", tt.at, s.code, s.kids, tt.kids)
			}
			if s.maxAge > tt.maxAgeMax || (!tt.next.IsZero() && tt.at.Add(s.maxAge).After(tt.next)) {
				t.Fatalf("at %s (next transition %s): %q reaches past it", tt.at, tt.next, s.cc)
			}
			if tt.next.IsZero() && s.maxAge != a.cfg.JWKSMaxAge {
				t.Fatalf("at %s, no transition ahead: %q, want max-age %s", tt.at, s.cc, a.cfg.JWKSMaxAge)
			}
			if i > 0 && s.etag != etag {
				t.Fatalf("ETag changed without a change: %s, %s", etag, s.etag)
			}
			etag = s.etag
			if nm := serveDoc(t, h, etag); nm.code != http.StatusNotModified || nm.cc != s.cc || len(nm.body) != 0 {
				t.Fatalf("If-None-Match: %d %q, %d bytes", nm.code, nm.cc, len(nm.body))
			}
		}
	}
}

// TestDocumentsPrerenderedFollowChanges: a revocation here reaches the
// served JWKS and revocation document at once; a revocation by another
// process on the same store reaches them at once when it is announced, and
// within the periodic re-read when it is not.
func TestDocumentsPrerenderedFollowChanges(t *testing.T) {
	ctx := t.Context()
	a, _ := newAuthority(t)
	h := a.docs.newDocumentHandlers()
	rotate := func() string {
		v, err := a.admin.RotateKey(ctx, "", durationPtr(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(serveDoc(t, h.jwks, "").kids, v.KID) {
			t.Fatalf("the pending key %s is not served", v.KID)
		}
		return v.KID
	}
	revokedIn := func() []string {
		s := serveDoc(t, h.revocations, "")
		if s.code != http.StatusOK || s.cc != "no-cache" || s.etag != jwks.ETagOf(s.body) {
			t.Fatalf("revocation document: %d %q %s", s.code, s.cc, s.etag)
		}
		if nm := serveDoc(t, h.revocations, s.etag); nm.code != http.StatusNotModified {
			t.Fatalf("revocation document with If-None-Match: %d", nm.code)
		}
		set, err := jwks.Parse(serveDoc(t, h.jwks, "").body)
		if err != nil {
			t.Fatal(err)
		}
		r, err := jwks.VerifyRevocations(s.body, set, a.now())
		if err != nil {
			t.Fatal(err)
		}
		var kids []string
		for _, x := range r.Revoked {
			kids = append(kids, x.KID)
		}
		return kids
	}
	revokedIn()

	// Here.
	p1 := rotate()
	if _, err := a.admin.RevokeKey(ctx, p1, "superseded", false); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(serveDoc(t, h.jwks, "").kids, p1) || !slices.Contains(revokedIn(), p1) {
		t.Fatalf("revoked %s here: still served, or not listed", p1)
	}

	// By another process, announced.
	cfg := a.cfg
	cfg.Metrics = nil
	other := NewAuthority(cfg, a.store, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { other.Close() })
	p2 := rotate()
	if _, err := other.admin.RevokeKey(ctx, p2, "superseded", false); err != nil {
		t.Fatal(err)
	}
	a.changed(store.TopicKeys)
	if slices.Contains(serveDoc(t, h.jwks, "").kids, p2) || !slices.Contains(revokedIn(), p2) {
		t.Fatalf("revoked %s by another process, announced: still served, or not listed", p2)
	}

	// By another process, not announced: within the periodic re-read.
	p3 := rotate()
	revokedIn()
	if _, err := other.admin.RevokeKey(ctx, p3, "superseded", false); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for slices.Contains(serveDoc(t, h.jwks, "").kids, p3) || !slices.Contains(revokedIn(), p3) {
		if time.Since(start) > 3*a.cfg.KeyRefresh {
			t.Fatalf("revoked %s by another process, not announced: still served after %s", p3, time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if took := time.Since(start); took > a.cfg.KeyRefresh+500*time.Millisecond {
		t.Errorf("an unannounced revocation took %s to reach the served documents; the re-read is every %s", took, a.cfg.KeyRefresh)
	}
}
