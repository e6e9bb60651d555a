package events

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cardsign/cardsign/transparency"
)

// Markers of the README's block of examples, one per event type.
const (
	examplesBegin = "<!-- events:examples:begin (written by events TestREADMEExamples; CARDSIGN_UPDATE_DOCS=1 rewrites it) -->"
	examplesEnd   = "<!-- events:examples:end -->"
)

// readmeExamples is the block: one example of each type, as cardsignd
// writes it, of a sample record of that kind, then a log checkpoint; one
// JSON line each.
func readmeExamples() string {
	recs, _ := sampleRecords()
	b := Builder{Source: "urn:cardsign:cardsign.example.com/log", ResignCaller: "cardsignd/resign", CatalogProfile: "ai-catalog"}
	var out strings.Builder
	out.WriteString(examplesBegin + "\n```json\n")
	for _, r := range recs {
		out.Write(b.Message(r).JSON)
		out.WriteString("\n")
	}
	// The checkpoint after them, signed by a log key made from a fixed
	// seed (Ed25519 signatures are deterministic).
	signer, err := transparency.NewSigner("cardsign.example.com/log", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))
	if err != nil {
		panic(err)
	}
	note, err := signer.Sign(int64(len(recs)), tlog.Hash(sha256.Sum256([]byte("root"))))
	if err != nil {
		panic(err)
	}
	out.Write(b.CheckpointMessage(int64(len(recs)), note, recs[len(recs)-1].Time).JSON)
	out.WriteString("\n```\n" + examplesEnd)
	return out.String()
}

// TestREADMEExamples: the README shows an example of every event type,
// exactly as the builder writes it, and the one pretty-printed example is
// the first of them.
func TestREADMEExamples(t *testing.T) {
	path := filepath.Join("..", "README.md")
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i, j := strings.Index(s, examplesBegin), strings.Index(s, examplesEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md has no events examples block (%s ... %s)", examplesBegin, examplesEnd)
	}
	want := readmeExamples()
	if got := s[i : j+len(examplesEnd)]; got != want {
		if os.Getenv("CARDSIGN_UPDATE_DOCS") == "1" {
			if err := os.WriteFile(path, []byte(s[:i]+want+s[j+len(examplesEnd):]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("README.md's events examples are not what the builder writes: run CARDSIGN_UPDATE_DOCS=1 go test -run TestREADMEExamples ./events")
	}
	for _, typ := range append(Types(), TypeLogCheckpoint) {
		if !strings.Contains(want, `"type":"`+typ+`"`) {
			t.Fatalf("no example of %s", typ)
		}
	}
}
