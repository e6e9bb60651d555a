package audit

import (
	"errors"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"testing"
	"time"
)

// generate yields a valid chain of n records from seq 1, made on the fly
// (nothing of it is kept), calling sample after every 10,000th record.
// tamper, when not nil, may change a record before it is yielded.
func generate(n int, tamper func(*Record), sample func()) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		prev := Genesis()
		base := sampleRecord()
		for i := 1; i <= n; i++ {
			r := base
			r.Seq = int64(i)
			r.Time = base.Time.Add(time.Duration(i) * time.Millisecond)
			r.RequestID = fmt.Sprintf("req-%d", i)
			r.PrevHash = prev
			r.Hash = r.ComputeHash(prev)
			prev = r.Hash
			if tamper != nil {
				tamper(&r)
			}
			if !yield(r, nil) {
				return
			}
			if sample != nil && i%10000 == 0 {
				sample()
			}
		}
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestVerifyStreamBoundedMemory verifies 100,000 records and checks that
// the live heap does not grow with them: a verifier that kept the records
// (≈ 400 bytes each) would hold ≈ 40 MB by the end.
func TestVerifyStreamBoundedMemory(t *testing.T) {
	const n = 100_000
	var peak uint64
	sample := func() {
		if h := liveHeap(); h > peak {
			peak = h
		}
	}
	var lastHash []byte
	head := &Head{Seq: n / 2}
	for r := range generate(n, nil, nil) {
		if r.Seq == n/2 {
			head.Hash = r.Hash
		}
		lastHash = r.Hash
	}
	base := liveHeap()
	v, err := VerifyStream(Genesis(), head, generate(n, nil, sample))
	if err != nil {
		t.Fatalf("VerifyStream: %v", err)
	}
	if seq, hash := v.Last(); v.Count() != n || seq != n || string(hash) != string(lastHash) {
		t.Fatalf("Count, Last = %d, %d, %x; want %d, %d, %x", v.Count(), seq, hash, n, n, lastHash)
	}
	if peak > base && peak-base > 1<<20 {
		t.Fatalf("live heap grew by %d bytes over %d records (from %d to %d): the verifier keeps records", peak-base, n, base, peak)
	}
	t.Logf("live heap: %d bytes before, peak %d while verifying %d records", base, peak, n)

	// Allocations per record are a constant: the same for 1k and 100k.
	perRecord := func(n int) float64 {
		var m0, m1 runtime.MemStats
		recs := generate(n, nil, nil)
		runtime.ReadMemStats(&m0)
		v := NewChainVerifier(Genesis(), nil)
		for r := range recs {
			if err := v.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&m1)
		return float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n)
	}
	small, large := perRecord(1000), perRecord(n)
	if large > small*1.5+64 {
		t.Fatalf("bytes allocated per record: %.0f at 1k records, %.0f at %d: want the same", small, large, n)
	}
}

// TestChainVerifierAllocs: Add of a valid record allocates what hashing it
// allocates (ComputeHash) and hardly more: the verifier keeps nothing.
func TestChainVerifierAllocs(t *testing.T) {
	recs := chain(3)
	v := NewChainVerifier(Genesis(), nil)
	if err := v.Add(recs[0]); err != nil {
		t.Fatal(err)
	}
	hashing := testing.AllocsPerRun(100, func() { _ = recs[1].ComputeHash(recs[0].Hash) })
	allocs := testing.AllocsPerRun(100, func() {
		v.lastSeq, v.count, v.prev = 1, 1, append(v.prev[:0], recs[0].Hash...)
		if err := v.Add(recs[1]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > hashing+1 {
		t.Fatalf("Add: %.0f allocations; ComputeHash alone makes %.0f", allocs, hashing)
	}
}

// TestVerifyStreamAcrossPages: records fed in pages to one verifier are
// checked as one chain, so a record missing between two pages is a seq gap.
func TestVerifyStreamAcrossPages(t *testing.T) {
	recs := chain(10)
	v := NewChainVerifier(Genesis(), nil)
	for _, page := range [][]Record{recs[:3], recs[3:6], recs[7:]} { // record 7 missing
		for _, r := range page {
			if err := v.Add(r); err != nil {
				var ce *ChainError
				if !errors.As(err, &ce) || ce.Seq != 8 || !strings.HasPrefix(ce.Reason, "seq gap") {
					t.Fatalf("Add(seq %d) = %v; want a seq gap at 8", r.Seq, err)
				}
				if err2 := v.Finish(); err2 != err {
					t.Fatalf("Finish after a failure = %v; want %v", err2, err)
				}
				if v.Add(recs[7]) != err {
					t.Fatal("Add after a failure did not return the first failure")
				}
				return
			}
		}
	}
	t.Fatal("missing record 7 between pages not found")
}

func TestVerifyStream(t *testing.T) {
	recs := chain(20)
	tests := []struct {
		name   string
		n      int
		tamper func(*Record)
		head   *Head
		want   string // substring of the error; "" for none
	}{
		{name: "valid", n: 20},
		{name: "empty", n: 0},
		{name: "head inside", n: 20, head: &Head{Seq: 7, Hash: recs[6].Hash}},
		{name: "head at end", n: 20, head: &Head{Seq: 20, Hash: recs[19].Hash}},
		{name: "empty head", n: 0, head: &Head{Seq: 0, Hash: Genesis()}},
		{name: "truncated", n: 15, head: &Head{Seq: 20, Hash: recs[19].Hash}, want: "audit log truncated"},
		{name: "rewritten", n: 20, head: &Head{Seq: 7, Hash: recs[8].Hash}, want: "audit log rewritten at record 7"},
		{name: "edited", n: 20, tamper: func(r *Record) {
			if r.Seq == 12 {
				r.CardName = "Evil"
			}
		}, want: "chain broken at seq 12: hash mismatch"},
		{name: "signed with reason", n: 20, tamper: func(r *Record) {
			if r.Seq == 3 {
				r.Reason = "x"
			}
		}, want: "chain broken at seq 3: invalid record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := VerifyStream(Genesis(), tt.head, generateFrom(recs[:tt.n], tt.tamper))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("VerifyStream = %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("VerifyStream = %v; want %q", err, tt.want)
			case tt.want == "" && v.Count() != int64(tt.n):
				t.Fatalf("Count = %d, want %d", v.Count(), tt.n)
			}
		})
	}
	// An error from the sequence is returned as is.
	boom := errors.New("boom")
	_, err := VerifyStream(Genesis(), nil, func(yield func(Record, error) bool) {
		if yield(recs[0], nil) {
			yield(Record{}, boom)
		}
	})
	if err != boom {
		t.Fatalf("VerifyStream with a failing source = %v; want %v", err, boom)
	}
}

func generateFrom(recs []Record, tamper func(*Record)) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for _, r := range recs {
			if tamper != nil {
				tamper(&r)
			}
			if !yield(r, nil) {
				return
			}
		}
	}
}
