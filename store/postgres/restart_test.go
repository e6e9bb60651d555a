package postgres

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/pgtest"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/storetest"
)

// TestDatabaseRestart stops the server under an open store: every operation
// fails with store.ErrUnavailable (and nothing else), Open too; once the
// server is back the same store works again without being reopened, and
// Watch reconnects and says so. A cluster of its own: the package's is
// shared with the other tests.
func TestDatabaseRestart(t *testing.T) {
	ctx := t.Context()
	c, url := pgtest.StartT(t, pgtest.Options{})
	var logs testsupport.SyncBuffer
	s, err := Open(ctx, Config{URL: url, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateKey(ctx, newKey(t, "k1"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendAudit(ctx, []audit.Record{record("before")}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	topics := make(chan string, 64)
	go s.Watch(wctx, func(topic string) { topics <- topic })
	if got := <-topics; got != "" {
		t.Fatalf("first topic %q, want the connect's \"\"", got)
	}

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name string
		fn   func(ctx context.Context) error
	}{
		{"AppendAudit", func(ctx context.Context) error {
			_, err := s.AppendAudit(ctx, []audit.Record{record("during")})
			return err
		}},
		{"ListKeys", func(ctx context.Context) error { _, err := s.ListKeys(ctx); return err }},
		{"CreateKey", func(ctx context.Context) error { return s.CreateKey(ctx, newKey(t, "k2"), nil) }},
		{"AuditHead", func(ctx context.Context) error { _, _, err := s.AuditHead(ctx); return err }},
		{"ListAudit", func(ctx context.Context) error { _, err := s.ListAudit(ctx, 0, 0); return err }},
		{"NextSequence", func(ctx context.Context) error { _, err := s.NextSequence(ctx, "n"); return err }},
		{"Now", func(ctx context.Context) error { _, err := s.Now(ctx); return err }},
		{"AcquireLease", func(ctx context.Context) error { _, err := s.AcquireLease(ctx, "l", "h", time.Minute); return err }},
		{"Document", func(ctx context.Context) error {
			if _, err := s.Document(ctx, "d"); !errors.Is(err, store.ErrNotFound) {
				return err
			}
			return nil
		}},
		{"Open", func(ctx context.Context) error {
			s, err := Open(ctx, Config{URL: url})
			if err == nil {
				s.Close()
			}
			return err
		}},
	}
	for _, op := range ops {
		// Twice: the first may meet a pooled connection the shutdown
		// killed, the second a refused connect.
		for i := range 2 {
			err := op.fn(ctx)
			if !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("%s #%d with the server stopped: %v, want store.ErrUnavailable", op.name, i+1, err)
			}
		}
	}

	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The store comes back by itself: a dead pooled connection may fail
	// one more call, no more.
	deadline := time.Now().Add(10 * time.Second)
	for _, op := range ops {
		for {
			err := op.fn(ctx)
			if err == nil {
				break
			}
			if !errors.Is(err, store.ErrUnavailable) || time.Now().After(deadline) {
				t.Fatalf("%s after the restart: %v", op.name, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	recs := storetest.ListAudit(t, s)
	if len(recs) != 2 || recs[0].RequestID != "before" || recs[1].RequestID != "during" {
		t.Fatalf("records after the restart: %d", len(recs))
	}
	// Watch reconnected: "" again, then announcements.
	timeout := time.After(10 * time.Second)
	for reconnected := false; !reconnected; {
		select {
		case topic := <-topics:
			reconnected = topic == ""
		case <-timeout:
			t.Fatal("Watch did not reconnect within 10s of the restart")
		}
	}
	if err := s.CreateKey(ctx, newKey(t, "k3"), nil); err != nil {
		t.Fatal(err)
	}
	// Watch retried several times during the outage (every 50 ms, then
	// doubling): one warning, then one line when it ended, each naming
	// the database once.
	var warned, resumed int
	for line := range strings.Lines(logs.String()) {
		if n := strings.Count(line, `"database":`); n != 1 {
			t.Errorf("%d \"database\" keys in %s", n, line)
		}
		switch {
		case strings.Contains(line, "notifications interrupted"), strings.Contains(line, "still interrupted"):
			warned++
		case strings.Contains(line, "notifications resumed"):
			resumed++
		}
	}
	if warned != 1 || resumed != 1 {
		t.Errorf("%d warnings and %d lines of recovery for one short outage, want 1 and 1:\n%s", warned, resumed, logs.String())
	}
	for {
		select {
		case topic := <-topics:
			if topic == store.TopicKeys {
				return
			}
		case <-timeout:
			t.Fatalf("no %q announcement after the restart", store.TopicKeys)
		}
	}
}
