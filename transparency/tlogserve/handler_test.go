package tlogserve_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/memlog"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/tlogserve"
	"golang.org/x/mod/sumdb/tlog"
)

// TestHandlerPaths: what each path answers, with which status, type and
// cache lifetime, for a tree of 600 leaves (two full level-0 tiles and a
// partial one of 88; one partial level-1 tile of 2).
func TestHandlerPaths(t *testing.T) {
	l, _ := memlog.NewTest(t, 600)
	h := memlog.Mounted(l.Handler())
	const (
		immutable = "public, max-age=31536000, immutable"
		partial   = "public, max-age=60"
	)
	for _, tc := range []struct {
		path   string
		code   int
		cache  string
		length int    // body bytes, when 200
		msg    string // in the body, when not 200
	}{
		{"/log/checkpoint", 200, "public, max-age=2", -1, ""},
		{"/log/tile/0/000", 200, immutable, 256 * 32, ""},
		{"/log/tile/0/001", 200, immutable, 256 * 32, ""},
		{"/log/tile/0/002.p/88", 200, partial, 88 * 32, ""},
		{"/log/tile/0/002.p/10", 200, partial, 10 * 32, ""},
		{"/log/tile/1/000.p/2", 200, partial, 2 * 32, ""},
		{"/log/tile/entries/000", 200, immutable, -1, ""},
		{"/log/tile/entries/002.p/88", 200, partial, -1, ""},
		{"/log/tile/0/002", 404, "no-store", 0, "not in the log's tree of 600 leaves"},
		{"/log/tile/0/002.p/89", 404, "no-store", 0, "not in the log's tree"},
		{"/log/tile/0/003.p/1", 404, "no-store", 0, "not in the log's tree"},
		{"/log/tile/1/000", 404, "no-store", 0, "not in the log's tree"},
		{"/log/tile/2/000.p/1", 404, "no-store", 0, "not in the log's tree"},
		{"/log/tile/entries/002", 404, "no-store", 0, "not in the log's tree"},
		{"/log/tile/0/x001/000", 404, "no-store", 0, "not in the log's tree"},
		// Seven groups overflow N: refused or far beyond the tree (400 or
		// 404: code -1), never a read.
		{"/log/tile/0/x009/x223/x372/x036/x854/x775/808", -1, "no-store", 0, ""},
		{"/log/tile/0/x999/x999/x999/x999/x999/x999/999", -1, "no-store", 0, ""},
		{"/log/tile/0/1", 400, "no-store", 0, "three digits"},
		{"/log/tile/0/0000", 400, "no-store", 0, "three digits"},
		{"/log/tile/8/000", 400, "no-store", 0, "level must be 0 to 7"},
		{"/log/tile/data/000", 400, "no-store", 0, "level must be 0 to 7 or entries"},
		{"/log/tile/0/000.p/0", 400, "no-store", 0, "partial width must be 1 to 255"},
		{"/log/tile/0/000.p/256", 400, "no-store", 0, "partial width must be 1 to 255"},
		{"/log/tile/0/000.p/088", 400, "no-store", 0, "partial width"},
		{"/log/tile/0/001/000", 400, "no-store", 0, "starts with x"},
		{"/log/tile/entries", 400, "no-store", 0, "no index"},
		{"/log/tile/", 400, "no-store", 0, ""},
		{"/log/", 404, "no-store", 0, "no such log resource"},
		{"/log/checkpoint.txt", 404, "no-store", 0, "no such log resource"},
		{"/log/tiles/0/000", 404, "no-store", 0, "no such log resource"},
	} {
		rec := memlog.Request(t, h, http.MethodGet, tc.path)
		body := rec.Body.String()
		if tc.code == -1 && (rec.Code == 400 || rec.Code == 404) {
			tc.code = rec.Code
		}
		if rec.Code != tc.code || rec.Header().Get("Cache-Control") != tc.cache {
			t.Errorf("GET %s: %d, Cache-Control %q, want %d, %q\n%s", tc.path, rec.Code, rec.Header().Get("Cache-Control"), tc.code, tc.cache, body)
			continue
		}
		if tc.code != 200 {
			if !strings.Contains(body, tc.msg) {
				t.Errorf("GET %s: body %q, want it to say %q", tc.path, body, tc.msg)
			}
			continue
		}
		if tc.length >= 0 && rec.Body.Len() != tc.length {
			t.Errorf("GET %s: %d bytes, want %d", tc.path, rec.Body.Len(), tc.length)
		}
		wantType := "application/octet-stream"
		if tc.path == "/log/checkpoint" {
			wantType = "text/plain; charset=utf-8"
		}
		if got := rec.Header().Get("Content-Type"); got != wantType {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, wantType)
		}
	}

	// What the tiles hold: the leaf hashes of the entries, and the entries.
	es, _ := l.Entries(t.Context(), 0, 600)
	tile := memlog.Request(t, h, http.MethodGet, "/log/tile/0/002.p/88").Body.Bytes()
	for i := range 88 {
		if h := transparency.LeafHash(es[512+i]); !bytes.Equal(tile[i*32:(i+1)*32], h[:]) {
			t.Fatalf("tile/0/002.p/88 hash %d is not leaf %d's hash", i, 512+i)
		}
	}
	bundle, err := transparency.ParseBundle(memlog.Request(t, h, http.MethodGet, "/log/tile/entries/002.p/88").Body.Bytes(), 88)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range bundle {
		if !bytes.Equal(e, es[512+i]) {
			t.Fatalf("entry bundle 002.p/88 entry %d is not leaf %d's entry", i, 512+i)
		}
	}
	// The checkpoint is the log's.
	_, cp, _ := l.Checkpoint(t.Context())
	if got := memlog.Request(t, h, http.MethodGet, "/log/checkpoint").Body.Bytes(); !bytes.Equal(got, cp) {
		t.Errorf("checkpoint %q, want %q", got, cp)
	}
}

// TestHandlerMethods: GET and HEAD only; HEAD has GET's headers and no body.
func TestHandlerMethods(t *testing.T) {
	l, _ := memlog.NewTest(t, 3)
	h := l.Handler()
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		rec := memlog.Request(t, h, m, "/checkpoint")
		if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" || !strings.Contains(rec.Body.String(), "read-only") {
			t.Errorf("%s: %d, Allow %q, %q", m, rec.Code, rec.Header().Get("Allow"), rec.Body.String())
		}
	}
	// Served through a real server, so that HEAD's body is dropped as a
	// client sees it.
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, p := range []string{"/checkpoint", "/tile/0/000.p/3", "/tile/entries/000.p/3"} {
		gr, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(gr.Body)
		gr.Body.Close()
		hr, err := http.Head(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		hbody, _ := io.ReadAll(hr.Body)
		hr.Body.Close()
		if hr.StatusCode != 200 || len(hbody) != 0 || hr.ContentLength != int64(len(body)) ||
			hr.Header.Get("Cache-Control") != gr.Header.Get("Cache-Control") || hr.Header.Get("Content-Type") != gr.Header.Get("Content-Type") {
			t.Errorf("HEAD %s: %d, %d body bytes, Content-Length %d (GET: %d bytes), headers %v vs %v", p, hr.StatusCode, len(hbody), hr.ContentLength, len(body), hr.Header, gr.Header)
		}
	}
}

// TestHandlerTilesByteStable: a tile's bytes never change as the log
// grows; a partial tile is the prefix of the wider and the full one.
func TestHandlerTilesByteStable(t *testing.T) {
	l, _ := memlog.NewTest(t, 300)
	h := l.Handler()
	paths := []string{"/tile/0/000", "/tile/entries/000", "/tile/0/001.p/44", "/tile/entries/001.p/44", "/tile/1/000.p/1"}
	before := map[string][]byte{}
	for _, p := range paths {
		rec := memlog.Request(t, h, http.MethodGet, p)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", p, rec.Code, rec.Body)
		}
		before[p] = rec.Body.Bytes()
	}
	l.AppendN(t, 600, "")
	for _, p := range paths {
		// The same tile again, from a fresh handler too: nothing is cached.
		for _, hh := range []http.Handler{h, l.Handler()} {
			if got := memlog.Request(t, hh, http.MethodGet, p).Body.Bytes(); !bytes.Equal(got, before[p]) {
				t.Errorf("GET %s changed after the log grew", p)
			}
		}
	}
	for partialPath, fullPath := range map[string]string{"/tile/0/001.p/44": "/tile/0/001", "/tile/1/000.p/1": "/tile/1/000.p/3"} {
		full := memlog.Request(t, h, http.MethodGet, fullPath).Body.Bytes()
		if !bytes.HasPrefix(full, before[partialPath]) {
			t.Errorf("%s is not a prefix of %s", partialPath, fullPath)
		}
	}
	full := memlog.Request(t, h, http.MethodGet, "/tile/entries/001").Body.Bytes()
	if !bytes.HasPrefix(full, before["/tile/entries/001.p/44"]) {
		t.Error("entry bundle 001.p/44 is not a prefix of 001")
	}
}

// brokenSource fails every read, as a store that went away.
type brokenSource struct{ tlogserve.Source }

func (brokenSource) ReadHashes(context.Context, []int64) ([]tlog.Hash, error) {
	return nil, errors.New("db: connection refused to 10.0.0.7")
}
func (brokenSource) Entries(context.Context, int64, int64) ([][]byte, error) {
	return nil, errors.New("db: connection refused to 10.0.0.7")
}

// TestHandlerStoreFailure: a store error is a 500 that names nothing of
// the store; the detail is logged.
func TestHandlerStoreFailure(t *testing.T) {
	l, _ := memlog.NewTest(t, 3)
	var logged bytes.Buffer
	h := tlogserve.NewHandler(brokenSource{l}, slog.New(slog.NewTextHandler(&logged, nil)))
	for _, p := range []string{"/tile/0/000.p/3", "/tile/entries/000.p/3"} {
		rec := memlog.Request(t, h, http.MethodGet, p)
		if rec.Code != 500 || strings.Contains(rec.Body.String(), "10.0.0.7") || rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: %d %q", p, rec.Code, rec.Body)
		}
	}
	if !strings.Contains(logged.String(), "10.0.0.7") {
		t.Errorf("the store error was not logged: %s", logged.String())
	}
}

// unsignedSource cannot sign a checkpoint (its key is in an HSM that went
// away) but can read its store.
type unsignedSource struct{ tlogserve.Source }

func (unsignedSource) Checkpoint(context.Context) (int64, []byte, error) {
	return 0, nil, errors.New("hsm: token removed")
}

// TestTilesNeedNoCheckpoint: a tile request reads the tree's size, not a
// signed checkpoint, so serving tiles costs no signature.
func TestTilesNeedNoCheckpoint(t *testing.T) {
	l, _ := memlog.NewTest(t, 3)
	h := tlogserve.NewHandler(unsignedSource{l}, nil)
	if rec := memlog.Request(t, h, http.MethodGet, "/tile/0/000.p/3"); rec.Code != 200 || rec.Body.Len() != 3*32 {
		t.Errorf("tile: %d, %d bytes", rec.Code, rec.Body.Len())
	}
	if rec := memlog.Request(t, h, http.MethodGet, "/checkpoint"); rec.Code != 500 {
		t.Errorf("checkpoint: %d", rec.Code)
	}
}
