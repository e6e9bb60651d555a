package jwksserve

import (
	"bytes"
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/jwks"
)

// Handler serves the JWKS that source returns, for /.well-known/jwks.json.
// source is called once per request; a server that can tell when the key
// set changes serves a CachedHandler instead, which renders once per change.
//
// GET and HEAD only (anything else: 405 with Allow). The response has
// Content-Type application/jwk-set+json, the Document's ETag, Cache-Control
// "public, max-age=N" with N the whole seconds of MaxAge (rounded down, so
// never past the next transition), and Access-Control-Allow-Origin *. An
// If-None-Match naming the ETag (or "*") gets 304 without a body. When source
// fails the answer is 503 with a short fixed message: its error never
// reaches the client, so the source should log it.
//
// The headers of the last Document served are kept: while source returns
// the same set (same ETag) with the same whole seconds of max-age, nothing
// is formatted again.
func Handler(source func(ctx context.Context) (jwks.Document, error)) http.Handler {
	var last atomic.Pointer[jwksMemo]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, ok := fromSource(w, r, source, "JWKS")
		if !ok {
			return
		}
		etag := doc.ETag
		if etag == "" {
			etag = jwks.ETagOf(doc.Body)
		}
		secs := int64(max(doc.MaxAge, 0) / time.Second)
		m := last.Load()
		if m == nil || m.secs != secs || m.s.etag != etag || len(m.s.body) != len(doc.Body) {
			m = &jwksMemo{s: NewStatic(bytes.Clone(doc.Body), etag, jwks.MediaType, CacheControl(doc.MaxAge)), secs: secs}
			last.Store(m)
		}
		m.s.serve(w, r)
	})
}

type jwksMemo struct {
	s    *Static
	secs int64
}

// Rendition is what a CachedHandler serves until Until (on the clock of
// CacheOptions.Now), or until the source's version changes.
type Rendition struct {
	Static *Static
	Until  time.Time
}

// CacheOptions configure a CachedHandler.
type CacheOptions struct {
	// What names the document in the 503 answer ("JWKS").
	What string
	// Render renders the document now. Its error is not shown to the
	// client (503 with a fixed message), so Render should log it.
	Render func(ctx context.Context) (Rendition, error)
	// Version changes (it only grows) whenever what Render reads may have
	// changed: a rendition made at an older version is not served. Nil:
	// renditions expire at their Until only.
	Version func() uint64
	// Now is the clock of Rendition.Until; nil means time.Now.
	Now func() time.Time
	// Observe, when set, is told the status of every answer.
	Observe func(code int)
}

// CachedHandler serves a document from pre-rendered bytes and headers (a
// Static) held in an atomic.Pointer: a request costs an atomic load, a
// version check and a clock read, then header map entries and the body
// write, on the 200 path and the 304 path alike. The rendition is replaced
// by the first request that finds it expired or made at an older version;
// requests that find it so at the same moment each render (as every request
// did before) and the newest rendition is kept. Errors are not kept: the
// next request renders again.
type CachedHandler struct {
	o   CacheOptions
	cur atomic.Pointer[cachedRendition]
	seq atomic.Uint64 // orders renders by start, so a slow one cannot replace a newer one
}

type cachedRendition struct {
	Rendition
	version uint64
	seq     uint64
}

// NewCachedHandler returns a handler serving what o.Render renders, GET and
// HEAD only, as Handler and RevocationHandler do.
func NewCachedHandler(o CacheOptions) *CachedHandler {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &CachedHandler{o: o}
}

func (c *CachedHandler) version() uint64 {
	if c.o.Version == nil {
		return 0
	}
	return c.o.Version()
}

// Current returns the rendition to serve now, rendering it when the one
// held has expired or was made at an older version.
func (c *CachedHandler) Current(ctx context.Context) (*Static, error) {
	if e := c.cur.Load(); e != nil && e.version == c.version() && c.o.Now().Before(e.Until) {
		return e.Static, nil
	}
	return c.render(ctx)
}

// render renders the document and keeps it unless a render that started
// later was kept meanwhile.
func (c *CachedHandler) render(ctx context.Context) (*Static, error) {
	seq := c.seq.Add(1)
	version := c.version() // before rendering: a change during the render makes it stale
	r, err := c.o.Render(ctx)
	if err != nil {
		return nil, err
	}
	e := &cachedRendition{Rendition: r, version: version, seq: seq}
	for {
		old := c.cur.Load()
		if old != nil && old.seq > seq {
			break
		}
		if c.cur.CompareAndSwap(old, e) {
			break
		}
	}
	return r.Static, nil
}

// Drop makes the next request render the document again.
func (c *CachedHandler) Drop() { c.cur.Store(nil) }

func (c *CachedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !checkMethod(w, r) {
		c.observe(http.StatusMethodNotAllowed)
		return
	}
	s, err := c.Current(r.Context())
	if err != nil {
		unavailable(w, c.o.What)
		c.observe(http.StatusServiceUnavailable)
		return
	}
	c.observe(s.serve(w, r))
}

func (c *CachedHandler) observe(code int) {
	if c.o.Observe != nil {
		c.o.Observe(code)
	}
}
