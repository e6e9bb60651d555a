package transparency_test

import (
	"bytes"
	"testing"

	"github.com/cardsign/cardsign/internal/memlog"
	"github.com/cardsign/cardsign/transparency"
	"golang.org/x/mod/sumdb/tlog"
)

// FuzzParse feeds the same bytes to every parser of what a log or a card
// brings in (tile paths, proofs, entry bundles, entries): none may panic,
// and what one accepts must encode back to exactly the input, so a value
// has one encoding and what is checked is what was hashed.
func FuzzParse(f *testing.F) {
	entry := memlog.Entries(41, 1, "")[0]
	bundle, _ := transparency.MarshalBundle([][]byte{entry, []byte("x"), nil})
	proof := transparency.Proof{Entry: entry, Index: 41, Hashes: []tlog.Hash{{1}, {2}}, Checkpoint: []byte("cardsign.test/log\n42\nAAAA\n\n— k sig\n")}.Marshal()
	for _, seed := range []string{
		"tile/0/000", "tile/1/x001/x234/067.p/8", "tile/entries/002.p/88", "tile/0/x001/x234/x567/x890/x123/456",
		string(entry), string(bundle), proof, "c2sp.org/tlog-proof@v1\nextra \nindex 0\n\n",
	} {
		f.Add([]byte(seed), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, want uint8) {
		s := string(data)
		if tile, err := transparency.ParseTilePath(s); err == nil {
			if tile.N < 0 || tile.W < 1 || tile.W > transparency.TileWidth || tile.H != transparency.TileHeight {
				t.Fatalf("ParseTilePath(%q) = %+v", s, tile)
			}
			if back := transparency.TilePath(tile); back != s {
				t.Fatalf("ParseTilePath(%q) = %+v, which is %q", s, tile, back)
			}
			// Available in a tree it fits, for all it says (no overflow makes
			// a tile far beyond the tree look available).
			if transparency.TileAvailable(tile, 1<<40) && tile.N > 1<<40/transparency.TileWidth {
				t.Fatalf("%+v is available in a tree of 2^40 leaves", tile)
			}
		}
		if p, err := transparency.ParseProof(s); err == nil {
			if back := p.Marshal(); back != s {
				t.Fatalf("ParseProof(%q) encodes back as %q", s, back)
			}
			p.Verify(nil) // no key: refused, never a panic
		}
		if es, err := transparency.ParseBundle(data, int(want)); err == nil {
			back, err := transparency.MarshalBundle(es)
			if err != nil || !bytes.Equal(back, data) || len(es) != int(want) {
				t.Fatalf("ParseBundle(%q, %d) = %q, encodes back as %q, %v", data, want, es, back, err)
			}
		}
		if e, err := transparency.ParseEntry(data); err == nil {
			if !bytes.Equal(e.Marshal(), data) {
				t.Fatalf("ParseEntry(%q) encodes back as %q", data, e.Marshal())
			}
			e.MatchesHost("a.example.com")
			transparency.MatchesWatch(e, "*")
		}
	})
}

// TestTilePathStrict: paths that name no tile a log can have, or name one
// in a second spelling, are refused: leading x000 groups (a second path for
// the same tile, which caches keep apart) and seven groups whose value
// overflows int64 (a negative or wrapped N, which TileAvailable must not
// call available).
func TestTilePathStrict(t *testing.T) {
	for _, p := range []string{
		"tile/0/x000/000", "tile/0/x000/x001/000",
		"tile/0/x999/x999/x999/x999/x999/x999/999", "tile/0/x009/x223/x372/x036/x854/x775/808",
	} {
		if tile, err := transparency.ParseTilePath(p); err == nil {
			t.Errorf("ParseTilePath(%q) = %+v, want an error", p, tile)
		}
	}
	if transparency.TileAvailable(tlog.Tile{H: transparency.TileHeight, N: 1 << 62, W: transparency.TileWidth}, 1000) {
		t.Error("tile 2^62 is available in a tree of 1000 leaves")
	}
}
