package storetest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

// RunLog runs the transparency log's contract tests (store.Log): every
// audit record is a leaf, appended in the record's transaction, whose entry
// is transparency.NewEntry of the record as stored with its hosts. newStore
// is as for Run.
func RunLog(t *testing.T, newStore func(t *testing.T) Opener) {
	runContract(t, newStore, []contractTest{
		{"Leaves", testLogLeaves},
		{"RefusedAppendAddsNoLeaf", testLogRefusedAppend},
		{"NotFound", testLogNotFound},
		{"ConcurrentAppends", testLogConcurrent},
		{"Cosignatures", testCosignatures},
		{"CosignaturesRefused", testCosignaturesRefused},
	})
}

// withHosts returns r with hosts, as a signer hands it to AppendAudit.
func withHosts(r audit.Record, hosts ...string) audit.Record {
	r.Hosts = hosts
	return r
}

// testLogLeaves appends batches of signed and refused records, with and
// without hosts, from two handles, and checks the log after each.
func testLogLeaves(t *testing.T, open Opener) {
	s1, s2 := mustOpen(t, open), mustOpen(t, open)
	ctx := t.Context()
	// What each record's entry must list: hosts lower case, without a
	// trailing dot, sorted, each once.
	want := map[string][]string{}
	batches := []struct {
		s    store.Store
		recs []audit.Record
		want [][]string
	}{
		{s1, []audit.Record{
			withHosts(newRecord("a", 1), "B.example.", "a.example", "b.example"),
			withHosts(newRefused("r", 2), "evil.example"),
			newRecord("b", 3),
		}, [][]string{{"a.example", "b.example"}, {"evil.example"}, nil}},
		{s2, []audit.Record{withHosts(newRecord("c", 4), "agent.example.com")}, [][]string{{"agent.example.com"}}},
		{s1, []audit.Record{newRefused("r2", 5)}, [][]string{nil}},
	}
	var more []audit.Record
	var moreWant [][]string
	for i := range 40 { // more than a multi-row insert holds (store/sqlite: 16), and not a multiple of it
		r := newRecord(fmt.Sprint("m", i), 6+i)
		if i%3 == 1 {
			r = newRefused(fmt.Sprint("m", i), 6+i)
		}
		h := fmt.Sprintf("h%d.example", i)
		more = append(more, withHosts(r, h, strings.ToUpper(h)))
		moreWant = append(moreWant, []string{h})
	}
	batches = append(batches, struct {
		s    store.Store
		recs []audit.Record
		want [][]string
	}{s2, more, moreWant})
	for _, b := range batches {
		out, err := b.s.AppendAudit(ctx, b.recs)
		if err != nil {
			t.Fatalf("AppendAudit: %v", err)
		}
		for i, r := range out {
			if !slices.Equal(r.Hosts, b.want[i]) {
				t.Fatalf("AppendAudit returned record %d with hosts %q, want %q (as its entry lists them)", r.Seq, r.Hosts, b.want[i])
			}
			want[r.RequestID] = b.want[i]
		}
		CheckLog(t, s1, func(r audit.Record) []string { return want[r.RequestID] })
	}
	if n := CheckLog(t, s2, func(r audit.Record) []string { return want[r.RequestID] }); n != 45 {
		t.Fatalf("log of %d leaves, want 45", n)
	}
}

// testLogRefusedAppend: an append the store refuses inside its transaction
// (a signature by a revoked key) adds no leaf, and the log goes on.
func testLogRefusedAppend(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	createRevoked(t, s, "revoked")
	if _, err := s.AppendAudit(ctx, []audit.Record{withHosts(newRecord("a", 1), "a.example")}); err != nil {
		t.Fatal(err)
	}
	bad := withHosts(newRecord("b", 2), "b.example")
	bad.KID = "revoked"
	if _, err := s.AppendAudit(ctx, []audit.Record{newRecord("ok", 2), bad}); !errors.Is(err, store.ErrKeyRevoked) {
		t.Fatalf("AppendAudit by a revoked key: %v, want ErrKeyRevoked", err)
	}
	if _, err := s.LogEntries(ctx, 1, 2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("leaf 1 after a refused append: %v, want ErrNotFound", err)
	}
	if _, err := s.AppendAudit(ctx, []audit.Record{newRecord("c", 3)}); err != nil {
		t.Fatal(err)
	}
	if n := CheckLog(t, s, func(r audit.Record) []string {
		if r.RequestID == "a" {
			return []string{"a.example"}
		}
		return nil
	}); n != 2 {
		t.Fatalf("log of %d leaves, want 2", n)
	}
}

// testLogNotFound: entries and hashes that are not stored fail with
// ErrNotFound; an empty range is empty.
func testLogNotFound(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	check := func(size int64) {
		t.Helper()
		if got, err := s.LogEntries(ctx, size, size); err != nil || len(got) != 0 {
			t.Errorf("LogEntries(%d, %d) = %d entries, %v; want none", size, size, len(got), err)
		}
		for _, r := range [][2]int64{{size, size + 1}, {0, size + 1}, {size + 5, size + 9}} {
			if _, err := s.LogEntries(ctx, r[0], r[1]); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("LogEntries(%d, %d) of a log of %d leaves: %v, want ErrNotFound", r[0], r[1], size, err)
			}
		}
		next := tlog.StoredHashCount(size)
		for _, idx := range [][]int64{{next}, {0, next}, {next + 100}} {
			if size == 0 && len(idx) == 2 {
				continue
			}
			if _, err := s.LogHashes(ctx, idx); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("LogHashes(%v) of a log of %d leaves: %v, want ErrNotFound", idx, size, err)
			}
		}
		for _, r := range [][2]int64{{-1, 0}, {2, 1}} {
			if _, err := s.LogEntries(ctx, r[0], r[1]); err == nil {
				t.Errorf("LogEntries(%d, %d) accepted", r[0], r[1])
			}
		}
	}
	check(0)
	if _, err := s.AppendAudit(ctx, []audit.Record{newRecord("a", 1), newRecord("b", 2), newRecord("c", 3)}); err != nil {
		t.Fatal(err)
	}
	check(3)
	if got, err := s.LogEntries(ctx, 1, 3); err != nil || len(got) != 2 {
		t.Fatalf("LogEntries(1, 3) = %d entries, %v", len(got), err)
	}
	if got, err := s.LogHashes(ctx, []int64{3, 0, 3}); err != nil || len(got) != 3 || got[0] != got[2] {
		t.Fatalf("LogHashes(3, 0, 3) = %x, %v", got, err)
	}
}

// testLogConcurrent appends from several goroutines on two handles: one
// tree, every record a leaf once.
func testLogConcurrent(t *testing.T, open Opener) {
	s1, s2 := mustOpen(t, open), mustOpen(t, open)
	ctx := t.Context()
	const workers, each = 4, 12
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*each)
	for h, s := range []store.Store{s1, s2} {
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					batch := make([]audit.Record, 1+i%3)
					for j := range batch {
						id := fmt.Sprintf("h%d-w%d-%d-%d", h, w, i, j)
						batch[j] = withHosts(newRecord(id, i), id+".example")
					}
					if _, err := s.AppendAudit(ctx, batch); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("AppendAudit: %v", err)
	}
	if n := CheckLog(t, s1, func(r audit.Record) []string { return []string{r.RequestID + ".example"} }); n != 2*workers*(4*1+4*2+4*3) {
		t.Fatalf("log of %d leaves after %d records", n, 2*workers*(4*1+4*2+4*3))
	}
}

// CheckLog checks the transparency log of s against its audit log and
// returns its size: one leaf per record, each leaf the entry
// transparency.NewEntry makes of the record as ListAudit returns it with
// the hosts hosts says (ListAudit must return those too), the tree the
// stored hashes make (tlog.TreeHash over LogHashes) at every size the one
// computed from the entries with another implementation (transparency-dev
// merkle's compact ranges), and an inclusion proof of every leaf in the
// whole tree, under a signed checkpoint, that verifies.
func CheckLog(t testing.TB, s store.Store, hosts func(audit.Record) []string) int64 {
	t.Helper()
	ctx := t.Context()
	recs, err := s.ListAudit(ctx, 0, 0)
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	size, _, err := s.AuditHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(recs)) != size {
		t.Fatalf("%d records up to audit head %d: CheckLog wants a log without gaps", len(recs), size)
	}
	entries, err := s.LogEntries(ctx, 0, size)
	if err != nil {
		t.Fatalf("LogEntries(0, %d): %v", size, err)
	}
	if _, err := s.LogEntries(ctx, size, size+1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("leaf %d of a log of %d records: %v, want ErrNotFound", size, size, err)
	}
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) { return s.LogHashes(ctx, idx) })
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr := rf.NewEmptyRange(0)
	for i, r := range recs {
		if want := hosts(r); !slices.Equal(r.Hosts, want) {
			t.Fatalf("ListAudit returned record %d with hosts %q, want %q", r.Seq, r.Hosts, want)
		}
		if want := transparency.NewEntry(r, r.Hosts).Marshal(); string(entries[i]) != string(want) {
			t.Fatalf("leaf %d is\n%s\nwant the entry of audit record %d\n%s", i, entries[i], r.Seq, want)
		}
		if err := cr.Append(rfc6962.DefaultHasher.HashLeaf(entries[i]), nil); err != nil {
			t.Fatal(err)
		}
		want, err := cr.GetRootHash(nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tlog.TreeHash(int64(i+1), reader)
		if err != nil {
			t.Fatalf("tree hash of %d leaves: %v", i+1, err)
		}
		if string(got[:]) != string(want) {
			t.Fatalf("tree of %d leaves: root %x from the stored hashes, %x from the entries", i+1, got, want)
		}
	}
	if size == 0 {
		return 0
	}
	root, err := tlog.TreeHash(size, reader)
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := transparency.NewSigner("cardsign.example.com/log", key)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := signer.Sign(size, root)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := transparency.ParseVerifierKeys(strings.Join(signer.VerifierKeys(), "\n"))
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		p, err := transparency.Prove(e, int64(i), size, cp, reader)
		if err != nil {
			t.Fatalf("prove leaf %d: %v", i, err)
		}
		got, c, err := p.Verify(keys)
		if err != nil || got.Seq != int64(i+1) || c.Size != size {
			t.Fatalf("proof of leaf %d: entry of record %d, checkpoint of %d leaves, %v", i, got.Seq, c.Size, err)
		}
		// The proof is of this leaf only.
		if i > 0 {
			p.Entry = entries[i-1]
			if _, _, err := p.Verify(keys); err == nil {
				t.Fatalf("the proof of leaf %d verified for leaf %d's entry", i, i-1)
			}
		}
	}
	return size
}

// ChainedRecords returns n audit records as a store holds them: Seq,
// PrevHash and Hash set, every third one refused, Outcome set, times in
// UTC. Tests write them into a database the way an older cardsign did.
func ChainedRecords(n int) []audit.Record {
	recs := make([]audit.Record, n)
	prev := audit.Genesis()
	for i := range recs {
		id := fmt.Sprint("old-", i+1)
		r := newRecord(id, i)
		if i%3 == 2 {
			r = newRefused(id, i)
		}
		r.Outcome = outcome(r)
		r.Time = r.Time.UTC()
		r.Seq, r.PrevHash = int64(i+1), prev
		r.Hash = r.ComputeHash(prev)
		prev = r.Hash
		recs[i] = r
	}
	return recs
}

// OldStore makes a store as cardsign wrote it before the transparency log
// (its schema before the log's migration) holding recs (ChainedRecords). It
// returns an Opener that opens it with this cardsign, which migrates it and
// makes every record a leaf, and a function that deletes the audit records
// where says (an SQL condition such as "seq = 3") behind the store's back.
type OldStore func(t *testing.T, recs []audit.Record) (Opener, func(ctx context.Context, where string) error)

// RunLogCatchUp checks what opening a store written before the
// transparency log does: every record becomes a leaf, without hosts (none
// were kept), the tree is the one its entries make, appends go on from it,
// several handles opening at once add each leaf once, and a record missing
// before the audit head fails the open, saying which and what to do.
func RunLogCatchUp(t *testing.T, old OldStore) {
	noHosts := func(audit.Record) []string { return nil }
	for _, n := range []int{0, 1, 7, 2*transparency.CatchUpChunk + 500} {
		t.Run(fmt.Sprint("CatchUp/", n), func(t *testing.T) {
			ctx := t.Context()
			open, _ := old(t, ChainedRecords(n))
			s := mustOpen(t, open)
			if got := CheckLog(t, s, noHosts); got != int64(n) {
				t.Fatalf("%d leaves for %d records", got, n)
			}
			stored := tlog.StoredHashCount(int64(n))
			if _, err := s.LogHashes(ctx, []int64{stored}); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("tree hash %d of a log of %d leaves: %v, want ErrNotFound", stored, n, err)
			}
			if _, err := s.AppendAudit(ctx, []audit.Record{withHosts(newRecord("new", n), "new.example")}); err != nil {
				t.Fatal(err)
			}
			CheckLog(t, mustOpen(t, open), func(r audit.Record) []string {
				if r.RequestID == "new" {
					return []string{"new.example"}
				}
				return nil
			})
		})
	}
	t.Run("ConcurrentOpen", func(t *testing.T) {
		n := 2*transparency.CatchUpChunk + 10
		open, _ := old(t, ChainedRecords(n))
		const handles = 4
		errs := make([]error, handles)
		var wg sync.WaitGroup
		for i := range handles {
			wg.Go(func() {
				s, err := open(t.Context())
				if err != nil {
					errs[i] = err
					return
				}
				// Appending as soon as it is open: between another
				// handle's chunks, or after them.
				_, err = s.AppendAudit(t.Context(), []audit.Record{newRecord(fmt.Sprint("handle-", i), n+i)})
				errs[i] = errors.Join(err, s.Close())
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("handle %d: %v", i, err)
			}
		}
		if got := CheckLog(t, mustOpen(t, open), noHosts); got != int64(n+handles) {
			t.Fatalf("%d leaves, want %d", got, n+handles)
		}
	})
	for _, tt := range []struct {
		where   string
		missing int64
	}{
		{"seq = 3", 3},
		{"seq = 1", 1},
		{"seq >= 5", 5},
		{fmt.Sprintf("seq = %d", transparency.CatchUpChunk+2), transparency.CatchUpChunk + 2},
	} {
		t.Run("Gap/"+tt.where, func(t *testing.T) {
			open, del := old(t, ChainedRecords(transparency.CatchUpChunk+6))
			if err := del(t.Context(), tt.where); err != nil {
				t.Fatal(err)
			}
			s, err := open(t.Context())
			if err == nil {
				s.Close()
			}
			for _, want := range []string{
				fmt.Sprintf("audit record %d is missing", tt.missing),
				"run cardsign audit verify; restore the database from a backup",
			} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("open of an audit log without record %d: %v; want an error saying %q", tt.missing, err, want)
				}
			}
		})
	}
}

// LogGuard is a statement on the log's tables that a store's schema must
// refuse, and what its error must say.
type LogGuard struct{ SQL, Want string }

// RunLogGuards checks a store's own guards on the log's tables: after two
// appends, each guard's statement (run by exec) fails saying its Want; then,
// once insertBehind has put a leaf the audit log lacks (past the guards, as
// an owner of the database could), the next append is refused.
func RunLogGuards(t *testing.T, s store.AuditLog, exec func(ctx context.Context, sql string) error, guards []LogGuard, insertBehind func(ctx context.Context) error) {
	t.Helper()
	ctx := t.Context()
	recs := ChainedRecords(3)
	if _, err := s.AppendAudit(ctx, recs[:2]); err != nil {
		t.Fatal(err)
	}
	for _, g := range guards {
		if err := exec(ctx, g.SQL); err == nil || !strings.Contains(err.Error(), g.Want) {
			t.Errorf("%s: %v, want an error saying %q", g.SQL, err, g.Want)
		}
	}
	if err := insertBehind(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := s.AppendAudit(ctx, recs[2:])
	if want := "the transparency log has 3 leaves but the audit log 2 records"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("append onto a log longer than the audit log: %v, want an error saying %q", err, want)
	}
}

// CatchUpRecords is how many records RunLogCatchUpLogs wants in the store
// written before the log (ChainedRecords(CatchUpRecords)).
const CatchUpRecords = 1500

// RunLogCatchUpLogs checks that making old records leaves at open is
// reported, with the count, to the logger the store is opened with, and
// that an open with nothing left to catch up says nothing of it. open opens
// (each time it is called) a store written before the log holding
// CatchUpRecords records.
func RunLogCatchUpLogs(t *testing.T, open func(log *slog.Logger) (io.Closer, error)) {
	t.Helper()
	const done = "every audit record is a leaf"
	count := fmt.Sprintf("records=%d", CatchUpRecords)
	for i, want := range []bool{true, false} {
		var logged bytes.Buffer
		s, err := open(slog.New(slog.NewTextHandler(&logged, nil)))
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if strings.Contains(logged.String(), done) != want || strings.Contains(logged.String(), count) != want {
			t.Fatalf("open %d logged:\n%s\nwant %q with %s: %v", i+1, logged.String(), done, count, want)
		}
	}
}

// CheckAppendCatchesUp checks the append after records without leaves (an
// older cardsignd's: records 6 to 8 of ChainedRecords(8), written after
// the first five the store's log holds): the new record is the ninth, and
// the log holds a leaf for each of the nine.
func CheckAppendCatchesUp(t *testing.T, s store.Store) {
	t.Helper()
	out, err := s.AppendAudit(t.Context(), []audit.Record{newRecord("new", 0)})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Seq != 9 {
		t.Fatalf("appended as record %d, want 9", out[0].Seq)
	}
	if n := CheckLog(t, s, func(audit.Record) []string { return nil }); n != 9 {
		t.Fatalf("log of %d leaves, want 9", n)
	}
}
