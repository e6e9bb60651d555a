// Package tlogserve serves cardsign's transparency log over HTTP: the
// checkpoint and tiles in the C2SP tlog-tiles layout, and the log's
// verifier keys.
package tlogserve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cardsign/cardsign/transparency"
)

// Source is what NewHandler serves: the log as its store holds it.
type Source interface {
	// Checkpoint returns the latest signed checkpoint and the tree size it signs.
	Checkpoint(ctx context.Context) (size int64, signed []byte, err error)
	// Size returns the size of the committed tree, whose tiles may be
	// served: at least the latest checkpoint's. A tile request needs no
	// signed checkpoint, so it costs no signature.
	Size(ctx context.Context) (int64, error)
	// ReadHashes returns the tree hashes stored at indexes (tlog storage
	// indexes), in the order asked.
	ReadHashes(ctx context.Context, indexes []int64) ([]transparency.Hash, error)
	// Entries returns the encoded entries of leaves from to to-1, in order.
	Entries(ctx context.Context, from, to int64) ([][]byte, error)
}

// Cache lifetimes of what NewHandler serves.
const (
	// A full tile's bytes never change: it is a function of leaves that are
	// never rewritten.
	fullTileCache = "public, max-age=31536000, immutable"
	// A partial tile's bytes do not change either, but it is superseded as
	// the tree grows (clients ask for the wider one) and C2SP lets a log stop
	// serving it once the full tile exists: caches need not keep it long.
	partialTileCache = "public, max-age=60"
	// The checkpoint moves with every signature: a monitor polling through a
	// cache must see a new one within seconds.
	checkpointCache = "public, max-age=2"
	// Errors are not cached: a tile beyond the tree exists a moment later.
	errorCache = "no-store"
)

// NewHandler serves the log src in the C2SP tlog-tiles layout, relative to
// a prefix the caller strips (cardsignd mounts it at /log/): the signed
// checkpoint at "checkpoint", hash tiles at "tile/L/N[.p/W]" and entry
// bundles at "tile/entries/N[.p/W]". A tile the current checkpoint does not
// cover is 404: a client asks for what its checkpoint commits to, and a
// tile served beyond it could not be authenticated. Errors of src are
// logged to log and answered 500 without detail.
func NewHandler(src Source, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &handler{src: src, log: log}
}

type handler struct {
	src Source
	log *slog.Logger
	// last is the checkpoint last served, ready to write again: the
	// checkpoint changes only when the tree grows, far less often than a
	// monitor polls it.
	last atomic.Pointer[servedCheckpoint]
}

// servedCheckpoint is a signed checkpoint with its response header values
// made once, each a slice of one set into the response's header map as it
// is (net/http only reads them; Header.Set replaces a slice, never writes
// into it).
type servedCheckpoint struct {
	note                  []byte
	etag                  string
	hETag, hContentLength []string
}

// Header values every checkpoint response shares.
var (
	hCheckpointType  = []string{"text/plain; charset=utf-8"}
	hCheckpointCache = []string{checkpointCache}
	hNoSniff         = []string{"nosniff"}
)

// checkpoint returns signed ready to serve: the last one when it holds the
// same bytes, else made now (an entity tag from the bytes, so a monitor
// polling through a cache revalidates with If-None-Match and gets a 304
// until the tree grows).
func (h *handler) checkpoint(signed []byte) *servedCheckpoint {
	if c := h.last.Load(); c != nil && bytes.Equal(c.note, signed) {
		return c
	}
	sum := sha256.Sum256(signed)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	c := &servedCheckpoint{note: bytes.Clone(signed), etag: etag, hETag: []string{etag},
		hContentLength: []string{strconv.Itoa(len(signed))}}
	h.last.Store(c)
	return c
}

// serve writes the checkpoint, or 304 when If-None-Match names its tag,
// without allocating.
func (c *servedCheckpoint) serve(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd["X-Content-Type-Options"] = hNoSniff
	hd["Etag"] = c.hETag
	hd["Cache-Control"] = hCheckpointCache
	if etagListed(r.Header["If-None-Match"], c.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd["Content-Type"] = hCheckpointType
	hd["Content-Length"] = c.hContentLength
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(c.note) // a HEAD response discards it
}

// etagListed reports whether If-None-Match fields name etag (or "*"),
// with the weak comparison RFC 9110 prescribes for it (W/"x" names "x").
// Our tags hold no comma, so splitting each field on commas finds them.
func etagListed(fields []string, etag string) bool {
	for _, f := range fields {
		for t := range strings.SplitSeq(f, ",") {
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if t == etag || t == "*" {
				return true
			}
		}
	}
	return false
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.fail(w, http.StatusMethodNotAllowed, "the transparency log is read-only: use GET or HEAD")
		return
	}
	// http.StripPrefix("/log", …) leaves "/checkpoint", "/log/" leaves
	// "checkpoint": accept both.
	path := strings.TrimPrefix(r.URL.Path, "/")
	ctx := r.Context()
	if path == transparency.CheckpointPath {
		_, signed, err := h.src.Checkpoint(ctx)
		if errors.Is(err, transparency.ErrNotWitnessed) {
			w.Header().Set("Retry-After", "5")
			h.fail(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		if err != nil {
			h.internal(w, r, "read checkpoint", err)
			return
		}
		h.checkpoint(signed).serve(w, r)
		return
	}
	if !strings.HasPrefix(path, "tile/") {
		h.fail(w, http.StatusNotFound, fmt.Sprintf("no such log resource %q: the log serves %s, tile/L/N[.p/W] and tile/entries/N[.p/W] (C2SP tlog-tiles)", path, transparency.CheckpointPath))
		return
	}
	t, err := transparency.ParseTilePath(path)
	if err != nil {
		h.fail(w, http.StatusBadRequest, err.Error()+" (C2SP tlog-tiles: tile/L/N[.p/W] or tile/entries/N[.p/W], L 0 to 7, N in groups of three digits all but the last prefixed with x, W 1 to 255)")
		return
	}
	size, err := h.src.Size(ctx)
	if err != nil {
		h.internal(w, r, "read the tree's size", err)
		return
	}
	// Checked without multiplying N: a path of seven index groups names a
	// tile far beyond any tree, and N*TileWidth would overflow.
	if t.N < 0 || t.N > size/transparency.TileWidth || !transparency.TileAvailable(t, size) {
		h.fail(w, http.StatusNotFound, fmt.Sprintf("%s is not in the log's tree of %d leaves: fetch the checkpoint and ask for the tiles it covers", path, size))
		return
	}
	cache := fullTileCache
	if t.W < transparency.TileWidth {
		cache = partialTileCache
	}
	var data []byte
	if t.L == transparency.EntriesLevel {
		start := t.N * transparency.TileWidth
		entries, err := h.src.Entries(ctx, start, start+int64(t.W))
		if err == nil && len(entries) != t.W {
			err = fmt.Errorf("got %d entries of leaves %d to %d, want %d", len(entries), start, start+int64(t.W)-1, t.W)
		}
		if err == nil {
			data, err = transparency.MarshalBundle(entries)
		}
		if err != nil {
			h.internal(w, r, "read entries", err)
			return
		}
	} else {
		data, err = tlog.ReadTileData(t, hashReader{ctx: ctx, src: h.src})
		if err != nil {
			h.internal(w, r, "read tile", err)
			return
		}
	}
	h.write(w, "application/octet-stream", cache, data)
}

// hashReader is a tlog.HashReader over a Source, bound to one request.
type hashReader struct {
	ctx context.Context
	src Source
}

func (r hashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	hs, err := r.src.ReadHashes(r.ctx, indexes)
	if err == nil && len(hs) != len(indexes) {
		err = fmt.Errorf("read %d tree hashes, got %d", len(indexes), len(hs))
	}
	return hs, err
}

func (h *handler) write(w http.ResponseWriter, contentType, cache string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", cache)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body) // a HEAD response discards it
}

func (h *handler) fail(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", errorCache)
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}

// internal answers a failure of the store: 500, or nothing when the client
// has gone. The detail goes to the log only: it may name the store.
func (h *handler) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return
	}
	h.log.ErrorContext(r.Context(), "transparency log: "+what, "path", r.URL.Path, "err", err)
	h.fail(w, http.StatusInternalServerError, "the log could not "+what+"; try again later")
}
