package server

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/jwks/jwksserve"
	"github.com/cardsign/cardsign/server/revocations"
	"github.com/cardsign/cardsign/store"
)

// TestRevocationPublisherCache: the document is signed once, stored, and
// served again until something it says changes: forgetting the cached copy
// (another replica announced a change) reads the stored one again, the same
// bytes, and a revocation re-signs it with the next sequence, listing the
// key.
func TestRevocationPublisherCache(t *testing.T) {
	ctx := t.Context()
	a, _ := newAuthority(t)
	doc0, r0 := verifiedRevocations(t, a)
	if doc, _ := verifiedRevocations(t, a); !bytes.Equal(doc, doc0) {
		t.Fatal("re-signed although nothing changed")
	}
	a.revocations.Forget()
	doc1, r1 := verifiedRevocations(t, a)
	if !bytes.Equal(doc1, doc0) || r1.Sequence != r0.Sequence {
		t.Fatalf("after forget: sequence %d, want the stored document (sequence %d)", r1.Sequence, r0.Sequence)
	}
	pending, err := a.admin.RotateKey(ctx, "", durationPtr(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.RevokeKey(ctx, pending.KID, "superseded", false); err != nil {
		t.Fatal(err)
	}
	_, r2 := verifiedRevocations(t, a)
	if len(r2.Revoked) != 1 || r2.Revoked[0].KID != pending.KID || r2.Sequence <= r1.Sequence {
		t.Fatalf("after a revocation: %+v", r2)
	}
}

// TestDocumentsServedWhileStoreDown: with PostgreSQL stopped, the JWKS and
// the revocation document are served from the last read (the same bytes),
// with a Cache-Control that does not outlive them, /readyz says signing
// stopped but documents are served, and /readyz/documents stays 200 until
// the bounds pass.
func TestDocumentsServedWhileStoreDown(t *testing.T) {
	ctx := t.Context()
	c, st := ownPostgres(t)
	a := newAuthorityOn(t, st, t.TempDir())
	a.docs.jwksMaxAge = 24 * time.Hour
	a.docs.revocationTTL = 2 * time.Hour // the bound of a JWKS served from the last read
	// A pending key activates in an hour: a scheduled transition.
	if _, err := a.admin.RotateKey(ctx, "", durationPtr(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); a.CheckReadiness(ctx) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not ready on a running database: %v", a.CheckReadiness(ctx))
		}
	}
	h := NewHTTPHandler(a, HTTPOptions{})
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	maxAge := func(rec *httptest.ResponseRecorder) time.Duration { return maxAgeOf(t, rec) }
	jwksUp, revUp := get(jwks.JWKSPath), get(jwks.RevocationsPath)
	if jwksUp.Code != http.StatusOK || revUp.Code != http.StatusOK {
		t.Fatalf("documents with the database up: %d %d", jwksUp.Code, revUp.Code)
	}
	if rec := get(DocumentsReadyPath); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "last read") {
		t.Fatalf("%s with the database up: %d %s", DocumentsReadyPath, rec.Code, rec.Body)
	}

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Both documents are due for a re-read now (as after their refresh
	// period, without waiting for it).
	a.keys.invalidate()
	a.revocations.Forget()
	rec := get(jwks.JWKSPath)
	if rec.Code != http.StatusOK || rec.Body.String() != jwksUp.Body.String() || rec.Header().Get("Etag") != jwksUp.Header().Get("Etag") {
		t.Fatalf("JWKS with the database stopped: %d %s", rec.Code, rec.Body)
	}
	if got := maxAge(rec); got <= 0 || got > time.Hour {
		t.Fatalf("JWKS max-age %s with the database stopped: not past the pending key's activation in an hour", got)
	}
	rec = get(jwks.RevocationsPath)
	if rec.Code != http.StatusOK || rec.Body.String() != revUp.Body.String() || rec.Header().Get("Cache-Control") != jwksserve.RevocationCacheControl {
		t.Fatalf("revocation document with the database stopped: %d %s %q", rec.Code, rec.Body, rec.Header().Get("Cache-Control"))
	}
	rec = get("/readyz")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "store unavailable") || !strings.Contains(rec.Body.String(), DocumentsReadyPath) {
		t.Fatalf("/readyz with the database stopped: %d %s", rec.Code, rec.Body)
	}
	rec = get(DocumentsReadyPath)
	var body struct {
		Status string
		JWKS   struct{ State string } `json:"jwks"`
		Revs   struct{ State string } `json:"revocations"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusOK || body.JWKS.State != "last read" || body.Revs.State != "last read" {
		t.Fatalf("%s with the database stopped: %d %s", DocumentsReadyPath, rec.Code, rec.Body)
	}

	// The bound: half an hour after the last read, however far the next
	// transition is.
	a.docs.revocationTTL = 30 * time.Minute
	a.keys.invalidate()
	if got := maxAge(get(jwks.JWKSPath)); got <= 0 || got > 30*time.Minute {
		t.Fatalf("JWKS max-age %s: past the bound of half an hour after the last read", got)
	}
	// Past the bound, and past the revocation document's exp: 503, not
	// an outdated document.
	a.docs.revocationTTL = time.Nanosecond
	a.keys.invalidate()
	if rec := get(jwks.JWKSPath); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("JWKS past its bound: %d", rec.Code)
	}
	// The clock past the document's exp (revocations.ttl is an hour).
	later := a.now().Add(2 * time.Hour)
	a.setClock(func() time.Time { return later })
	a.revocations.Forget()
	if rec := get(jwks.RevocationsPath); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("revocation document past its exp: %d", rec.Code)
	}
	if rec := get(DocumentsReadyPath); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%s with no document to serve: %d %s", DocumentsReadyPath, rec.Code, rec.Body)
	}
}

// TestRevocationsCarryAuditHead: the revocation document carries the audit
// head; it follows the head at most once per revocations.HeadRefresh; and a
// store head that goes back (the database edited under the daemon) does not
// lower the published head.
func TestRevocationsCarryAuditHead(t *testing.T) {
	ctx := t.Context()
	a, dir := newAuthority(t)
	advance := manualClock(a)

	fetch := func() ([]byte, jwks.Revocations) {
		t.Helper()
		doc, r := verifiedRevocations(t, a)
		if r.AuditHead == nil {
			t.Fatalf("revocation document without audit_head")
		}
		return doc, r
	}
	// The first key's record (its creation is audited) is record 1.
	recs, err := a.store.ListAudit(ctx, 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("before any signature: %d records, %v", len(recs), err)
	}
	appendRec := func() {
		t.Helper()
		sum := sha256.Sum256([]byte{byte(len(recs))})
		out, err := a.store.AppendAudit(ctx, []audit.Record{{Time: a.now(), Caller: "t", CanonicalSHA256: sum[:], Signature: "s"}})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, out...)
	}
	wantHead := func(r jwks.Revocations, seq int64, hash []byte) {
		t.Helper()
		if r.AuditHead.Seq != seq || !bytes.Equal(r.AuditHead.Hash, hash) {
			t.Fatalf("audit_head = %d %x, want %d %x", r.AuditHead.Seq, r.AuditHead.Hash, seq, hash)
		}
	}

	doc0, r0 := fetch()
	wantHead(r0, 1, recs[0].Hash)
	appendRec()
	appendRec()
	if doc, _ := fetch(); !bytes.Equal(doc, doc0) {
		t.Fatal("re-signed within revocations.HeadRefresh of the last document: one signature per fetch after every append")
	}
	advance(revocations.HeadRefresh)
	doc1, r1 := fetch()
	wantHead(r1, 3, recs[2].Hash)
	if r1.Sequence <= r0.Sequence {
		t.Fatalf("sequence %d after %d", r1.Sequence, r0.Sequence)
	}
	advance(revocations.HeadRefresh)
	if doc, _ := fetch(); !bytes.Equal(doc, doc1) {
		t.Fatal("re-signed although neither the head nor anything else changed")
	}

	// Someone with write access deletes record 3 and moves the head back.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "cardsign.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`DROP TRIGGER audit_no_delete`, `DROP TRIGGER audit_head_forward_only`,
		`DELETE FROM audit WHERE seq = 3`, `UPDATE audit_head SET seq = 2, hash = (SELECT hash FROM audit WHERE seq = 2)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	doc2, r2 := fetch()
	wantHead(r2, 3, recs[2].Hash)
	if bytes.Equal(doc2, doc1) {
		t.Fatal("not re-signed when the store's head went back")
	}
	if doc, _ := fetch(); !bytes.Equal(doc, doc2) {
		t.Fatal("re-signed again although the store's head did not move")
	}
	a.revocations.Forget()
	_, r3 := fetch()
	wantHead(r3, 3, recs[2].Hash)
}

// TestRevocationsWithoutAuditHead: revocations.audit_head: false publishes
// documents that verifiers built before the member can still read.
func TestRevocationsWithoutAuditHead(t *testing.T) {
	a, _ := newAuthority(t)
	a.revocations = newPublisher(a, true)
	a.docs.revocations = a.revocations
	if _, r := verifiedRevocations(t, a); r.AuditHead != nil {
		t.Fatalf("document with audit_head %+v; want none", r.AuditHead)
	}
}

// verifiedRevocations fetches a's revocation document and verifies it
// against a's own JWKS.
func verifiedRevocations(t *testing.T, a *Authority) ([]byte, jwks.Revocations) {
	t.Helper()
	ctx := t.Context()
	doc, err := a.docs.Revocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set, err := a.docs.JWKS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := jwks.Parse(set.Body)
	if err != nil {
		t.Fatal(err)
	}
	r, err := jwks.VerifyRevocations(doc, keys, a.now())
	if err != nil {
		t.Fatal(err)
	}
	return doc, r
}

// manualClock sets a's clock to one that starts at the present and moves
// only by the advance it returns.
func manualClock(a *Authority) (advance func(time.Duration)) {
	var clock atomic.Int64
	clock.Store(time.Now().UTC().UnixNano())
	a.setClock(func() time.Time { return time.Unix(0, clock.Load()).UTC() })
	return func(d time.Duration) { clock.Add(int64(d)) }
}

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
