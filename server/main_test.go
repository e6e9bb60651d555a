package server

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/cardsign/cardsign/internal/pgtest"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/postgres"
)

// TestMain closes the PostgreSQL cluster sharedPostgres started, if any (its
// watchdog would remove it anyway when the binary exits).
func TestMain(m *testing.M) {
	code := m.Run()
	if pgCluster != nil {
		pgCluster.Close()
	}
	os.Exit(code)
}

// The one PostgreSQL cluster of the test binary: starting one takes seconds.
var (
	pgOnce    sync.Once
	pgCluster *pgtest.Cluster
	pgErr     error
)

// sharedPostgres opens a throw-away database on the test binary's cluster,
// closed when t ends.
func sharedPostgres(t *testing.T) store.Store {
	t.Helper()
	pgOnce.Do(func() { pgCluster, pgErr = pgtest.Start(context.Background(), pgtest.Options{}) })
	if pgErr != nil {
		t.Fatal(pgErr)
	}
	return openPostgres(t, pgCluster)
}

// ownPostgres starts a cluster of t's own, for a test that stops and starts
// it, and opens a database on it; both are closed when t ends.
func ownPostgres(t *testing.T) (*pgtest.Cluster, store.Store) {
	t.Helper()
	c, err := pgtest.Start(t.Context(), pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, openPostgres(t, c)
}

func openPostgres(t *testing.T, c *pgtest.Cluster) store.Store {
	t.Helper()
	url, err := c.NewDatabase(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := postgres.Open(context.Background(), postgres.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
