package transparency_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/memlog"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/tlogclient"
)

// checkAudit runs an AuditChecker over recs against the log l serves, and
// returns its first error.
func checkAudit(t *testing.T, l *memlog.Log, recs []audit.Record) error {
	t.Helper()
	keys := l.Signer().Verifiers()
	srv := httptest.NewServer(l.Handler())
	t.Cleanup(srv.Close)
	c := &tlogclient.Client{URL: srv.URL, Keys: keys}
	ctx := t.Context()
	cp, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lc := transparency.NewAuditChecker(c, cp, time.Minute)
	for _, r := range recs {
		if err := lc.Add(ctx, r); err != nil {
			return err
		}
	}
	return lc.Finish(int64(len(recs)))
}

// TestAuditChecker: a log whose entries are the records' and whose tiles
// hash them passes; a record that differs from its entry, a changed tree
// hash and records missing are mismatches, and say which record.
func TestAuditChecker(t *testing.T) {
	const n = 600 // two full hash tiles and a partial one; three entry bundles
	recs := memlog.Records(0, n, "")
	honest, _ := memlog.NewTest(t, n)
	if err := checkAudit(t, honest, recs); err != nil {
		t.Fatalf("an honest log: %v", err)
	}
	// Records appended after the checkpoint are not checked yet.
	if err := checkAudit(t, honest, memlog.Records(0, n+5, "")); err != nil {
		t.Fatalf("records past the checkpoint: %v", err)
	}

	mismatch := func(t *testing.T, err error, seq int64, says string) {
		t.Helper()
		var m *transparency.MismatchError
		if !errors.As(err, &m) || m.Seq != seq || !strings.Contains(m.Msg, says) {
			t.Fatalf("got %v, want a mismatch at record %d saying %q", err, seq, says)
		}
	}
	t.Run("record changed", func(t *testing.T) {
		changed := memlog.Records(0, n, "")
		changed[300].Caller = "someone-else"
		mismatch(t, checkAudit(t, honest, changed), 301, `caller "caller" in the log, "someone-else" in the record`)
	})
	t.Run("tree hash changed", func(t *testing.T) {
		l, _ := memlog.NewTest(t, n)
		l.SetHash(tlog.StoredHashIndex(0, 257), tlog.Hash{7})
		mismatch(t, checkAudit(t, l, recs), 258, "a stored tree hash")
	})
	t.Run("records missing", func(t *testing.T) {
		mismatch(t, checkAudit(t, honest, recs[:n-1]), 0, "covers 600 leaves but the audit log has 599 records")
	})
}
