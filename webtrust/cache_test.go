package webtrust

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCache(t *testing.T) {
	p := newPKI(t)
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	var notModified atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/max-age", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=60")
		w.Write([]byte("max-age"))
	})
	mux.HandleFunc("/aged", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		w.Header().Set("Age", "50")
		w.Write([]byte("aged"))
	})
	mux.HandleFunc("/etag", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Cache-Control", "no-cache")
		if r.Header.Get("If-None-Match") == `"v1"` {
			notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write([]byte("etag"))
	})
	mux.HandleFunc("/no-store", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store, max-age=600")
		w.Write([]byte("no-store"))
	})
	mux.HandleFunc("/expires", func(w http.ResponseWriter, r *http.Request) {
		// The server's clock is an hour off; Expires counts from its Date.
		srv := start.Add(time.Hour)
		w.Header().Set("Date", srv.Format(http.TimeFormat))
		w.Header().Set("Expires", srv.Add(30*time.Second).Format(http.TimeFormat))
		w.Write([]byte("expires"))
	})
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("plain")) })
	s := p.newSite(t, mux, "catalog.example")

	for _, tc := range []struct {
		path string
		// hits after each of: fetch, fetch, advance(step) fetch
		step time.Duration
		want [3]int64
	}{
		{"/max-age", 61 * time.Second, [3]int64{1, 1, 2}},
		{"/aged", 11 * time.Second, [3]int64{1, 1, 2}},
		{"/etag", time.Second, [3]int64{1, 2, 3}},
		{"/no-store", time.Second, [3]int64{1, 2, 3}},
		{"/expires", 31 * time.Second, [3]int64{1, 1, 2}},
		{"/plain", time.Second, [3]int64{1, 2, 3}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			clk := newClock(start)
			c := p.newTestClient(t, Options{Now: clk.now}, s)
			s.hits.Store(0)
			notModified.Store(0)
			for i := range 3 {
				if i == 2 {
					clk.advance(tc.step)
				}
				b, _, err := c.fetch.get(t.Context(), "https://catalog.example"+tc.path, KindArtifact, "")
				if err != nil || string(b) != strings.TrimPrefix(tc.path, "/") {
					t.Fatalf("fetch %d: %q %v", i, b, err)
				}
				if got := s.hits.Load(); got != tc.want[i] {
					t.Fatalf("after fetch %d: %d requests, want %d", i, got, tc.want[i])
				}
			}
			if n := notModified.Load(); tc.path == "/etag" && n != 2 {
				t.Errorf("/etag answered 304 %d times, want 2", n)
			}
		})
	}
}

func TestCacheBounds(t *testing.T) {
	p := newPKI(t)
	s := p.newSite(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=600")
		w.Write([]byte(strings.Repeat("b", 100)))
	}), "catalog.example")
	cache := NewCache(2, 250, nil)
	c := p.newTestClient(t, Options{Cache: cache}, s)
	get := func(path string) {
		t.Helper()
		if _, _, err := c.fetch.get(t.Context(), "https://catalog.example"+path, KindArtifact, ""); err != nil {
			t.Fatal(err)
		}
	}
	get("/a")
	get("/b")
	get("/a") // from the cache: /b is now the least recently used
	if cache.Len() != 2 || s.hits.Load() != 2 {
		t.Fatalf("len %d hits %d", cache.Len(), s.hits.Load())
	}
	get("/c") // evicts /b
	get("/a")
	if s.hits.Load() != 3 {
		t.Errorf("/a was evicted instead of /b: %d requests", s.hits.Load())
	}
	get("/b")
	if s.hits.Load() != 4 || cache.Len() != 2 {
		t.Errorf("hits %d len %d", s.hits.Load(), cache.Len())
	}
	// A body over the byte bound passes through and is not stored.
	small := NewCache(10, 50, nil)
	c = p.newTestClient(t, Options{Cache: small}, s)
	if b, _, err := c.fetch.get(t.Context(), "https://catalog.example/x", KindArtifact, ""); err != nil || len(b) != 100 {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	if small.Len() != 0 {
		t.Errorf("a body over the cache's bytes is stored")
	}
}

// A cacheable body over the kind's cap is refused after cap+1 bytes: the
// cache must not read it up to its own bound (32 MiB) first, nor store it.
func TestCacheHonoursKindCap(t *testing.T) {
	p := newPKI(t)
	const size = 20 << 20
	written := make(chan int64, 2)
	chunk := []byte(strings.Repeat("d", 64<<10))
	s := p.newSite(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		if r.URL.Path == "/etag" {
			w.Header().Set("Cache-Control", "no-cache")
			w.Header().Set("ETag", `"v1"`)
		}
		var n int64
		for n < size {
			k, err := w.Write(chunk)
			n += int64(k)
			if err != nil {
				break
			}
		}
		written <- n
	}), "catalog.example")
	for _, path := range []string{"/max-age", "/etag"} {
		t.Run(path, func(t *testing.T) {
			cache := NewCache(0, 0, nil)
			c := p.newTestClient(t, Options{Cache: cache}, s)
			_, _, err := c.fetch.get(t.Context(), "https://catalog.example"+path, KindDID, "")
			if err == nil || !strings.Contains(err.Error(), "DID document over the cap of 262144 bytes") {
				t.Fatalf("got %v; want the DID document refused over its cap", err)
			}
			if cache.Len() != 0 {
				t.Errorf("the cache holds %d documents, want none", cache.Len())
			}
			select {
			case n := <-written:
				// Socket buffers and HTTP/2 flow control let the server
				// write a few MiB ahead of the reader; not the whole body.
				if n >= size {
					t.Errorf("the server wrote all %d bytes: the body was read past the cap", n)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the server is still writing")
			}
		})
	}
}
