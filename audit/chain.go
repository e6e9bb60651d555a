package audit

import "fmt"

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
	v := NewChainVerifier(prev, nil)
	for _, r := range recs {
		if err := v.Add(r); err != nil {
			return err
		}
	}
	return nil
}
