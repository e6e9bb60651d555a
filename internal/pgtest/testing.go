package pgtest

import "testing"

// StartT starts a cluster of t's own with opts, closed when t ends, and
// returns it with the URL of a new database on it: for a test that stops
// or restarts its server, which the shared cluster of TestMain cannot do.
// It fails t if either cannot be made.
func StartT(t testing.TB, opts Options) (*Cluster, string) {
	t.Helper()
	c, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	url, err := c.NewDatabase(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	return c, url
}
