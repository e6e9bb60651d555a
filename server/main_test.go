package server

import (
	"os"
	"testing"
)

// TestMain closes the PostgreSQL cluster onBothStores started, if any (its
// watchdog would remove it anyway when the binary exits).
func TestMain(m *testing.M) {
	code := m.Run()
	if pgCluster != nil {
		pgCluster.Close()
	}
	os.Exit(code)
}
