package audit

import (
	"bytes"
	"fmt"
)

// ChainError reports the first record at which a chain fails to verify.
type ChainError struct {
	Seq    int64  // the Seq of the offending record (as stored, for a seq gap)
	Reason string // what is wrong: a seq gap, a PrevHash mismatch or a Hash mismatch
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("audit: chain broken at seq %d: %s", e.Seq, e.Reason)
}

// VerifyChain checks recs (ascending, consecutive Seq) against prev, the Hash
// of the record before recs[0] (Genesis() when recs[0] is Seq 1): each record's
// PrevHash must equal the Hash before it, its Outcome must be valid
// (Record.CheckOutcome: in particular a signed record must not carry a Reason,
// which its hash does not cover) and its Hash must equal ComputeHash.
// It returns a *ChainError for the first broken record, nil otherwise.
//
// A deleted record shows up as a seq gap, or, if the rest were renumbered, as
// a PrevHash or Hash mismatch; an edited field (a refused record's Outcome or
// Reason included) as a Hash mismatch; a record flipped between signed and
// refused as a Hash mismatch or an invalid outcome; a reordered pair as a seq
// gap or a PrevHash mismatch.
func VerifyChain(prev []byte, recs []Record) error {
	for i, r := range recs {
		switch {
		case r.Seq < 1:
			return &ChainError{Seq: r.Seq, Reason: "seq is not positive"}
		case i > 0 && r.Seq != recs[i-1].Seq+1:
			return &ChainError{Seq: r.Seq, Reason: fmt.Sprintf("seq gap: want seq %d after %d", recs[i-1].Seq+1, recs[i-1].Seq)}
		case r.Seq == 1 && !bytes.Equal(r.PrevHash, Genesis()):
			return &ChainError{Seq: r.Seq, Reason: "prev hash mismatch: seq 1 does not start from the genesis hash"}
		case !bytes.Equal(r.PrevHash, prev):
			return &ChainError{Seq: r.Seq, Reason: fmt.Sprintf("prev hash mismatch: record has %x, previous hash is %x", r.PrevHash, prev)}
		}
		if p := r.outcomeProblem(); p != "" {
			return &ChainError{Seq: r.Seq, Reason: "invalid record: " + p}
		}
		want := r.ComputeHash(prev)
		if !bytes.Equal(r.Hash, want) {
			return &ChainError{Seq: r.Seq, Reason: fmt.Sprintf("hash mismatch: record has %x, contents hash to %x", r.Hash, want)}
		}
		prev = r.Hash
	}
	return nil
}
