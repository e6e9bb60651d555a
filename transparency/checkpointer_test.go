package transparency_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/memlog"
	"github.com/cardsign/cardsign/transparency"
)

// memTree is a memlog.Log as a store holds it (transparency.Tree), with
// an audit head that a test can set behind the tree (head >= 0).
type memTree struct {
	*memlog.Log
	head int64
}

func (m *memTree) AuditHead(context.Context) (int64, []byte, error) {
	if m.head >= 0 {
		return m.head, nil, nil
	}
	return m.Len(), nil, nil
}

func (m *memTree) LogHashes(ctx context.Context, indexes []int64) ([]transparency.Hash, error) {
	return m.ReadHashes(ctx, indexes)
}

func (m *memTree) LogEntries(ctx context.Context, from, to int64) ([][]byte, error) {
	return m.Entries(ctx, from, to)
}

// loggedRecords are memlog.Records(first, n, "") with the hosts
// memlog.Entries gives their entries.
func loggedRecords(first, n int) []audit.Record {
	recs := memlog.Records(first, n, "")
	for i := range recs {
		recs[i].Hosts = []string{fmt.Sprintf("a%d.example.com", recs[i].Seq), "shared.example.org"}
	}
	return recs
}

// TestCheckpointer: checkpoints sign the store's tree; proofs verify under
// the log's keys, in a checkpoint covering the records committed; a store
// that went back behind a signed checkpoint is refused.
func TestCheckpointer(t *testing.T) {
	ctx := t.Context()
	l, keys := memlog.NewTest(t, 10)
	tree := &memTree{Log: l, head: -1}
	cp := transparency.NewCheckpointer(l.Signer(), tree)
	size, note, err := cp.Checkpoint(ctx)
	if err != nil || size != 10 {
		t.Fatalf("Checkpoint = %d, %v", size, err)
	}
	opened, err := transparency.OpenCheckpoint(note, keys)
	if err != nil || opened.Size != 10 {
		t.Fatalf("the checkpoint does not open: %+v, %v", opened, err)
	}

	// Committed by this process: the proofs' checkpoint covers them even
	// while the store's head, read elsewhere, lags.
	l.AppendN(t, 2, "")
	recs := append(loggedRecords(0, 10), loggedRecords(10, 2)...) // as AppendN appended them
	tree.head = 10
	cp.Committed(recs[10:])
	proofs, err := cp.Proofs(ctx, []audit.Record{recs[3], recs[11]})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range proofs {
		e, c, err := p.Verify(keys)
		if err != nil || c.Size != 12 || e.Seq != []int64{4, 12}[i] {
			t.Fatalf("proof %d: entry %d in a checkpoint of %d: %v", i, e.Seq, c.Size, err)
		}
	}

	// A record past the signed checkpoint, and a store whose head went
	// back behind it: signing the smaller tree would be a rollback.
	tree.head = 5
	if _, err := cp.Proofs(ctx, loggedRecords(12, 1)); err == nil || !strings.Contains(err.Error(), "fewer than the 12 of a checkpoint already signed") {
		t.Fatalf("a store gone back: %v", err)
	}
}

// BenchmarkProofs is the proof a signature gets on the signing path
// (Checkpointer.Proofs for one committed record, then the proof encoded
// as the signature's header carries it), in a tree of 10,000 leaves whose
// checkpoint is signed already.
// Run: go test -run '^$' -bench Proofs -benchmem ./transparency
func BenchmarkProofs(b *testing.B) {
	const n = 10000
	l, _ := memlog.NewTest(b, n)
	cp := transparency.NewCheckpointer(l.Signer(), &memTree{Log: l, head: -1})
	recs := loggedRecords(0, n)
	if _, _, err := cp.Checkpoint(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ps, err := cp.Proofs(b.Context(), recs[i:i+1])
		if err != nil {
			b.Fatal(err)
		}
		if len(ps[0].Marshal()) == 0 {
			b.Fatal("empty proof")
		}
		i = (i + 7919) % n
	}
}
