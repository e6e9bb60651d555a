package registry

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/store"
)

// TestCardHTTPCached: a handler serving public cards from memory answers
// exactly as one reading the store, for every representation and
// condition; it reads the store again once the version moves or the card
// has been held for fresh, and never holds what is not a public card.
func TestCardHTTPCached(t *testing.T) {
	tr := newTestRegistry(t, nil)
	var version uint64
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cached := testHandler(tr).CacheCards(func() uint64 { return version }, time.Second, func() time.Time { return now })
	plain := testHandler(tr)
	first, err := tr.register(t, "pub", store.Public, "token:a", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.register(t, "priv", store.Private, "token:a", "k1"); err != nil {
		t.Fatal(err)
	}
	const path = "/agents/pub/agent-card.json"
	etag := serve(plain, "GET", path, nil).Header().Get("ETag")
	for _, tc := range []struct {
		name, method string
		header       http.Header
	}{
		{"GET", "GET", nil},
		{"GET again (from memory)", "GET", nil},
		{"HEAD", "HEAD", nil},
		{"card type", "GET", http.Header{"Accept": {CardMediaType}}},
		{"304", "GET", http.Header{"If-None-Match": {etag}}},
		{"304 weak, in a list", "GET", http.Header{"If-None-Match": {`"x", W/` + etag}}},
		{"card type, JSON's tag", "GET", http.Header{"Accept": {CardMediaType}, "If-None-Match": {etag}}},
		{"reader", "GET", readerHeader},
		{"private", "GET", nil},
	} {
		p := path
		if tc.name == "private" {
			p = "/agents/priv/agent-card.json"
		}
		want, got := serve(plain, tc.method, p, tc.header), serve(cached, tc.method, p, tc.header)
		if got.Code != want.Code || got.Body.String() != want.Body.String() || !maps.EqualFunc(got.Header(), want.Header(), slices.Equal[[]string]) {
			t.Errorf("%s: from memory %d %v %q, from the store %d %v %q", tc.name, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
	if _, ok := cached.cache.cards.Load("priv"); ok {
		t.Error("a private card was held")
	}

	body := func() string { return serve(cached, "GET", path, nil).Body.String() }
	second, err := tr.register(t, "pub", store.Public, "token:a", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if string(second.Signed) == string(first.Signed) {
		t.Fatal("the second registration signed the same bytes")
	}
	steps := []struct {
		name string
		move func()
		want string
	}{
		{"unchanged version, within fresh", func() { now = now.Add(time.Second - 1) }, string(first.Signed)},
		{"fresh elapsed", func() { now = now.Add(1) }, string(second.Signed)},
	}
	for _, s := range steps {
		s.move()
		if got := body(); got != s.want {
			t.Errorf("%s: served %.40q…, want %.40q…", s.name, got, s.want)
		}
	}
	third, err := tr.register(t, "pub", store.Public, "token:a", "k1")
	if err != nil {
		t.Fatal(err)
	}
	version++
	if got := body(); got != string(third.Signed) {
		t.Errorf("version moved: served %.40q…, want the third registration", got)
	}
	if _, err := tr.Revoke(t.Context(), "pub", 0, "compromised", "token:admin"); err != nil {
		t.Fatal(err)
	}
	version++
	if w := serve(cached, "GET", path, nil); w.Code != http.StatusGone {
		t.Errorf("revoked card: %d, want 410 at the next request", w.Code)
	}
}

// TestCardCacheBounded: the cards held stay under maxCachedBytes (the
// cache starts over past it), and a stale card is dropped when it is
// found stale.
func TestCardCacheBounded(t *testing.T) {
	var version atomic.Uint64
	c := &cardCache{version: version.Load, fresh: time.Hour, now: time.Now}
	body := make([]byte, 1<<20)
	for i := range 40 {
		c.put(fmt.Sprint(i), &cachedCard{until: time.Now().Add(time.Hour), json: servedCard{body: body}})
		if b := c.bytes.Load(); b > maxCachedBytes {
			t.Fatalf("after %d cards of 1 MiB: %d bytes held", i+1, b)
		}
	}
	if c.get("39") == nil {
		t.Fatal("the card put last is not held")
	}
	held := c.bytes.Load()
	version.Add(1)
	if c.get("39") != nil {
		t.Fatal("a card read before a change is served after it")
	}
	if got := c.bytes.Load(); got != held-int64(len(body)) {
		t.Fatalf("after dropping a stale card: %d bytes held, want %d", got, held-int64(len(body)))
	}
}
