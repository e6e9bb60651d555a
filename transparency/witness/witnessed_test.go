package witness

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/witnesstest"
	"github.com/cardsign/cardsign/transparency"
)

// TestWitnessedView: the view every replica reads (transparency.Witnessed)
// over cosignatures stored as the collector stores them: it serves the
// newest checkpoint with the quorum, adds a late witness's line to it,
// ignores a forged line, and gives proofs in it, waiting for one until a
// deadline.
func TestWitnessedView(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, logKey(t), "")
	l.grow(t, 6)
	w1, w2, w3 := witnesstest.NewKey(t, "w1.example"), witnesstest.NewKey(t, "w2.example"), witnesstest.NewKey(t, "w3.example")
	p, err := transparency.NewWitnessPolicy([]string{w1.VKey, w2.VKey, w3.VKey}, 2)
	if err != nil {
		t.Fatal(err)
	}
	st := newCosigStore(t)
	view := transparency.NewWitnessed(l.Checkpointer, st, p)
	cosign := func(size int64, ws ...witnesstest.Key) {
		t.Helper()
		note, err := l.CheckpointAt(ctx, size)
		if err != nil {
			t.Fatal(err)
		}
		text, _, _ := strings.Cut(string(note), "\n\n")
		for _, w := range ws {
			cs, err := transparency.ParseCosignatures(size, w.Name, w.Cosign(t, text+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			if err := st.PutCosignatures(ctx, cs); err != nil {
				t.Fatal(err)
			}
		}
		view.Stored(size)
	}
	served := func() (int64, []string) {
		t.Helper()
		size, note, err := view.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, v := range p.Vouches(note) {
			names = append(names, v.Witness)
		}
		return size, names
	}
	recs := func(seqs ...int64) []audit.Record {
		all := make([]audit.Record, 0, len(seqs))
		for _, s := range seqs {
			r := l.record(t, s)
			all = append(all, r)
		}
		return all
	}

	// No quorum yet: no checkpoint is served.
	cosign(6, w1)
	if _, _, err := view.Checkpoint(ctx); !errors.Is(err, transparency.ErrNotWitnessed) {
		t.Fatalf("served before the quorum: %v", err)
	}
	// A forged line under w2's name does not make the quorum, nor is it
	// ever served.
	if err := st.PutCosignatures(ctx, []transparency.Cosignature{{Size: 6, Witness: "w2.example", Signature: strings.Repeat("A", 104)}}); err != nil {
		t.Fatal(err)
	}
	view.Stored(6)
	if ps, ok, err := view.Proofs(ctx, recs(3), time.Now().Add(100*time.Millisecond)); err != nil || ok || len(ps) != 1 {
		t.Fatalf("proofs with a forged line: witnessed %v, %v", ok, err)
	}
	// The quorum: proofs of leaves it covers are witnessed at once.
	cosign(6, w2)
	if size, names := served(); size != 6 || strings.Join(names, ",") != "w1.example,w2.example" {
		t.Fatalf("served %d vouched by %v, want 6 by w1, w2", size, names)
	}
	if _, note, _ := view.Checkpoint(ctx); strings.Count(string(note), "— w2.example") != 1 {
		t.Fatalf("the served checkpoint carries the forged line:\n%s", note)
	}
	ps, ok, err := view.Proofs(ctx, recs(2, 6), time.Time{})
	if err != nil || !ok {
		t.Fatalf("proofs in the quorum's checkpoint: witnessed %v, %v", ok, err)
	}
	for _, pr := range ps {
		if vs := p.Vouches(pr.Checkpoint); len(vs) != 2 {
			t.Errorf("proof of leaf %d: vouched by %v", pr.Index, vs)
		}
	}
	// A late witness's line joins the served checkpoint.
	cosign(6, w3)
	if _, names := served(); len(names) != 3 {
		t.Fatalf("after w3 cosigned: vouched by %v", names)
	}
	// A leaf beyond the quorum's checkpoint waits for the next one.
	l.grow(t, 2)
	go func() {
		time.Sleep(50 * time.Millisecond)
		cosign(8, w3, w1)
	}()
	ps, ok, err = view.Proofs(ctx, recs(8), time.Now().Add(5*time.Second))
	if err != nil || !ok || len(p.Vouches(ps[0].Checkpoint)) != 2 {
		t.Fatalf("proof of leaf 8 after waiting: witnessed %v, %v", ok, err)
	}
	if got := view.WitnessedSize(); got != 8 {
		t.Errorf("WitnessedSize %d, want 8", got)
	}
	// Without cosignatures in time: the log's own checkpoint, not witnessed.
	l.grow(t, 1)
	start := time.Now()
	if _, ok, err := view.Proofs(ctx, recs(9), start.Add(80*time.Millisecond)); err != nil || ok || time.Since(start) < 80*time.Millisecond {
		t.Fatalf("proof of leaf 9 without cosignatures: witnessed %v, %v, after %s", ok, err, time.Since(start))
	}
}

// record returns audit record seq as the store keeps it (with the hosts
// its leaf shows).
func (l *testLog) record(t *testing.T, seq int64) audit.Record {
	t.Helper()
	rs, err := l.st.ListAudit(context.Background(), seq-1, 1)
	if err != nil || len(rs) != 1 {
		t.Fatalf("audit record %d: %v", seq, err)
	}
	return rs[0]
}
