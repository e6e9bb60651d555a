package main

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cardsign/cardsign/internal/pgtest"
	"github.com/cardsign/cardsign/store/postgres"
)

// pg is the package's PostgreSQL cluster: started by the first test that
// needs it (most tests of this package do not, and -run may pick only
// those), shared by every test after it, each with a fresh database.
// testbin.Main ends the process without returning, so no Close runs: the
// cluster's watchdog stops the server and removes its directory when the
// test binary exits, however it exits.
var pg struct {
	once    sync.Once
	cluster *pgtest.Cluster
	err     error
}

// newPGDatabase returns the URL (with the test role's password) of a fresh,
// empty database in the package's cluster.
func newPGDatabase(t *testing.T) string {
	t.Helper()
	pg.once.Do(func() {
		pg.cluster, pg.err = pgtest.Start(context.Background(), pgtest.Options{})
		if pg.err != nil {
			pg.err = fmt.Errorf("starting the tests' PostgreSQL cluster: %w", pg.err)
		}
	})
	if pg.err != nil {
		t.Fatal(pg.err)
	}
	url, err := pg.cluster.NewDatabase(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// openPG opens the PostgreSQL store at raw for the test to read what a
// command wrote there, closed when the test ends.
func openPG(t *testing.T, raw string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), postgres.Config{URL: raw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
