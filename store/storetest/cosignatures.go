package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/transparency"
)

// The contract of store.Cosignatures, run by RunLog: the witnesses'
// cosignatures every replica reads.

func cosig(size int64, witness, sig string) transparency.Cosignature {
	return transparency.Cosignature{Size: size, Witness: witness, Signature: sig}
}

func fmtCosigs(cs []transparency.Cosignature) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%d/%s/%s ", c.Size, c.Witness, c.Signature)
	}
	return b.String()
}

func testCosignatures(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	other := mustOpen(t, open) // a second replica
	ctx := t.Context()
	if got, err := s.Cosignatures(ctx, 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v %v", got, err)
	}
	if err := s.PutCosignatures(ctx, []transparency.Cosignature{
		cosig(3, "w2", "AAA3"), cosig(3, "w1", "BBB3"), cosig(5, "w1", "BBB5"), cosig(7, "w3", "CCC7"),
	}); err != nil {
		t.Fatal(err)
	}
	// Upsert: w1 asked again at size 5 signs again.
	if err := other.PutCosignatures(ctx, []transparency.Cosignature{cosig(5, "w1", "BBB5b"), cosig(5, "w2", "AAA5")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from  int64
		limit int
		want  string
	}{
		{0, 100, "7/w3/CCC7 5/w1/BBB5b 5/w2/AAA5 3/w1/BBB3 3/w2/AAA3 "},
		{5, 100, "7/w3/CCC7 5/w1/BBB5b 5/w2/AAA5 "},
		{6, 100, "7/w3/CCC7 "},
		{8, 100, ""},
		{0, 2, "7/w3/CCC7 5/w1/BBB5b "},
	} {
		got, err := other.Cosignatures(ctx, tc.from, tc.limit)
		if err != nil || fmtCosigs(got) != tc.want {
			t.Errorf("Cosignatures(%d, %d) = %q, %v; want %q", tc.from, tc.limit, fmtCosigs(got), err, tc.want)
		}
	}
	sizes, err := s.WitnessSizes(ctx)
	if err != nil || len(sizes) != 3 || sizes["w1"] != 5 || sizes["w2"] != 5 || sizes["w3"] != 7 {
		t.Errorf("WitnessSizes = %v, %v; want w1 5, w2 5, w3 7", sizes, err)
	}
	// Prune below 7 keeps every witness's largest: w1@5, w2@5, w3@7.
	if err := other.PruneCosignatures(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Cosignatures(ctx, 0, 100); err != nil || fmtCosigs(got) != "7/w3/CCC7 5/w1/BBB5b 5/w2/AAA5 " {
		t.Errorf("after prune below 7: %q, %v", fmtCosigs(got), err)
	}
	if err := s.PruneCosignatures(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Cosignatures(ctx, 0, 100); len(got) != 3 {
		t.Errorf("prune below 100 removed a witness's largest: %q", fmtCosigs(got))
	}
}

func testCosignaturesRefused(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		c    transparency.Cosignature
		want string
	}{
		{"size 0", cosig(0, "w", "A"), "size 0"},
		{"no witness", cosig(1, "", "A"), "witness name"},
		{"witness with space", cosig(1, "w x", "A"), "witness name"},
		{"no signature", cosig(1, "w", ""), "signature"},
		{"signature with newline", cosig(1, "w", "A\n— x B"), "signature"},
		{"huge signature", cosig(1, "w", strings.Repeat("A", 5000)), "signature"},
	} {
		err := s.PutCosignatures(ctx, []transparency.Cosignature{cosig(9, "ok", "A"), tc.c})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	if got, err := s.Cosignatures(ctx, 0, 10); err != nil || len(got) != 0 {
		t.Errorf("a refused batch stored %q (%v)", fmtCosigs(got), err)
	}
	if _, err := s.Cosignatures(ctx, -1, 10); err == nil {
		t.Error("Cosignatures(-1, 10) accepted")
	}
	if _, err := s.Cosignatures(ctx, 0, 0); err == nil {
		t.Error("Cosignatures(0, 0) accepted")
	}
}
