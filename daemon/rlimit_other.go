//go:build !unix

package daemon

// raiseFileLimit: no RLIMIT_NOFILE here; 0 means unknown.
func raiseFileLimit() (cur, hard uint64, err error) { return 0, 0, nil }
