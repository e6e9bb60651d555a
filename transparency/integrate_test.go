package transparency

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cardsign/cardsign/audit"
)

// memLog is a tree's stored hashes in memory, as a store keeps them, and
// the reads an append made of it.
type memLog struct {
	hashes map[int64]tlog.Hash
	reads  [][]int64
}

func (m *memLog) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	m.reads = append(m.reads, slices.Clone(indexes))
	out := make([]tlog.Hash, len(indexes))
	for k, i := range indexes {
		h, ok := m.hashes[i]
		if !ok {
			return nil, fmt.Errorf("hash %d is not stored", i)
		}
		out[k] = h
	}
	return out, nil
}

// logRecords returns records first+1 ... first+n as a store returns them.
func logRecords(first int64, n int) []audit.Record {
	recs := make([]audit.Record, n)
	for i := range recs {
		seq := first + int64(i) + 1
		sum := sha256.Sum256(fmt.Append(nil, seq))
		prev := sha256.Sum256(fmt.Append(nil, seq-1))
		recs[i] = audit.Record{
			Seq: seq, Time: time.Unix(seq, 0).UTC(), Caller: "c", CardName: "n", CanonicalSHA256: sum[:],
			KID: "k", Alg: "ES256", Profile: "spec", Signature: "s", Outcome: audit.OutcomeSigned,
			PrevHash: prev[:], Hash: sum[:], Hosts: []string{"B.example.", "a.example", "a.example"},
		}
	}
	return recs
}

// TestLogAppendReadsOnce: an append reads the stored tree once, exactly the
// hashes appendReads names (which are those tlog.TreeHash reads), and
// what it stores makes the tree tlog computes from the leaves.
func TestLogAppendReadsOnce(t *testing.T) {
	m := &memLog{hashes: map[int64]tlog.Hash{}}
	var leaves []tlog.Hash
	var size int64
	var edge Edge
	for _, n := range []int{1, 1, 2, 3, 1, 7, 16, 1, 33, 64, 5, 100, 1, 2, 255, 1} {
		// The edge of the last append: the same hashes, and no read.
		m.reads = nil
		_, viaEdge, next, err := edge.Append(size, logRecords(size, n), m)
		if err != nil {
			t.Fatalf("append %d after %d from the edge: %v", n, size, err)
		}
		if len(m.reads) != 0 || next.size != size+int64(n) || len(next.hashes) != len(appendReads(next.size)) {
			t.Fatalf("append %d after %d from the edge of %d leaves: read %v, next edge of %d leaves with %d hashes",
				n, size, edge.size, m.reads, next.size, len(next.hashes))
		}
		edge = next
		recs := logRecords(size, n)
		entries, hashes, err := appendRecords(size, recs, m)
		if err != nil {
			t.Fatalf("append %d after %d: %v", n, size, err)
		}
		if !slices.Equal(hashes, viaEdge) {
			t.Fatalf("append %d after %d: the edge made other hashes", n, size)
		}
		want := [][]int64{appendReads(size)}
		if size == 0 {
			want = nil
		}
		if !slices.EqualFunc(m.reads, want, slices.Equal) {
			t.Fatalf("append %d after %d read %v, want %v", n, size, m.reads, want)
		}
		for i, e := range entries {
			if recs[i].Hosts[0] != "a.example" || len(recs[i].Hosts) != 2 {
				t.Fatalf("record %d hosts %q: want the entry's, normalized", recs[i].Seq, recs[i].Hosts)
			}
			if got := NewEntry(recs[i], recs[i].Hosts).Marshal(); string(got) != string(e) {
				t.Fatalf("entry %d = %s, want %s", recs[i].Seq, e, got)
			}
			leaves = append(leaves, LeafHash(e))
		}
		for _, h := range hashes {
			if _, dup := m.hashes[h.Index]; dup {
				t.Fatalf("hash %d stored twice", h.Index)
			}
			m.hashes[h.Index] = h.Hash
		}
		size += int64(n)
		if got, want := int64(len(m.hashes)), tlog.StoredHashCount(size); got != want {
			t.Fatalf("%d hashes stored for %d leaves, want %d", got, size, want)
		}
		got, err := tlog.TreeHash(size, m)
		if err != nil {
			t.Fatal(err)
		}
		if want := rootOf(leaves); got != want {
			t.Fatalf("root of %d leaves %x, want %x", size, got, want)
		}
	}
}

// store appends recs from edge and stores the hashes it adds.
func (m *memLog) store(t *testing.T, edge Edge, first int64, recs []audit.Record) Edge {
	t.Helper()
	_, hashes, next, err := edge.Append(first, recs, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hashes {
		m.hashes[h.Index] = h.Hash
	}
	return next
}

// TestEdgeOfAnotherTree: the edge of a tree that ends at another record,
// of another size or of the same, is not used.
func TestEdgeOfAnotherTree(t *testing.T) {
	otherRecord5 := logRecords(5, 2)
	otherRecord5[0].PrevHash = []byte("record 5 of another log")
	tests := []struct {
		name  string
		more  int // records another store appended after the edge's 5
		first int64
		recs  []audit.Record
	}{
		{"another record 5", 0, 5, otherRecord5},
		{"another size", 1, 6, logRecords(6, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &memLog{hashes: map[int64]tlog.Hash{}}
			edge := m.store(t, Edge{}, 0, logRecords(0, 5))
			m.store(t, Edge{}, 5, logRecords(5, tt.more))
			m.reads = nil
			_, got, _, err := edge.Append(tt.first, slices.Clone(tt.recs), m)
			if err != nil || len(m.reads) != 1 {
				t.Fatalf("append after %d leaves with the edge of 5: read %v, %v; want the tree read", tt.first, m.reads, err)
			}
			if _, want, err := appendRecords(tt.first, slices.Clone(tt.recs), m); err != nil || !slices.Equal(got, want) {
				t.Fatalf("append after %d leaves with the edge of 5: other hashes than without it (%v)", tt.first, err)
			}
		})
	}
}

// rootOf is the RFC 6962 root of leaf hashes, computed the slow way.
func rootOf(leaves []tlog.Hash) tlog.Hash {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return tlog.NodeHash(rootOf(leaves[:k]), rootOf(leaves[k:]))
}

func TestAppendReadsAreTreeHashReads(t *testing.T) {
	for n := int64(1); n < 1100; n++ {
		var got []int64
		_, _ = tlog.TreeHash(n, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			got = idx
			return make([]tlog.Hash, len(idx)), nil
		}))
		if want := appendReads(n); !slices.Equal(got, want) {
			t.Fatalf("appendReads(%d) = %v, tlog.TreeHash reads %v", n, want, got)
		}
	}
	if got := appendReads(0); len(got) != 0 {
		t.Fatalf("appendReads(0) = %v", got)
	}
}

func TestLogAppendRefusesWrongSeq(t *testing.T) {
	recs := logRecords(3, 2)
	recs[1].Seq = 6
	if _, _, err := appendRecords(3, recs, &memLog{}); err == nil || !strings.Contains(err.Error(), "audit record 6 cannot be leaf 4") {
		t.Fatalf("appendRecords of record 6 as leaf 4: %v", err)
	}
}

// TestCatchUpRecords: records become leaves with no hosts; a record missing
// before the head, or a log longer than the audit log, fails.
func TestCatchUpRecords(t *testing.T) {
	tests := []struct {
		name       string
		size, head int64
		seqs       []int64
		want       string // error; "" for none
	}{
		{"from empty", 0, 3, []int64{1, 2, 3}, ""},
		{"a chunk", 0, 5000, []int64{1, 2}, ""},
		{"gap in the middle", 0, 4, []int64{1, 3, 4}, "audit record 2 is missing"},
		{"gap at the start", 0, 4, []int64{2, 3, 4}, "audit record 1 is missing"},
		{"tail deleted", 2, 5, nil, "audit record 3 is missing"},
		{"log longer", 6, 5, nil, "the transparency log has 6 leaves but the audit log 5 records"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &memLog{hashes: map[int64]tlog.Hash{}}
			if tt.size > 0 && tt.size <= tt.head {
				_, hashes, err := appendRecords(0, logRecords(0, int(tt.size)), m)
				if err != nil {
					t.Fatal(err)
				}
				for _, h := range hashes {
					m.hashes[h.Index] = h.Hash
				}
			}
			var recs []audit.Record
			for _, seq := range tt.seqs {
				recs = append(recs, logRecords(seq-1, 1)...)
			}
			entries, _, err := catchUpRecords(tt.size, tt.head, recs, m)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("catchUpRecords = %v, want an error saying %q", err, tt.want)
				}
				if !strings.Contains(err.Error(), "restore the database from a backup") {
					t.Fatalf("catchUpRecords error does not say what to do: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range entries {
				pe, err := ParseEntry(e)
				if err != nil || pe.Seq != tt.seqs[i] || pe.Card.Hosts != nil || recs[i].Hosts != nil {
					t.Fatalf("entry %d: %+v, %v; want record %d's, without hosts", i, pe, err, tt.seqs[i])
				}
			}
		})
	}
}

func TestEntryHosts(t *testing.T) {
	rec := logRecords(6, 1)[0]
	entry := func(r audit.Record, hosts ...string) []byte { return NewEntry(r, hosts).Marshal() }
	tricky := rec
	tricky.Caller, tricky.CardName = `x","hosts":["evil.example"]`, `,"hosts":[1]} "seq":7`
	seq70 := logRecords(69, 1)[0]
	tests := []struct {
		name  string
		seq   int64
		entry []byte
		err   string // "" for none
	}{
		{"no leaf", 7, nil, ""},
		{"hosts", 7, entry(rec, "x.example", "a.example"), ""},
		{"no hosts", 7, entry(rec), ""},
		{"hosts named in strings", 7, entry(tricky, "y.example"), ""},
		{"strings naming hosts, no hosts", 7, entry(tricky), ""},
		{"refused", 7, entry(func() audit.Record { r := rec; r.Outcome, r.KID, r.Signature = audit.OutcomeRefused, "", ""; return r }(), "z.example"), ""},
		{"another record's", 8, entry(rec, "x.example"), "is not the entry of audit record 8"},
		{"record 70's, asked as 7", 7, entry(seq70), "is not the entry of audit record 7"},
		{"not an entry", 7, []byte(`{"v":1`), "is not the entry of audit record 7"},
		{"broken hosts", 7, []byte(`{"v":1,"seq":7,"card":{"name":"n","hosts":["a.example",`), "leaf 6 of the transparency log: hosts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EntryHosts(tt.seq, tt.entry)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("EntryHosts = %q, %v; want an error saying %q", got, err, tt.err)
				}
				return
			}
			var want []string
			if tt.entry != nil {
				e, err := ParseEntry(tt.entry)
				if err != nil {
					t.Fatal(err)
				}
				want = e.Card.Hosts
			}
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("EntryHosts = %q, %v; want %q, as ParseEntry reads them", got, err, want)
			}
		})
	}
}

// BenchmarkLogAppend is the transparency log's CPU share of an append (the
// entries, their encoding and the tree hashes), without a database: from
// the edge of the last append, as the stores append.
func BenchmarkAppendRecords(b *testing.B) {
	for _, size := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			m := &memLog{hashes: map[int64]tlog.Hash{}}
			var edge Edge
			var first int64
			for b.Loop() {
				recs := logRecords(first, size)
				_, hashes, next, err := edge.Append(first, recs, m)
				if err != nil {
					b.Fatal(err)
				}
				for _, h := range hashes {
					m.hashes[h.Index] = h.Hash
				}
				edge, first = next, first+int64(size)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/record")
		})
	}
}
