package audit

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Head is a chain head as published outside the log (in cardsignd's signed
// revocation document, say): the Seq and Hash of the last record at the
// time. A log that was only ever appended to still holds that record, with
// that hash, whatever came after it; a log whose records end below Seq was
// truncated. Seq 0 is the empty log, whose Hash is Genesis().
type Head struct {
	Seq  int64
	Hash []byte
}

// String renders h as "SEQ:HASH", HASH in lowercase hex as audit tools print
// hashes; ParseHead reads it back.
func (h Head) String() string { return strconv.FormatInt(h.Seq, 10) + ":" + hex.EncodeToString(h.Hash) }

// ParseHead reads "SEQ:HASH" (HASH: 64 hex digits).
func ParseHead(s string) (Head, error) {
	seqText, hashText, ok := strings.Cut(s, ":")
	if !ok {
		return Head{}, fmt.Errorf("audit head %q: want SEQ:HASH, the record's sequence number and its hash in hex", s)
	}
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil || seq < 0 {
		return Head{}, fmt.Errorf("audit head %q: sequence number %q is not a non-negative integer", s, seqText)
	}
	hash, err := hex.DecodeString(hashText)
	if err != nil || len(hash) != HashSize {
		return Head{}, fmt.Errorf("audit head %q: hash must be %d hex digits (SHA-256)", s, 2*HashSize)
	}
	return Head{Seq: seq, Hash: hash}, nil
}

// ErrTruncated and ErrRewritten are the findings of Head.Check (errors.Is).
var (
	// ErrTruncated: the log ends below a published head.
	ErrTruncated = errors.New("audit log truncated")
	// ErrRewritten: the log's record at a published head's Seq has another
	// hash.
	ErrRewritten = errors.New("audit log rewritten")
)

// Check compares h with a log that VerifyChain accepted: lastSeq is the Seq
// of its last record (0 when empty) and atHead the Hash of its record at
// h.Seq (nil when it has none). It fails with ErrTruncated when the log ends
// below h.Seq (records were deleted from its end) and with ErrRewritten when
// the record at h.Seq differs from the one published (the log, or that part
// of it, was replaced). A log that goes on past h is fine: the head was
// published earlier.
func (h Head) Check(lastSeq int64, atHead []byte) error {
	switch {
	case h.Seq == 0:
		return nil // the empty log: every log extends it
	case lastSeq < h.Seq:
		return fmt.Errorf("%w: the published head is record %d (hash %x) but the log ends at record %d", ErrTruncated, h.Seq, h.Hash, lastSeq)
	case atHead == nil:
		return fmt.Errorf("%w at record %d: the published head has hash %x but the log has no record %d", ErrRewritten, h.Seq, h.Hash, h.Seq)
	case !bytes.Equal(atHead, h.Hash):
		return fmt.Errorf("%w at record %d: the published head has hash %x but the log's record %d has hash %x", ErrRewritten, h.Seq, h.Hash, h.Seq, atHead)
	}
	return nil
}
