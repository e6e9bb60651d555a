package postgres

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/pgtest"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/storetest"
)

// cluster is the package's PostgreSQL server, started once by TestMain; each
// test makes its own database in it. Set before any test runs, read only
// after.
var cluster *pgtest.Cluster

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run is TestMain without the exit, so the cluster's Close runs.
func run(m *testing.M) int {
	c, err := pgtest.Start(context.Background(), pgtest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	cluster = c
	return m.Run()
}

// newDB returns the URL of a fresh, empty database.
func newDB(t testing.TB) string {
	t.Helper()
	url, err := cluster.NewDatabase(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	return url
}

func openT(t testing.TB, url string) *Store {
	t.Helper()
	s, err := Open(t.Context(), Config{URL: url})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func opener(url string) storetest.Opener {
	return func(ctx context.Context) (store.Store, error) {
		s, err := Open(ctx, Config{URL: url})
		if err != nil {
			return nil, err // not a typed nil in a non-nil interface
		}
		return s, nil
	}
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener { return opener(newDB(t)) })
}

func TestContractLog(t *testing.T) {
	storetest.RunLog(t, func(t *testing.T) storetest.Opener { return opener(newDB(t)) })
}

func TestContractTampering(t *testing.T) {
	storetest.RunTampering(t, func(t *testing.T) (storetest.Opener, storetest.DeleteAuditFrom) {
		url := newDB(t)
		db := dbName(t, url)
		return opener(url), func(ctx context.Context, from int64) error {
			// As the superuser, with ordinary triggers (the append-only
			// guard) off for this session, as a database administrator could.
			return cluster.SuperExec(ctx, db, fmt.Sprintf(
				`SET session_replication_role = replica; DELETE FROM audit WHERE seq >= %d`, from))
		}
	})
}

// dbName is the database a URL names.
func dbName(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}
