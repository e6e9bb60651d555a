package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store/sqlite"
)

// fillAuditLog appends n records to the SQLite database at path with the
// store library, in large batches; the first big of them carry a signature
// of 4 KiB, so that 1,000 of them (the CLI's page) would not fit in one
// gRPC message of the default 4 MiB limit.
func fillAuditLog(t *testing.T, path string, n, big int) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	large := strings.Repeat("s", 4<<10)
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for done := 0; done < n; {
		batch := make([]audit.Record, min(5000, n-done))
		for i := range batch {
			seq := done + i + 1
			sig := "sig"
			if seq <= big {
				sig = large
			}
			batch[i] = audit.Record{
				Time: start.Add(time.Duration(seq) * time.Millisecond), Caller: "filler", RequestID: fmt.Sprintf("req-%d", seq),
				CardName: "Agent", CardVersion: "1.0", CanonicalSHA256: bytes.Repeat([]byte{byte(seq)}, 32),
				KID: "filler-key", Alg: "ES256", Profile: "spec", Signature: sig,
			}
		}
		if _, err := st.AppendAudit(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		done += len(batch)
	}
}

// startDaemonOn starts cardsignd on dataDir (which may already hold a
// database) on free loopback ports and returns its gRPC address.
func startDaemonOn(t *testing.T, dataDir string) string {
	t.Helper()
	return runDaemon(t, daemonBin, dataDir, "limits:\n  rate: 0\n").grpc
}

// peakLiveHeap runs fn and returns the largest live heap (as of each
// garbage collection) seen while it ran, sampled every millisecond.
func peakLiveHeap(fn func()) (before, peak uint64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	forceGC()
	before = read()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := read(); v > peak {
				peak = v
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	return before, peak
}

func forceGC() { runtime.GC() }

// lineCounter counts lines and keeps the first and last.
type lineCounter struct {
	n           int
	first, last string
	partial     []byte
}

func (c *lineCounter) Write(p []byte) (int, error) {
	for _, b := range p {
		if b != '\n' {
			c.partial = append(c.partial, b)
			continue
		}
		if c.n == 0 {
			c.first = string(c.partial)
		}
		c.last = string(c.partial)
		c.n++
		c.partial = c.partial[:0]
	}
	return len(p), nil
}

// TestAuditStreamsLargeLog runs audit verify and audit list in process
// against a real cardsignd whose log holds 100,000 records (made with the
// store library), the first 1,500 of them large (4 KiB): both walk it page
// by page with a live heap bounded by a page or two (a page of large records
// is ≈ 3 MiB, and the gRPC buffer, the decoded message and the records made
// of it may be live at once) rather than by the log (a client that collected
// the records would hold more than 60 MB of them), pages of large records come
// split under gRPC's message limit, a record missing at a page boundary is
// a seq gap, and list --after/--limit cross pages.
func TestAuditStreamsLargeLog(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a 100,000-record log")
	}
	const n, big = 100_000, 1_500
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(data, "cardsign.db")
	fillAuditLog(t, db, n, big)
	addr := startDaemonOn(t, data)
	ctx := t.Context()

	run := func(w io.Writer, args ...string) (int, string) {
		var stderr bytes.Buffer
		code := auditCmd().invoke(ctx, env{stdin: strings.NewReader(""), stdout: w, stderr: &stderr}, append(args, "--server", addr))
		return code, stderr.String()
	}

	var out bytes.Buffer
	var code int
	var stderr string
	before, peak := peakLiveHeap(func() { code, stderr = run(&out, "verify") })
	// n records and the daemon's first key's creation.
	if code != 0 || !strings.Contains(out.String(), fmt.Sprintf("audit chain intact: %d records", n+1)) {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out.String(), stderr)
	}
	t.Logf("audit verify of %d records: live heap %d bytes before, peak %d", n, before, peak)
	if peak > before+24<<20 {
		t.Fatalf("audit verify of %d records: live heap grew from %d to %d bytes: records are being kept", n, before, peak)
	}

	// Against the head: the log holds record n.
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	seq, hash, err := st.AuditHead(ctx)
	st.Close()
	if err != nil || seq < n {
		t.Fatalf("AuditHead = %d, %v", seq, err)
	}
	out.Reset()
	if code, stderr = run(&out, "verify", "--head", audit.Head{Seq: seq, Hash: hash}.String()); code != 0 ||
		!strings.Contains(out.String(), fmt.Sprintf("checked against the published head record %d", seq)) {
		t.Fatalf("audit verify --head: exit %d\n%s%s", code, out.String(), stderr)
	}

	var lines lineCounter
	before, peak = peakLiveHeap(func() { code, stderr = run(&lines, "list", "--json") })
	if code != 0 || lines.n != int(seq) {
		t.Fatalf("audit list --json: exit %d, %d lines, want %d\n%s", code, lines.n, seq, stderr)
	}
	t.Logf("audit list of %d records: live heap %d bytes before, peak %d", n, before, peak)
	if peak > before+24<<20 {
		t.Fatalf("audit list of %d records: live heap grew from %d to %d bytes: records are being kept", n, before, peak)
	}
	var first, last struct{ Sequence int64 }
	if json.Unmarshal([]byte(lines.first), &first) != nil || json.Unmarshal([]byte(lines.last), &last) != nil ||
		first.Sequence != 1 || last.Sequence != seq {
		t.Fatalf("audit list: first %q, last %q", lines.first, lines.last)
	}

	// --after and --limit across page boundaries, and through the large
	// records' short pages.
	lines = lineCounter{}
	if code, stderr = run(&lines, "list", "--json", "--after", "499", "--limit", "2500"); code != 0 || lines.n != 2500 {
		t.Fatalf("audit list --after 499 --limit 2500: exit %d, %d lines\n%s", code, lines.n, stderr)
	}
	if json.Unmarshal([]byte(lines.first), &first) != nil || json.Unmarshal([]byte(lines.last), &last) != nil ||
		first.Sequence != 500 || last.Sequence != 2999 {
		t.Fatalf("audit list --after 499 --limit 2500: first %q, last %q", lines.first, lines.last)
	}

	// A record deleted behind the daemon's back where one page ends: the
	// verifier carries the chain from page to page and names the gap.
	deleteAuditRecord(t, db, 5001)
	out.Reset()
	if code, _ = run(&out, "verify"); code != 1 || !strings.Contains(out.String(), "audit chain BROKEN at record 5002: seq gap: want seq 5001 after 5000") {
		t.Fatalf("audit verify with record 5001 deleted: exit %d\n%s", code, out.String())
	}
}

// deleteAuditRecord deletes one audit record, dropping the append-only
// trigger first, as someone with write access to the file could.
func deleteAuditRecord(t *testing.T, path string, seq int64) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`DROP TRIGGER IF EXISTS audit_no_delete`, fmt.Sprintf(`DELETE FROM audit WHERE seq = %d`, seq)} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
}
