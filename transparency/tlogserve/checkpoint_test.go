package tlogserve_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cardsign/cardsign/internal/memlog"
)

// TestCheckpointETag: the checkpoint carries an entity tag of its bytes;
// If-None-Match naming it (alone, weak, in a list, or "*") is a 304 with
// the tag and Cache-Control and no body, anything else the checkpoint; a
// grown tree is a new checkpoint with a new tag at the next request.
func TestCheckpointETag(t *testing.T) {
	l, _ := memlog.NewTest(t, 10)
	h := memlog.Mounted(l.Handler())
	get := func(inm ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/log/checkpoint", nil)
		if len(inm) > 0 {
			r.Header["If-None-Match"] = inm
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	first := get()
	etag := first.Header().Get("ETag")
	_, cp, _ := l.Checkpoint(t.Context())
	if first.Code != 200 || etag == "" || !bytes.Equal(first.Body.Bytes(), cp) {
		t.Fatalf("checkpoint: %d, ETag %q, body %q", first.Code, etag, first.Body)
	}
	for _, tc := range []struct {
		name string
		inm  []string
		want int
	}{
		{"its tag", []string{etag}, 304},
		{"weak", []string{"W/" + etag}, 304},
		{"in a list", []string{`"other", ` + etag}, 304},
		{"on a second line", []string{`"other"`, etag}, 304},
		{"any", []string{"*"}, 304},
		{"another tag", []string{`"other"`}, 200},
		{"unquoted", []string{etag[1 : len(etag)-1]}, 200},
	} {
		rec := get(tc.inm...)
		if rec.Code != tc.want || rec.Header().Get("ETag") != etag || rec.Header().Get("Cache-Control") != "public, max-age=2" {
			t.Errorf("%s: %d, ETag %q, Cache-Control %q; want %d with the tag", tc.name, rec.Code, rec.Header().Get("ETag"), rec.Header().Get("Cache-Control"), tc.want)
		}
		if tc.want == 304 && (rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != "") {
			t.Errorf("%s: a 304 with a body (%d bytes, Content-Length %q)", tc.name, rec.Body.Len(), rec.Header().Get("Content-Length"))
		}
	}
	if err := l.Append([]byte("one more entry")); err != nil {
		t.Fatal(err)
	}
	grown := get(etag)
	_, cp, _ = l.Checkpoint(t.Context())
	if grown.Code != 200 || grown.Header().Get("ETag") == etag || !bytes.Equal(grown.Body.Bytes(), cp) {
		t.Errorf("after the tree grew: %d, ETag %q (was %q), body %q", grown.Code, grown.Header().Get("ETag"), etag, grown.Body)
	}
}
