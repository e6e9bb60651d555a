package audit

import (
	"bytes"
	"fmt"
	"iter"
)

// ChainVerifier checks a chain one record at a time, in constant memory: it
// keeps only the Seq and Hash of the last record it accepted and, when given
// a published Head, the Hash of the record at the head's Seq. It applies
// VerifyChain's checks across everything it is given, so a log read page by
// page is verified as one chain: a seq gap or a PrevHash mismatch between
// the last record of one page and the first of the next is found like one
// inside a page. The zero value is not usable: see NewChainVerifier.
type ChainVerifier struct {
	prev    []byte // Hash of the last record accepted (the start hash before any)
	lastSeq int64  // Seq of the last record accepted; 0 before any
	count   int64  // records accepted
	head    *Head  // published head to check at Finish, or nil
	atHead  []byte // Hash of the record at head.Seq, once seen
	err     error  // the first failure: every later Add returns it
}

// NewChainVerifier returns a verifier of the records that follow prev, the
// Hash of the record before the first one it will be given (Genesis() for a
// log read from its start). head, when not nil, is a published head that
// Finish checks the log against (Head.Check).
func NewChainVerifier(prev []byte, head *Head) *ChainVerifier {
	v := &ChainVerifier{prev: bytes.Clone(prev)}
	if head != nil {
		h := Head{Seq: head.Seq, Hash: bytes.Clone(head.Hash)}
		v.head = &h
	}
	return v
}

// Add checks r, the next record of the chain, as VerifyChain does: a Seq one
// above the previous record's (from the second record on), the previous
// Hash as its PrevHash, a valid Outcome and a Hash that is its ComputeHash.
// It returns a *ChainError for a broken record; after a failure every call
// returns that same error. r is not retained (its Hash is copied).
func (v *ChainVerifier) Add(r Record) error {
	if v.err != nil {
		return v.err
	}
	if err := v.check(&r); err != nil {
		v.err = err
		return err
	}
	v.prev = append(v.prev[:0], r.Hash...)
	v.lastSeq = r.Seq
	v.count++
	if v.head != nil && r.Seq == v.head.Seq {
		v.atHead = bytes.Clone(r.Hash)
	}
	return nil
}

func (v *ChainVerifier) check(r *Record) error {
	switch {
	case r.Seq < 1:
		return &ChainError{Seq: r.Seq, Reason: "seq is not positive"}
	case v.count > 0 && r.Seq != v.lastSeq+1:
		return &ChainError{Seq: r.Seq, Reason: fmt.Sprintf("seq gap: want seq %d after %d", v.lastSeq+1, v.lastSeq)}
	case r.Seq == 1 && !bytes.Equal(r.PrevHash, Genesis()):
		return &ChainError{Seq: r.Seq, Reason: "prev hash mismatch: seq 1 does not start from the genesis hash"}
	case !bytes.Equal(r.PrevHash, v.prev):
		return &ChainError{Seq: r.Seq, Reason: fmt.Sprintf("prev hash mismatch: record has %x, previous hash is %x", r.PrevHash, v.prev)}
	}
	if p := r.outcomeProblem(); p != "" {
		return &ChainError{Seq: r.Seq, Reason: "invalid record: " + p}
	}
	want := r.ComputeHash(v.prev)
	if !bytes.Equal(r.Hash, want) {
		return &ChainError{Seq: r.Seq, Reason: fmt.Sprintf("hash mismatch: record has %x, contents hash to %x", r.Hash, want)}
	}
	return nil
}

// Count is the number of records accepted so far.
func (v *ChainVerifier) Count() int64 { return v.count }

// Last returns the Seq (0 when none) and Hash (the start hash when none) of
// the last record accepted. The hash is the verifier's own: do not modify it.
func (v *ChainVerifier) Last() (int64, []byte) { return v.lastSeq, v.prev }

// Finish ends the walk: it returns the first Add failure, if any, and then
// checks the published head, if one was given, against the records seen
// (Head.Check: ErrTruncated, ErrRewritten).
func (v *ChainVerifier) Finish() error {
	if v.err != nil {
		return v.err
	}
	if v.head != nil {
		return v.head.Check(v.lastSeq, v.atHead)
	}
	return nil
}

// VerifyStream verifies the records that records yields, in order, as one
// chain starting from prev (Genesis() for a whole log), and then checks head
// when it is not nil. It holds no more than one record at a time; records
// may reuse the memory of the records it yields. It stops at the first
// error: a broken record (*ChainError), a failed head check, or an error
// the sequence yields (returned as is). The verifier is returned in every
// case, for its Count and Last.
func VerifyStream(prev []byte, head *Head, records iter.Seq2[Record, error]) (*ChainVerifier, error) {
	v := NewChainVerifier(prev, head)
	for r, err := range records {
		if err != nil {
			return v, err
		}
		if err := v.Add(r); err != nil {
			return v, err
		}
	}
	return v, v.Finish()
}
