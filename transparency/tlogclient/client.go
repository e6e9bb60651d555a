// Package tlogclient reads cardsign's transparency log over HTTP: a client
// that authenticates what a served log returns against its signed
// checkpoint, and the monitor that follows a log from run to run.
package tlogclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cardsign/cardsign/transparency"
)

// Client reads a log served in the C2SP tlog-tiles layout (tlogserve.NewHandler's)
// and authenticates what it reads: checkpoints against Keys, tiles against
// a checkpoint's root (tlog.TileHashReader), entries against the tiles.
type Client struct {
	// URL is the log's prefix, e.g. "https://cardsign.example.com/log/";
	// the checkpoint is at URL + "checkpoint".
	URL string
	// HTTP is the client requests go through; http.DefaultClient when nil.
	// Deadlines come from the context of each call.
	HTTP *http.Client
	// Keys are the log's verifier keys (ParseVerifierKeys).
	Keys []note.Verifier
}

// maxBundleBytes bounds an entry bundle: a full one of the largest entries.
const maxBundleBytes = transparency.TileWidth * (2 + transparency.MaxEntryBytes)

// FetchError is a request to the log that failed: the transport, an HTTP
// status, or a body of the wrong size. It says nothing about the log's
// honesty; a log that answers with data its checkpoint does not commit to
// fails with a *TamperError instead.
type FetchError struct {
	URL    string // redacted
	Status int    // the HTTP status, 0 when none came
	Err    error
}

func (e *FetchError) Error() string { return fmt.Sprintf("GET %s: %v", e.URL, e.Err) }
func (e *FetchError) Unwrap() error { return e.Err }

// String is the log's URL, which names it in errors
// (transparency.TileSource).
func (c *Client) String() string { return c.URL }

// base is the log's prefix with a trailing slash, checked once per call.
func (c *Client) base() (string, error) {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("log URL %q: want an http:// or https:// URL of the log's prefix, e.g. https://cardsign.example.com/log/", c.URL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("log URL %s: a log prefix has no query or fragment", u.Redacted())
	}
	s := u.String()
	if !strings.HasSuffix(s, "/") {
		s += "/"
	}
	return s, nil
}

// get fetches the log's path, reading at most limit bytes (one more is an
// error, not a truncation).
func (c *Client) get(ctx context.Context, path string, limit int64) ([]byte, error) {
	base, err := c.base()
	if err != nil {
		return nil, err
	}
	u := base + path
	shown := u
	if pu, err := url.Parse(u); err == nil {
		shown = pu.Redacted()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, &FetchError{URL: shown, Err: err}
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		// *url.Error repeats the URL; keep its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &FetchError{URL: shown, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// The first line of a plain-text error says why (NewHandler's do).
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		why := ""
		if line, _, _ := strings.Cut(string(msg), "\n"); line != "" && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			why = ": " + strings.ToValidUTF8(line, "?")
		}
		return nil, &FetchError{URL: shown, Status: resp.StatusCode, Err: fmt.Errorf("HTTP status %s%s", resp.Status, why)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &FetchError{URL: shown, Status: resp.StatusCode, Err: fmt.Errorf("read body: %w", err)}
	}
	if int64(len(b)) > limit {
		return nil, &FetchError{URL: shown, Status: resp.StatusCode, Err: fmt.Errorf("body over the limit of %d bytes", limit)}
	}
	return b, nil
}

// Checkpoint fetches the log's latest checkpoint and verifies it against
// c.Keys.
func (c *Client) Checkpoint(ctx context.Context) (transparency.Checkpoint, error) {
	b, err := c.get(ctx, transparency.CheckpointPath, transparency.MaxCheckpointBytes)
	if err != nil {
		return transparency.Checkpoint{}, err
	}
	cp, err := transparency.OpenCheckpoint(b, c.Keys)
	if err != nil {
		base, _ := c.base()
		return transparency.Checkpoint{}, fmt.Errorf("checkpoint of %s: %w", base, err)
	}
	return cp, nil
}

// TileReader returns a tlog.TileReader over c: tiles of height 8 at their
// C2SP paths, fetched with ctx. The tiles it returns are not authenticated:
// give it to tlog.TileHashReader (HashReader does) with a verified tree.
func (c *Client) TileReader(ctx context.Context) tlog.TileReader {
	return &tileReader{c: c, ctx: ctx, saved: map[tlog.Tile][]byte{}}
}

// HashReader returns a tlog.HashReader of the tree hashes of tree, read
// from c's tiles and authenticated against tree's root: every hash it
// returns is proven to be in tree. Tiles already authenticated are kept for
// the reader's life (a bounded number), so a walk does not fetch the
// tree's right edge again for every tile.
func (c *Client) HashReader(ctx context.Context, tree tlog.Tree) tlog.HashReader {
	return &authHashReader{hr: tlog.TileHashReader(tree, c.TileReader(ctx))}
}

// authHashReader sorts tlog.TileHashReader's errors: the tile reader's own
// (marked readerError: a fetch, the context, a bad URL) pass through; any
// other means fetched tiles did not authenticate against the tree, a
// *TamperError.
type authHashReader struct{ hr tlog.HashReader }

func (r *authHashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	hs, err := r.hr.ReadHashes(indexes)
	if err != nil {
		var re readerError
		if errors.As(err, &re) {
			return nil, re.err
		}
		return nil, &transparency.TamperError{What: "a hash tile", Err: err}
	}
	return hs, nil
}

// readerError marks an error of tileReader as it passes through
// tlog.TileHashReader, which returns it as is.
type readerError struct{ err error }

func (e readerError) Error() string { return e.err.Error() }

// maxSavedTiles bounds the authenticated tiles a reader keeps: 64 tiles of
// 8 KiB. The right edge of a tree of 2^63 leaves is 8 tiles; the rest is
// the walk's current tile and its parents.
const maxSavedTiles = 64

type tileReader struct {
	c   *Client
	ctx context.Context

	mu    sync.Mutex
	saved map[tlog.Tile][]byte // authenticated (SaveTiles) tiles
}

func (r *tileReader) Height() int { return transparency.TileHeight }

func (r *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		r.mu.Lock()
		data, ok := r.saved[t]
		r.mu.Unlock()
		if ok {
			out[i] = data
			continue
		}
		data, err := r.c.tile(r.ctx, t)
		if err != nil {
			return nil, readerError{err}
		}
		out[i] = data
	}
	return out, nil
}

func (r *tileReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, t := range tiles {
		if len(r.saved) >= maxSavedTiles {
			// Level 0 tiles are read once per walk; the upper ones again
			// and again. Drop the lowest to make room.
			for k := range r.saved {
				if k.L == 0 {
					delete(r.saved, k)
				}
			}
			if len(r.saved) >= maxSavedTiles {
				clear(r.saved)
			}
		}
		r.saved[t] = data[i]
	}
}

// tile fetches the hash tile t (height 8), or the full tile when a partial
// one is gone (C2SP lets a log delete partial tiles once the full one
// exists: its first W hashes are the partial tile's).
func (c *Client) tile(ctx context.Context, t tlog.Tile) ([]byte, error) {
	if t.H != transparency.TileHeight {
		return nil, fmt.Errorf("tile of height %d asked of a log of height %d", t.H, transparency.TileHeight)
	}
	want := t.W * tlog.HashSize
	data, err := c.get(ctx, transparency.TilePath(t), int64(transparency.TileWidth*tlog.HashSize))
	var fe *FetchError
	if errors.As(err, &fe) && fe.Status == http.StatusNotFound && t.W < transparency.TileWidth {
		full := t
		full.W = transparency.TileWidth
		if d, ferr := c.get(ctx, transparency.TilePath(full), int64(transparency.TileWidth*tlog.HashSize)); ferr == nil && len(d) == transparency.TileWidth*tlog.HashSize {
			data, err = d[:want], nil
		}
	}
	if err != nil {
		return nil, err
	}
	if len(data) != want {
		base, _ := c.base()
		return nil, &FetchError{URL: base + transparency.TilePath(t), Status: http.StatusOK, Err: fmt.Errorf("tile of %d bytes, want %d (%d hashes)", len(data), want, t.W)}
	}
	return data, nil
}

// EntryBundle fetches entry bundle t (t.L == EntriesLevel) and returns its
// t.W entries, falling back to the full bundle when a partial one is gone.
// The entries are NOT authenticated: Entries and Walk check them against a
// tree; a caller of EntryBundle checks them itself (audit verify rebuilds
// the root from them).
func (c *Client) EntryBundle(ctx context.Context, t tlog.Tile) ([][]byte, error) {
	if t.L != transparency.EntriesLevel || t.W < 1 || t.W > transparency.TileWidth {
		return nil, fmt.Errorf("not an entry bundle: %+v", t)
	}
	data, err := c.get(ctx, transparency.TilePath(t), int64(t.W)*(2+transparency.MaxEntryBytes))
	var fe *FetchError
	if errors.As(err, &fe) && fe.Status == http.StatusNotFound && t.W < transparency.TileWidth {
		full := t
		full.W = transparency.TileWidth
		if d, ferr := c.get(ctx, transparency.TilePath(full), maxBundleBytes); ferr == nil {
			if entries, perr := transparency.ParseBundle(d, transparency.TileWidth); perr == nil {
				return entries[:t.W], nil
			}
		}
	}
	if err != nil {
		return nil, err
	}
	entries, err := transparency.ParseBundle(data, t.W)
	if err != nil {
		base, _ := c.base()
		return nil, &FetchError{URL: base + transparency.TilePath(t), Status: http.StatusOK, Err: err}
	}
	return entries, nil
}

// Entries returns the encoded entries of leaves from to to-1 of tree,
// each authenticated: its LeafHash is the level-0 hash that the tiles,
// authenticated against tree's root, hold for its leaf.
func (c *Client) Entries(ctx context.Context, tree tlog.Tree, from, to int64) ([][]byte, error) {
	var out [][]byte
	err := c.Walk(ctx, tree, c.HashReader(ctx, tree), from, to, func(_ int64, entry []byte) error {
		out = append(out, entry)
		return nil
	})
	return out, err
}

// Walk calls fn with each leaf index from from to to-1 of tree and its
// encoded entry, authenticated as Entries does, one bundle at a time: it
// holds one bundle however long the walk. hr must be c.HashReader(ctx,
// tree) (reused across walks of the same tree, it keeps its tiles). An
// error of fn ends the walk and is returned.
func (c *Client) Walk(ctx context.Context, tree tlog.Tree, hr tlog.HashReader, from, to int64, fn func(index int64, entry []byte) error) error {
	if from < 0 || from > to || to > tree.N {
		return fmt.Errorf("leaves %d to %d are not in a tree of %d leaves", from, to-1, tree.N)
	}
	for n := from / transparency.TileWidth; n*transparency.TileWidth < to; n++ {
		t := transparency.TileFor(transparency.EntriesLevel, n, tree.N)
		entries, err := c.EntryBundle(ctx, t)
		if err != nil {
			return err
		}
		lo, hi := max(from, n*transparency.TileWidth), min(to, n*transparency.TileWidth+int64(t.W))
		indexes := make([]int64, 0, hi-lo)
		for i := lo; i < hi; i++ {
			indexes = append(indexes, tlog.StoredHashIndex(0, i))
		}
		hashes, err := hr.ReadHashes(indexes)
		if err != nil {
			return fmt.Errorf("hashes of leaves %d to %d: %w", lo, hi-1, err)
		}
		if len(hashes) != len(indexes) {
			return fmt.Errorf("hashes of leaves %d to %d: got %d hashes, want %d", lo, hi-1, len(hashes), len(indexes))
		}
		for k := range indexes {
			leaf := lo + int64(k)
			e := entries[leaf-n*transparency.TileWidth]
			if transparency.LeafHash(e) != hashes[k] {
				return &transparency.TamperError{What: fmt.Sprintf("entry of leaf %d (%s)", leaf, transparency.TilePath(t)), Err: errors.New("its leaf hash is not the tree's")}
			}
			if err := fn(leaf, e); err != nil {
				return err
			}
		}
	}
	return nil
}
