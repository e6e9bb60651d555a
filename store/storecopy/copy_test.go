package storecopy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/pgtest"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/postgres"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/store/storecopy"
	"github.com/cardsign/cardsign/store/storetest"
	"github.com/cardsign/cardsign/transparency"
)

// cluster is the package's PostgreSQL server, started once by TestMain.
var cluster *pgtest.Cluster

func TestMain(m *testing.M) {
	c, err := pgtest.Start(context.Background(), pgtest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "storecopy tests:", err)
		os.Exit(1)
	}
	cluster = c
	code := m.Run()
	c.Close() // before the exit, which runs no deferred call
	os.Exit(code)
}

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "cardsign.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openPostgres(t *testing.T) store.Store {
	t.Helper()
	url, err := cluster.NewDatabase(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(t.Context(), postgres.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fill gives s what a daemon leaves: a revoked key and the one signing now
// (both from before key administration was audited), records audit
// records signed by the second, a revocation counter, an agent with two
// card versions and two witnesses' cosignatures (copied as they are:
// opaque to the copy).
func fill(t *testing.T, s store.Store, records int) {
	t.Helper()
	ctx := t.Context()
	created := time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC)
	old, cur := storetest.NewKey(t, "k0", created), storetest.NewKey(t, "k1", created.Add(time.Hour))
	for _, k := range []jwks.KeyRecord{old, cur} {
		if err := s.CreateKey(ctx, k, nil); err != nil {
			t.Fatal(err)
		}
	}
	revoked := created.Add(2 * time.Hour)
	old.RevokedAt, old.RevokeReason = &revoked, "superseded"
	if err := s.UpdateKeys(ctx, func([]jwks.KeyRecord) ([]jwks.KeyRecord, error) { return []jwks.KeyRecord{old}, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendAudit(ctx, storetest.ChainedRecords(records)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.NextSequence(ctx, "revocations"); err != nil {
			t.Fatal(err)
		}
	}
	for n := range 2 {
		if _, err := s.PutAgentCard(ctx, storetest.AgentCard("payments", n+1), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutCosignatures(ctx, fillCosignatures(int64(records))); err != nil {
		t.Fatal(err)
	}
	if err := s.(store.ApprovalImporter).ImportApproval(ctx, fillApproval); err != nil {
		t.Fatal(err)
	}
}

// fillApproval is fill's approval: pending, one of its two votes given.
var fillApproval = store.Approval{
	ID: "apr_fill", CreatedAt: time.Date(2026, 5, 4, 4, 0, 0, 0, time.UTC), ExpiresAt: time.Date(2036, 5, 4, 4, 0, 0, 0, time.UTC),
	Requester: "token:ci", RequestID: "r1", Rule: "new-host", Required: 2, CanonicalSHA256: bytes.Repeat([]byte{7}, 32),
	CardName: "Payments", CardVersion: "2", AgentID: "payments", Request: []byte(`{"name":"Payments"}`), Diff: `{"first":false}`,
	State: store.ApprovalPending, Seq: 3,
	Votes: []store.Vote{{Approver: "token:alice", Time: time.Date(2026, 5, 4, 4, 1, 0, 0, time.UTC), Approve: true, Reason: "ok", Seq: 5}},
}

// fillCosignatures are fill's cosignatures of a log of size leaves: w1 at
// 2 and size, w2 at size.
func fillCosignatures(size int64) []transparency.Cosignature {
	return []transparency.Cosignature{
		{Size: 2, Witness: "w1.example", Signature: "AAAAAQID"},
		{Size: size, Witness: "w1.example", Signature: "AAAAAQIE"},
		{Size: size, Witness: "w2.example", Signature: "AAAAAgIE"},
	}
}

// checkSame fails unless dst holds src's audit head and key records.
func checkSame(t *testing.T, src, dst store.Store) {
	t.Helper()
	ctx := t.Context()
	srcSeq, srcHash, err := src.AuditHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dstSeq, dstHash, err := dst.AuditHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if srcSeq != dstSeq || !bytes.Equal(srcHash, dstHash) {
		t.Errorf("audit head %d %x, the source's %d %x", dstSeq, dstHash, srcSeq, srcHash)
	}
	srcKeys, _ := src.ListKeys(ctx)
	dstKeys, _ := dst.ListKeys(ctx)
	if len(srcKeys) != len(dstKeys) {
		t.Fatalf("%d key records, the source has %d", len(dstKeys), len(srcKeys))
	}
	for i := range srcKeys {
		if dstKeys[i].KID != srcKeys[i].KID || (dstKeys[i].RevokedAt == nil) != (srcKeys[i].RevokedAt == nil) {
			t.Errorf("key %d: %+v, the source's %+v", i, dstKeys[i], srcKeys[i])
		}
	}
	if hist, err := dst.AgentHistory(ctx, "payments"); err != nil || len(hist) != 2 || hist[0].Version != 2 {
		t.Errorf("the destination's agent history: %d versions, %v; want 2", len(hist), err)
	}
	if v, err := dst.NextSequence(ctx, "revocations"); err != nil || v != 4 {
		t.Errorf("the destination's next revocation sequence: %d, %v; want 4", v, err)
	}
	want, err := src.Cosignatures(ctx, 0, 100)
	if err != nil || len(want) != 3 {
		t.Fatalf("the source's cosignatures: %v, %v", want, err)
	}
	if got, err := dst.Cosignatures(ctx, 0, 100); err != nil || !slices.Equal(got, want) {
		t.Errorf("the destination's cosignatures: %v, %v; want the source's %v", got, err, want)
	}
	got, err := dst.Approval(ctx, fillApproval.ID)
	if err != nil || !got.CreatedAt.Equal(fillApproval.CreatedAt) || !got.ExpiresAt.Equal(fillApproval.ExpiresAt) || got.State != store.ApprovalPending ||
		len(got.Votes) != 1 || got.Votes[0] != fillApproval.Votes[0] || got.Seq != 3 || got.Diff != fillApproval.Diff {
		t.Errorf("the destination's approval: %+v, %v; want the source's %+v", got, err, fillApproval)
	}
}

// TestCopy copies SQLite to PostgreSQL (the way up from the embedded
// default) and PostgreSQL to SQLite, each verified, and refuses to copy
// onto a copy.
func TestCopy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src, dst func(*testing.T) store.Store
	}{
		{"SQLiteToPostgres", openSQLite, openPostgres},
		{"PostgresToSQLite", openPostgres, openSQLite},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := tc.src(t), tc.dst(t)
			fill(t, src, 7)
			var out strings.Builder
			rep, err := storecopy.Copy(t.Context(), src, dst, storecopy.Options{Batch: 3, SourceName: "src", DestName: "dst", Out: &out})
			if err != nil {
				t.Fatalf("Copy: %v\n%s", err, out.String())
			}
			if rep.Keys != 2 || rep.AuditRecords != 7 || !strings.Contains(out.String(), "verified dst: audit chain intact (7 records") ||
				!strings.Contains(out.String(), "copied 3 witness cosignatures by 2 witnesses (newest size 7)") {
				t.Errorf("Copy: %+v\n%s", rep, out.String())
			}
			checkSame(t, src, dst)
			if m, err := dst.Document(t.Context(), storecopy.Marker); err != nil || string(m.Body) != storecopy.Complete {
				t.Errorf("the copy's marker: %q, %v", m.Body, err)
			}
			if _, err := storecopy.Copy(t.Context(), src, dst, storecopy.Options{}); !errors.Is(err, storecopy.ErrNotEmpty) {
				t.Errorf("a copy onto a copy: %v, want ErrNotEmpty", err)
			}
		})
	}
}

// TestCopyResumes: a copy stopped part-way leaves the destination marked in
// progress; a second one with AllowNonEmpty copies the rest.
func TestCopyResumes(t *testing.T) {
	src, dst := openSQLite(t), openPostgres(t)
	fill(t, src, 5)
	rep, err := storecopy.Copy(t.Context(), src, dst, storecopy.Options{Batch: 1, StopAfter: 2})
	if err != nil || rep.Keys != 1 || rep.AuditRecords != 2 {
		t.Fatalf("stopped copy: %+v, %v", rep, err)
	}
	if m, err := dst.Document(t.Context(), storecopy.Marker); err != nil || string(m.Body) != storecopy.InProgress {
		t.Errorf("a part-copy's marker: %q, %v", m.Body, err)
	}
	var out strings.Builder
	rep, err = storecopy.Copy(t.Context(), src, dst, storecopy.Options{AllowNonEmpty: true, Out: &out})
	if err != nil || rep.Keys != 1 || rep.AuditRecords != 3 || !strings.Contains(out.String(), "resuming") {
		t.Fatalf("resumed copy: %+v, %v\n%s", rep, err, out.String())
	}
	checkSame(t, src, dst)
}
