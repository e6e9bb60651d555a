package server

import (
	"context"
	"fmt"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
)

// translog is the authority's side of the transparency log: the library's
// checkpointer (which the log's HTTP handler serves), and the proofs it
// makes put into the signatures.
type translog struct {
	*transparency.Checkpointer
}

func newTranslog(s *transparency.Signer, st store.Store) *translog {
	return &translog{transparency.NewCheckpointer(s, st)}
}

// committed learns the tree's size from an audit transaction's records
// (transparency.Checkpointer.Committed); it is the audit batcher's OnCommit.
func (t *translog) committed(recs []audit.Record) { t.Committed(recs) }

// attachProofs puts each signature's inclusion proof in its unprotected
// header; committed are the signatures' audit records, in order.
func (t *translog) attachProofs(ctx context.Context, res *signer.Result, committed []audit.Record) error {
	if len(committed) != len(res.Signatures) {
		return fmt.Errorf("transparency log: %d audit records for %d signatures", len(committed), len(res.Signatures))
	}
	proofs, err := t.Proofs(ctx, committed)
	if err != nil {
		return err
	}
	headers := make([]strictjson.Value, len(proofs))
	for i, p := range proofs {
		headers[i] = strictjson.ObjectValue(strictjson.Member{Key: transparency.HeaderMember, Val: strictjson.StringValue(p.Marshal())})
	}
	return res.SetHeaders(headers)
}
