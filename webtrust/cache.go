package webtrust

import (
	"bytes"
	"container/list"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Default bounds of a Cache.
const (
	DefaultCacheEntries = 256
	DefaultCacheBytes   = 32 << 20
)

// Cache keeps fetched documents in memory as HTTP caching allows: a
// response is reused while fresh (Cache-Control max-age, else Expires, less
// Age), revalidated with If-None-Match when stale and it has an ETag (a 304
// renews it), and never stored under no-store; no-cache stores it for
// revalidation only. A response with neither freshness nor ETag is not
// stored. Only 200 answers to GET are kept. The cache is bounded in entries
// and bytes (least recently used out first) and safe for concurrent use.
type Cache struct {
	now        func() time.Time
	maxEntries int
	maxBytes   int64

	mu    sync.Mutex
	bytes int64
	lru   *list.List // of *cacheEntry, most recent first
	byKey map[string]*list.Element
}

type cacheEntry struct {
	key     string
	body    []byte
	header  http.Header
	etag    string
	freshTo time.Time // reusable without asking before this instant
}

// NewCache makes a cache of at most maxEntries documents and maxBytes bytes
// of bodies (0: the defaults), on the clock now (nil: time.Now).
func NewCache(maxEntries int, maxBytes int64, now func() time.Time) *Cache {
	if maxEntries <= 0 {
		maxEntries = DefaultCacheEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	if now == nil {
		now = time.Now
	}
	return &Cache{now: now, maxEntries: maxEntries, maxBytes: maxBytes, lru: list.New(), byKey: map[string]*list.Element{}}
}

// Len reports the documents held.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

func (c *Cache) lookup(key string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return cacheEntry{}, false
	}
	c.lru.MoveToFront(el)
	return *el.Value.(*cacheEntry), true
}

func (c *Cache) store(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(e.key)
	if int64(len(e.body)) > c.maxBytes {
		return
	}
	c.byKey[e.key] = c.lru.PushFront(e)
	c.bytes += int64(len(e.body))
	for c.lru.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.removeLocked(c.lru.Back().Value.(*cacheEntry).key)
	}
}

func (c *Cache) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
}

func (c *Cache) removeLocked(key string) {
	if el, ok := c.byKey[key]; ok {
		c.bytes -= int64(len(el.Value.(*cacheEntry).body))
		c.lru.Remove(el)
		delete(c.byKey, key)
	}
}

// policy is what a response's headers allow: store it at all, and until
// when it is fresh.
func (c *Cache) policy(h http.Header) (store bool, freshTo time.Time) {
	now := c.now()
	cc := parseCacheControl(h.Values("Cache-Control"))
	if _, ok := cc["no-store"]; ok {
		return false, time.Time{}
	}
	etag := h.Get("ETag") != ""
	if _, ok := cc["no-cache"]; ok {
		return etag, time.Time{}
	}
	age := time.Duration(0)
	if a, err := strconv.ParseInt(strings.TrimSpace(h.Get("Age")), 10, 64); err == nil && a > 0 {
		age = time.Duration(a) * time.Second
	}
	if v, ok := cc["max-age"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return true, now.Add(time.Duration(n)*time.Second - age)
		}
		return etag, time.Time{} // a malformed max-age: stale at once
	}
	if exp := h.Get("Expires"); exp != "" {
		t, err := http.ParseTime(exp)
		if err != nil {
			return etag, time.Time{} // an invalid Expires means already expired (RFC 9111 §5.3)
		}
		// Relative to the server's Date, so clocks need not agree.
		base := now
		if d, err := http.ParseTime(h.Get("Date")); err == nil {
			base = d
		}
		return true, now.Add(t.Sub(base) - age)
	}
	return etag, time.Time{}
}

// parseCacheControl reads Cache-Control directives (lower-cased names,
// unquoted values).
func parseCacheControl(values []string) map[string]string {
	out := map[string]string{}
	for _, v := range values {
		for _, d := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
			if name == "" {
				continue
			}
			out[strings.ToLower(name)] = strings.Trim(val, `"`)
		}
	}
	return out
}

// sizeCapKey is the request context key of the size cap of the document
// fetched (an int64), set by fetcher.get.
type sizeCapKey struct{}

// withSizeCap returns ctx carrying the size cap of the document fetched, so
// the cache reads no more of a body than the caller will accept.
func withSizeCap(ctx context.Context, limit int64) context.Context {
	return context.WithValue(ctx, sizeCapKey{}, limit)
}

// cachingTransport answers GET requests from the cache when it may, and
// revalidates stale entries.
type cachingTransport struct {
	next  http.RoundTripper
	cache *Cache
}

func (t *cachingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.Header.Get("If-None-Match") != "" || req.Header.Get("Range") != "" {
		return t.next.RoundTrip(req)
	}
	key := req.URL.String() + "\x00" + req.Header.Get("Accept")
	old, have := t.cache.lookup(key)
	if have && t.cache.now().Before(old.freshTo) {
		return cachedResponse(req, old), nil
	}
	if have && old.etag != "" {
		req = req.Clone(req.Context())
		req.Header.Set("If-None-Match", old.etag)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && have:
		resp.Body.Close()
		// The 304's headers renew freshness; the stored ones stand where
		// it says nothing.
		h := old.header.Clone()
		for k, v := range resp.Header {
			h[k] = v
		}
		store, freshTo := t.cache.policy(h)
		renewed := &cacheEntry{key: key, body: old.body, header: h, etag: old.etag, freshTo: freshTo}
		if store {
			t.cache.store(renewed)
		} else {
			t.cache.remove(key)
		}
		return cachedResponse(req, *renewed), nil
	case resp.StatusCode != http.StatusOK:
		return resp, nil
	}
	store, freshTo := t.cache.policy(resp.Header)
	if !store {
		t.cache.remove(key)
		return resp, nil
	}
	// Read what the cache may hold, and no more than the caller's size cap:
	// reading up to the cache's bound (32 MiB by default) would let a server
	// make a verifier read far past a small kind's cap (a DID document's
	// 256 KiB) before the caller refuses it. A bigger body passes through
	// uncached, for the caller to refuse after its cap+1 bytes.
	limit := t.cache.maxBytes
	if c, ok := req.Context().Value(sizeCapKey{}).(int64); ok && c < limit {
		limit = c
	}
	if resp.ContentLength > limit {
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	if int64(len(body)) > limit {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return resp, nil
	}
	resp.Body.Close()
	t.cache.store(&cacheEntry{key: key, body: body, header: resp.Header.Clone(), etag: resp.Header.Get("ETag"), freshTo: freshTo})
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func cachedResponse(req *http.Request, e cacheEntry) *http.Response {
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        e.header.Clone(),
		Body:          io.NopCloser(bytes.NewReader(e.body)),
		ContentLength: int64(len(e.body)),
		Request:       req,
	}
}
