package transparency

import (
	"errors"
	"fmt"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Checkpoint is a verified checkpoint: the log's origin, its size and root
// hash, and the signed note as served.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
	Note   []byte
}

// Tree is the checkpoint's tree, as tlog names it.
func (c Checkpoint) Tree() tlog.Tree { return tlog.Tree{N: c.Size, Hash: c.Root} }

// Sign signs the checkpoint of a tree of size leaves with root hash root.
func (s *Signer) Sign(size int64, root tlog.Hash) ([]byte, error) {
	body := log.Checkpoint{Origin: s.origin, Size: uint64(size), Hash: root[:]}.Marshal()
	msg, err := note.Sign(&note.Note{Text: string(body)}, s.signers...)
	if err != nil {
		return nil, fmt.Errorf("transparency: sign checkpoint %d: %w", size, err)
	}
	return msg, nil
}

// MaxCheckpointBytes bounds a checkpoint read from a card or a server.
const MaxCheckpointBytes = 16 << 10

// OpenCheckpoint verifies a signed checkpoint: at least one of keys must
// have signed it, its origin must be that key's name, and its body must be
// a C2SP checkpoint. Signatures by other keys (witnesses) are ignored.
func OpenCheckpoint(msg []byte, keys []note.Verifier) (Checkpoint, error) {
	if len(msg) > MaxCheckpointBytes {
		return Checkpoint{}, fmt.Errorf("checkpoint of %d bytes, over the limit of %d", len(msg), MaxCheckpointBytes)
	}
	if len(keys) == 0 {
		return Checkpoint{}, errors.New("no log key to verify the checkpoint with")
	}
	n, err := note.Open(msg, note.VerifierList(keys...))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		if errors.As(err, &unverified) {
			return Checkpoint{}, errors.New("checkpoint is not signed by a trusted log key")
		}
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	var cp log.Checkpoint
	if _, err := cp.Unmarshal([]byte(n.Text)); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	signed := false
	for _, sig := range n.Sigs {
		if sig.Name == cp.Origin {
			signed = true
		}
	}
	if !signed {
		return Checkpoint{}, fmt.Errorf("checkpoint of origin %q is signed only by keys of other names", cp.Origin)
	}
	if len(cp.Hash) != tlog.HashSize {
		return Checkpoint{}, fmt.Errorf("checkpoint root hash has %d bytes, want %d", len(cp.Hash), tlog.HashSize)
	}
	if cp.Size > 1<<62 {
		return Checkpoint{}, fmt.Errorf("checkpoint size %d is out of range", cp.Size)
	}
	c := Checkpoint{Origin: cp.Origin, Size: int64(cp.Size), Note: msg}
	copy(c.Root[:], cp.Hash)
	return c, nil
}
