package transparency

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// HeaderMember is the member of a signature's unprotected header that
// carries the signature's inclusion proof (a C2SP tlog-proof, as a string).
// The unprotected header is not signed: the proof vouches for itself
// against the log's key, and verifiers that do not know it ignore it.
const HeaderMember = "tlog_proof"

// proofMagic opens every C2SP tlog-proof.
const proofMagic = "c2sp.org/tlog-proof@v1"

// MaxProofBytes bounds a proof read from a card: a checkpoint, an entry and
// 63 hashes fit with room to spare.
const MaxProofBytes = 64 << 10

// maxProofHashes is the most hashes an inclusion proof has: one per level
// of a tree of 2^63 leaves.
const maxProofHashes = 63

// Proof is an offline inclusion proof in the C2SP tlog-proof format. Its
// extra data is the encoded Entry of the leaf, so that a verifier holding
// the card can recompute the leaf without asking anyone.
type Proof struct {
	Entry      []byte      // the leaf's encoded Entry (the proof's "extra")
	Index      int64       // the leaf index
	Hashes     []tlog.Hash // from the leaf's sibling up to the root's child
	Checkpoint []byte      // the signed checkpoint the proof leads to
}

// Marshal encodes p as a C2SP tlog-proof. It runs once per signature on
// the signing path: the proof is written into one buffer of its exact
// size, which becomes the string without a copy.
func (p Proof) Marshal() string {
	enc := base64.StdEncoding
	var idx [20]byte
	index := strconv.AppendInt(idx[:0], p.Index, 10)
	n := len(proofMagic) + len("\nextra ") + enc.EncodedLen(len(p.Entry)) + len("\nindex ") + len(index) + 1 +
		len(p.Hashes)*(enc.EncodedLen(tlog.HashSize)+1) + 1 + len(p.Checkpoint)
	var b strings.Builder
	b.Grow(n)
	b.WriteString(proofMagic + "\nextra ")
	var chunk [3 * 256]byte // a multiple of 3 bytes: the pieces encode without padding
	var out [4 * 256]byte
	for e := p.Entry; len(e) > 0; {
		k := copy(chunk[:], e)
		e = e[k:]
		enc.Encode(out[:], chunk[:k])
		b.Write(out[:enc.EncodedLen(k)])
	}
	b.WriteString("\nindex ")
	b.Write(index)
	b.WriteByte('\n')
	for _, h := range p.Hashes {
		enc.Encode(out[:], h[:])
		b.Write(out[:enc.EncodedLen(tlog.HashSize)])
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(p.Checkpoint)
	return b.String()
}

// ParseProof decodes a C2SP tlog-proof that carries an entry as its extra
// data. It checks the form only; Verify checks what it proves.
func ParseProof(s string) (Proof, error) {
	if len(s) > MaxProofBytes {
		return Proof{}, fmt.Errorf("proof of %d bytes, over the limit of %d", len(s), MaxProofBytes)
	}
	head, cp, ok := strings.Cut(s, "\n\n")
	if !ok {
		return Proof{}, errors.New("proof has no checkpoint (no empty line after the hashes)")
	}
	lines := strings.Split(head, "\n")
	if lines[0] != proofMagic {
		return Proof{}, fmt.Errorf("proof does not start with %q", proofMagic)
	}
	lines = lines[1:]
	var p Proof
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "extra ") {
		return Proof{}, errors.New("proof has no extra line: a cardsign proof carries its log entry there")
	}
	entry, err := base64.StdEncoding.Strict().DecodeString(strings.TrimPrefix(lines[0], "extra "))
	if err != nil {
		return Proof{}, fmt.Errorf("proof extra is not base64: %v", err)
	}
	p.Entry = entry
	lines = lines[1:]
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "index ") {
		return Proof{}, errors.New("proof has no index line")
	}
	idx := strings.TrimPrefix(lines[0], "index ")
	n, err := strconv.ParseInt(idx, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != idx {
		return Proof{}, fmt.Errorf("proof index %q is not a decimal without leading zeros", idx)
	}
	p.Index = n
	lines = lines[1:]
	if len(lines) > maxProofHashes {
		return Proof{}, fmt.Errorf("proof has %d hashes, more than a tree can need (%d)", len(lines), maxProofHashes)
	}
	for i, l := range lines {
		b, err := base64.StdEncoding.Strict().DecodeString(l)
		if err != nil || len(b) != tlog.HashSize {
			return Proof{}, fmt.Errorf("proof hash %d is not a base64 SHA-256 hash", i+1)
		}
		p.Hashes = append(p.Hashes, tlog.Hash(b))
	}
	p.Checkpoint = []byte(cp)
	return p, nil
}

// Verify checks that p proves its entry is leaf Index of a tree whose
// checkpoint one of keys signed, and returns the entry and the checkpoint.
// It does not say what the entry is about: the caller checks that the entry
// is the one it expects (Entry.Covers).
func (p Proof) Verify(keys []note.Verifier) (Entry, Checkpoint, error) {
	cp, err := OpenCheckpoint(p.Checkpoint, keys)
	if err != nil {
		return Entry{}, Checkpoint{}, err
	}
	e, err := ParseEntry(p.Entry)
	if err != nil {
		return Entry{}, Checkpoint{}, err
	}
	if e.Index() != p.Index {
		return Entry{}, Checkpoint{}, fmt.Errorf("proof is for leaf %d but its entry is of audit record %d (leaf %d)", p.Index, e.Seq, e.Index())
	}
	if p.Index >= cp.Size {
		return Entry{}, Checkpoint{}, fmt.Errorf("proof is for leaf %d of a checkpoint of %d leaves", p.Index, cp.Size)
	}
	if err := tlog.CheckRecord(tlog.RecordProof(p.Hashes), cp.Size, cp.Root, p.Index, LeafHash(p.Entry)); err != nil {
		return Entry{}, Checkpoint{}, fmt.Errorf("inclusion proof for leaf %d does not lead to the root of checkpoint %d: %v", p.Index, cp.Size, err)
	}
	return e, cp, nil
}

// Covers reports why e is not the entry of the signature sig (base64url)
// by key kid over a card whose spec-profile canonical bytes hash to
// canonicalSHA256, or nil when it is.
func (e Entry) Covers(kid, sig string, canonicalSHA256 [32]byte) error {
	switch {
	case e.Outcome != "signed":
		return fmt.Errorf("the log entry records a %s request, not a signature", e.Outcome)
	case e.Signature != sig:
		return errors.New("the log entry is of another signature")
	case e.KID != kid:
		return fmt.Errorf("the log entry names key %q, the signature %q", e.KID, kid)
	}
	want := fmt.Sprintf("%x", canonicalSHA256)
	if e.Card.SHA256 != want {
		return errors.New("the log entry is of another card (its canonical SHA-256 differs)")
	}
	return nil
}

// Prove returns the inclusion proof of leaf index in the tree of the signed
// checkpoint cp (of size leaves), reading hashes from r.
func Prove(entry []byte, index, size int64, cp []byte, r tlog.HashReader) (Proof, error) {
	return prove(bytes.Clone(entry), index, size, cp, r)
}

// prove is Prove keeping entry, which the caller no longer changes.
func prove(entry []byte, index, size int64, cp []byte, r tlog.HashReader) (Proof, error) {
	hashes, err := tlog.ProveRecord(size, index, r)
	if err != nil {
		return Proof{}, fmt.Errorf("transparency: prove leaf %d in tree %d: %w", index, size, err)
	}
	return Proof{Entry: entry, Index: index, Hashes: hashes, Checkpoint: cp}, nil
}
