package tlogclient_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/memlog"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/tlogclient"
	"golang.org/x/mod/sumdb/tlog"
)

func TestClientCheckpoint(t *testing.T) {
	l, keys := memlog.NewTest(t, 5)
	srv := memlog.NewSwapServer(t, memlog.Mounted(l.Handler()))
	ctx := t.Context()
	for _, url := range []string{srv.URL + "/log/", srv.URL + "/log"} {
		c := &tlogclient.Client{URL: url, Keys: keys}
		cp, err := c.Checkpoint(ctx)
		if err != nil || cp.Origin != memlog.TestOrigin || cp.Size != 5 {
			t.Fatalf("%s: %+v, %v", url, cp, err)
		}
	}
	c := &tlogclient.Client{URL: srv.URL + "/log/", Keys: keys}

	// Another key's log at the same URL.
	other, _ := memlog.NewTest(t, 0)
	srv.Set(memlog.Mounted(other.Handler()))
	if _, err := c.Checkpoint(ctx); err == nil || !strings.Contains(err.Error(), "not signed by a trusted log key") || !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("checkpoint of another key: %v", err)
	}
	// A checkpoint whose body was edited.
	_, signed, _ := l.Checkpoint(ctx)
	forged := l.Fork()
	forged.SetCheckpoint(6, bytes.Replace(signed, []byte("\n5\n"), []byte("\n6\n"), 1))
	srv.Set(memlog.Mounted(forged.Handler()))
	if _, err := c.Checkpoint(ctx); err == nil {
		t.Error("an edited checkpoint was accepted")
	}
	// Not a log at all; a wrong prefix; a bad URL.
	srv.Set(http.NotFoundHandler())
	if _, err := c.Checkpoint(ctx); err == nil || !strings.Contains(err.Error(), "GET "+srv.URL+"/log/checkpoint") || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v", err)
	}
	for _, bad := range []string{"", "ftp://x/log/", "/log/", "http://h/log/?q=1"} {
		if _, err := (&tlogclient.Client{URL: bad, Keys: keys}).Checkpoint(ctx); err == nil || !strings.Contains(err.Error(), "log URL") {
			t.Errorf("URL %q: %v", bad, err)
		}
	}
	// An endless checkpoint is cut at the cap.
	srv.Set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(bytes.Repeat([]byte("a"), 1<<20)) }))
	if _, err := c.Checkpoint(ctx); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("1 MiB checkpoint: %v", err)
	}
	// A server that hangs: the context's deadline ends it, naming the URL.
	hang := make(chan struct{})
	defer close(hang)
	srv.Set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.Checkpoint(tctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), srv.URL+"/log/checkpoint") {
		t.Errorf("hanging server: %v", err)
	}
}

// servedLog is a test log of n entries behind a server whose handler a test
// may swap, and a client of it.
func servedLog(t *testing.T, n int) (*memlog.Log, *memlog.SwapServer, *tlogclient.Client) {
	t.Helper()
	l, keys := memlog.NewTest(t, n)
	srv := memlog.NewSwapServer(t, l.Handler())
	return l, srv, &tlogclient.Client{URL: srv.URL, Keys: keys}
}

// TestClientEntries: entries come back authenticated, in any range, from
// full and partial bundles; a flipped byte of a tile or an entry bundle,
// or a stored hash changed behind the checkpoint, is refused.
func TestClientEntries(t *testing.T) {
	l, srv, c := servedLog(t, 600)
	ctx := t.Context()
	want, _ := l.Entries(ctx, 0, 600)
	cp := mustCheckpoint(t, c)
	for _, r := range [][2]int64{{0, 600}, {250, 520}, {599, 600}, {0, 0}, {512, 513}} {
		got, err := c.Entries(ctx, cp.Tree(), r[0], r[1])
		if err != nil {
			t.Fatalf("entries %v: %v", r, err)
		}
		if len(got) != int(r[1]-r[0]) {
			t.Fatalf("entries %v: %d", r, len(got))
		}
		for i, e := range got {
			if !bytes.Equal(e, want[r[0]+int64(i)]) {
				t.Fatalf("entries %v: entry %d differs", r, i)
			}
		}
	}
	if _, err := c.Entries(ctx, cp.Tree(), 0, 601); err == nil || !strings.Contains(err.Error(), "not in a tree of 600") {
		t.Errorf("entries past the tree: %v", err)
	}

	var te *transparency.TamperError
	for _, tc := range []struct{ path, what string }{
		{"/tile/0/001", "a hash tile"},
		{"/tile/0/002.p/88", "a hash tile"},
		{"/tile/1/000.p/2", "a hash tile"},
		{"/tile/entries/001", "entry of leaf 256"},
		{"/tile/entries/002.p/88", "entry of leaf 512"},
	} {
		// Byte 2 of a bundle is the first entry's first byte; of a tile, the
		// first hash's third.
		srv.Set(memlog.FlipByte(l.Handler(), tc.path, 2))
		_, err := c.Entries(ctx, cp.Tree(), 256, 600)
		if !errors.As(err, &te) || !strings.Contains(err.Error(), tc.what) {
			t.Errorf("%s tampered: %v, want a *TamperError about %s", tc.path, err, tc.what)
		}
	}
	srv.Set(l.Handler())

	// A stored hash changed after the checkpoint was signed.
	tampered := l.Fork()
	tampered.SetHash(tlog.StoredHashIndex(0, 5), [32]byte{1})
	srv.Set(tampered.Handler())
	if _, err := c.Entries(ctx, cp.Tree(), 0, 10); !errors.As(err, &te) {
		t.Errorf("tampered stored hash: %v", err)
	}
	// A stored entry changed (its leaf hash left alone).
	tampered = l.Fork()
	tampered.SetEntry(7, want[8])
	srv.Set(tampered.Handler())
	if _, err := c.Entries(ctx, cp.Tree(), 0, 10); !errors.As(err, &te) || !strings.Contains(err.Error(), "leaf 7") {
		t.Errorf("tampered entry: %v", err)
	}
}

// TestClientPartialTileFallback: a log that deleted its partial tiles once
// the full ones existed still serves a client holding an older checkpoint.
func TestClientPartialTileFallback(t *testing.T) {
	l, srv, c := servedLog(t, 300)
	ctx := t.Context()
	old := mustCheckpoint(t, c)
	l.AppendN(t, 300, "")
	var partials int
	srv.Set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Partial tiles whose full tile exists are gone.
		if p, _, ok := strings.Cut(r.URL.Path, ".p/"); ok && memlog.Request(t, l.Handler(), http.MethodGet, p).Code == 200 {
			partials++
			http.NotFound(w, r)
			return
		}
		l.Handler().ServeHTTP(w, r)
	}))
	got, err := c.Entries(ctx, old.Tree(), 250, 300)
	if err != nil || len(got) != 50 || partials == 0 {
		t.Fatalf("entries of the older tree without partial tiles: %d, %v (%d partial requests)", len(got), err, partials)
	}
	// The current tree's partial tiles are still served.
	if got, err := c.Entries(ctx, mustCheckpoint(t, c).Tree(), 590, 600); err != nil || len(got) != 10 {
		t.Errorf("entries of the current tree's partial tile: %d, %v", len(got), err)
	}
}

// mustCheckpoint is c's verified checkpoint of its log.
func mustCheckpoint(t *testing.T, c *tlogclient.Client) transparency.Checkpoint {
	t.Helper()
	cp, err := c.Checkpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// TestClientTileSizeChecked: a tile or bundle of the wrong size is a fetch
// error naming the path, not a panic or a silent truncation.
func TestClientTileSizeChecked(t *testing.T) {
	l, srv, c := servedLog(t, 10)
	srv.Set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/tile/") {
			w.Write([]byte("short"))
			return
		}
		l.Handler().ServeHTTP(w, r)
	}))
	cp := mustCheckpoint(t, c)
	_, err := c.Entries(t.Context(), cp.Tree(), 0, 10)
	var fe *tlogclient.FetchError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "/tile/entries/000.p/10") {
		t.Errorf("short bundle: %v", err)
	}
}
