package jwksserve

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jwks"
)

// TestCachedHandler: a rendition is served until its Until on the given
// clock or until the version moves; errors are answered 503 and not kept;
// every answer is observed with its status.
func TestCachedHandler(t *testing.T) {
	now := at(rotT)
	var version uint64
	renders := 0
	var fail error
	codes := map[int]int{}
	h := NewCachedHandler(CacheOptions{
		What: "JWKS",
		Render: func(context.Context) (Rendition, error) {
			if fail != nil {
				return Rendition{}, fail
			}
			renders++
			body := []byte(`{"keys":[],"n":` + strconv.Itoa(renders) + `}`)
			return Rendition{Static: NewStatic(body, "", jwks.MediaType, CacheControl(time.Minute)), Until: now.Add(10 * time.Second)}, nil
		},
		Version: func() uint64 { return version },
		Now:     func() time.Time { return now },
		Observe: func(code int) { codes[code]++ },
	})
	body := func(n int) string { return `{"keys":[],"n":` + strconv.Itoa(n) + `}` }
	ok := func(n int) response {
		b := body(n)
		return response{200, map[string]string{
			"ETag": jwks.ETagOf([]byte(b)), "Cache-Control": "public, max-age=60", "Content-Type": jwks.MediaType,
			"Content-Length": strconv.Itoa(len(b)), "Access-Control-Allow-Origin": "*", "X-Content-Type-Options": "nosniff",
		}, b}
	}
	check(t, "first", h, http.MethodGet, nil, ok(1))
	check(t, "again", h, http.MethodGet, nil, ok(1))
	check(t, "HEAD", h, http.MethodHead, nil, response{200, ok(1).headers, ""})
	check(t, "304", h, http.MethodGet, map[string][]string{"If-None-Match": {`"x", W/` + jwks.ETagOf([]byte(body(1)))}},
		response{304, map[string]string{"ETag": jwks.ETagOf([]byte(body(1))), "Cache-Control": "public, max-age=60", "Content-Type": "", "Content-Length": ""}, ""})
	check(t, "POST", h, http.MethodPost, nil, response{405, map[string]string{"Allow": "GET, HEAD", "ETag": ""}, "method not allowed\n"})
	now = now.Add(10*time.Second - 1)
	check(t, "just before Until", h, http.MethodGet, nil, ok(1))
	now = now.Add(1)
	check(t, "at Until", h, http.MethodGet, nil, ok(2))
	version++
	check(t, "version moved", h, http.MethodGet, nil, ok(3))
	check(t, "same version", h, http.MethodGet, nil, ok(3))
	version++
	fail = errors.New("secret path /var/lib/x")
	check(t, "render fails", h, http.MethodGet, nil, response{503, map[string]string{"Cache-Control": "no-store", "ETag": ""}, "JWKS temporarily unavailable\n"})
	fail = nil
	check(t, "recovered", h, http.MethodGet, nil, ok(4))
	h.Drop()
	check(t, "dropped", h, http.MethodGet, nil, ok(5))
	if codes[200] != 9 || codes[304] != 1 || codes[405] != 1 || codes[503] != 1 {
		t.Errorf("observed %v", codes)
	}
}

// TestCachedHandlerSlowRender: a render that started before another and
// finishes after it does not replace the newer rendition.
func TestCachedHandlerSlowRender(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	var n int
	h := NewCachedHandler(CacheOptions{
		Render: func(ctx context.Context) (Rendition, error) {
			n++
			body := []byte(strconv.Itoa(n))
			if n == 1 {
				close(started)
				<-release
			}
			return Rendition{Static: NewStatic(body, "", "text/plain", "no-cache"), Until: time.Now().Add(time.Hour)}, nil
		},
	})
	done := make(chan *Static)
	go func() {
		s, _ := h.Current(context.Background())
		done <- s
	}()
	<-started
	newer, err := h.Current(context.Background())
	if err != nil || string(newer.Body()) != "2" {
		t.Fatalf("second render: %v %v", newer, err)
	}
	close(release)
	if old := <-done; string(old.Body()) != "1" {
		t.Fatalf("first render returned %q", old.Body())
	}
	if cur, _ := h.Current(context.Background()); cur != newer {
		t.Errorf("the slow render replaced the newer rendition: serving %q", cur.Body())
	}
}

// TestHandlerFollowsSource: Handler keeps the headers of the last jwks.Document,
// and follows a new one.
func TestHandlerFollowsSource(t *testing.T) {
	doc := jwks.Document{Body: []byte(`{"keys":[]}`), MaxAge: time.Minute}
	h := Handler(func(context.Context) (jwks.Document, error) { return doc, nil })
	check(t, "first", h, http.MethodGet, nil, response{200, map[string]string{"ETag": jwks.ETagOf(doc.Body), "Cache-Control": "public, max-age=60"}, `{"keys":[]}`})
	doc.MaxAge = 59500 * time.Millisecond
	check(t, "max-age down", h, http.MethodGet, nil, response{200, map[string]string{"ETag": jwks.ETagOf(doc.Body), "Cache-Control": "public, max-age=59"}, `{"keys":[]}`})
	doc = jwks.Document{Body: []byte(`{"keys":[ ]}`), MaxAge: time.Minute}
	check(t, "new set", h, http.MethodGet, nil, response{200, map[string]string{"ETag": jwks.ETagOf(doc.Body), "Cache-Control": "public, max-age=60"}, `{"keys":[ ]}`})
}

// TestRevocationHandlerFollowsSource: a new document gets its own ETag and
// length, even when the source reuses its slice.
func TestRevocationHandlerFollowsSource(t *testing.T) {
	buf := []byte("document-1")
	h := RevocationHandler(func(context.Context) ([]byte, error) { return buf, nil })
	check(t, "first", h, http.MethodGet, nil, response{200, map[string]string{"ETag": jwks.ETagOf([]byte("document-1")), "Content-Length": "10"}, "document-1"})
	copy(buf, "document-2")
	check(t, "rewritten in place", h, http.MethodGet, nil, response{200, map[string]string{"ETag": jwks.ETagOf([]byte("document-2"))}, "document-2"})
	buf = []byte("document-30")
	check(t, "longer", h, http.MethodGet, nil, response{200, map[string]string{"ETag": jwks.ETagOf(buf), "Content-Length": "11"}, "document-30"})
}
