package transparency

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// TileHeight is the height of every tile (C2SP tlog-tiles): a full tile
// holds 256 hashes.
const TileHeight = 8

// TileWidth is the number of hashes (or entries) in a full tile.
const TileWidth = 1 << TileHeight

// EntriesLevel is the Tile.L of an entry bundle: tlog's convention (the
// record data "above" level 0), which tlog.Tile.Path writes as "data".
const EntriesLevel = -1

// TilePath is the C2SP tlog-tiles path of t, relative to the log's prefix:
// "tile/L/N[.p/W]", or "tile/entries/N[.p/W]" for an entry bundle
// (t.L == EntriesLevel). N is written in groups of three digits, every group
// but the last prefixed with "x".
func TilePath(t tlog.Tile) string {
	level := strconv.Itoa(t.L)
	if t.L == EntriesLevel {
		level = "entries"
	}
	p := "tile/" + level + "/" + tileIndexPath(t.N)
	if t.W < TileWidth {
		p += ".p/" + strconv.Itoa(t.W)
	}
	return p
}

func tileIndexPath(n int64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/", n%1000) + s
	}
	return s
}

// ParseTilePath parses a path written by TilePath.
func ParseTilePath(path string) (tlog.Tile, error) {
	bad := func(why string) (tlog.Tile, error) {
		return tlog.Tile{}, fmt.Errorf("tile path %q: %s", path, why)
	}
	rest, ok := strings.CutPrefix(path, "tile/")
	if !ok {
		return bad("does not start with tile/")
	}
	levelText, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return bad("no index")
	}
	t := tlog.Tile{H: TileHeight, W: TileWidth}
	if levelText == "entries" {
		t.L = EntriesLevel
	} else {
		l, err := strconv.Atoi(levelText)
		if err != nil || l < 0 || l > 7 || strconv.Itoa(l) != levelText {
			return bad("level must be 0 to 7 or entries")
		}
		t.L = l
	}
	if i := strings.Index(rest, ".p/"); i >= 0 {
		w := rest[i+3:]
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 || n >= TileWidth || strconv.Itoa(n) != w {
			return bad("partial width must be 1 to 255")
		}
		t.W = n
		rest = rest[:i]
	}
	parts := strings.Split(rest, "/")
	if len(parts) > 7 {
		return bad("index too large")
	}
	var n int64
	for i, part := range parts {
		last := i == len(parts)-1
		if !last {
			var ok bool
			if part, ok = strings.CutPrefix(part, "x"); !ok {
				return bad("every index group but the last starts with x")
			}
		}
		if len(part) != 3 || strings.Trim(part, "0123456789") != "" {
			return bad("index groups are three digits")
		}
		d, _ := strconv.Atoi(part)
		if n > (math.MaxInt64-999)/1000 {
			return bad("index too large")
		}
		n = n*1000 + int64(d)
	}
	t.N = n
	if TilePath(t) != path {
		return bad("index groups have no leading x000 (one path per tile)")
	}
	return t, nil
}

// TileAvailable reports whether tile t exists in a tree of size leaves:
// every hash (or entry) it holds does. Such a tile's bytes never change.
func TileAvailable(t tlog.Tile, size int64) bool {
	level := t.L
	if level == EntriesLevel {
		level = 0
	}
	// Hashes at this tile's level: complete subtrees of 256^level leaves.
	n := size >> (uint(level) * TileHeight)
	if t.W < 1 || t.N < 0 || t.N > n/TileWidth {
		return false
	}
	return t.N*TileWidth+int64(t.W) <= n
}

// TileFor is the tile of level L holding leaf-level index i's entry or
// hash at level L of a tree of size leaves: full when the tree has filled
// it, partial otherwise.
func TileFor(level int, n, size int64) tlog.Tile {
	l := level
	if l == EntriesLevel {
		l = 0
	}
	count := size >> (uint(l) * TileHeight)
	t := tlog.Tile{H: TileHeight, L: level, N: n, W: TileWidth}
	if rem := count - n*TileWidth; rem < TileWidth {
		t.W = int(rem)
	}
	return t
}

// MarshalBundle encodes entries as a C2SP tlog-tiles entry bundle: each
// entry prefixed with its length as a big-endian uint16.
func MarshalBundle(entries [][]byte) ([]byte, error) {
	n := 0
	for _, e := range entries {
		n += 2 + len(e)
	}
	out := make([]byte, 0, n)
	for i, e := range entries {
		if len(e) > MaxEntryBytes {
			return nil, fmt.Errorf("transparency: entry %d of %d bytes does not fit a bundle", i, len(e))
		}
		out = binary.BigEndian.AppendUint16(out, uint16(len(e)))
		out = append(out, e...)
	}
	return out, nil
}

// ParseBundle decodes an entry bundle of want entries.
func ParseBundle(b []byte, want int) ([][]byte, error) {
	if want < 0 || want > TileWidth {
		return nil, fmt.Errorf("entry bundle of %d entries: a bundle holds 1 to %d", want, TileWidth)
	}
	out := make([][]byte, 0, want)
	for len(b) > 0 {
		if len(out) == want {
			// Stop here: a hostile server must not make the reader slice
			// up megabytes of empty entries.
			return nil, fmt.Errorf("entry bundle holds more than the %d entries wanted", want)
		}
		if len(b) < 2 {
			return nil, errors.New("entry bundle ends inside a length")
		}
		n := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		if len(b) < n {
			return nil, fmt.Errorf("entry bundle: entry %d is cut short", len(out))
		}
		out = append(out, b[:n:n])
		b = b[n:]
	}
	if len(out) != want {
		return nil, fmt.Errorf("entry bundle holds %d entries, want %d", len(out), want)
	}
	return out, nil
}
