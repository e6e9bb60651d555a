//go:build unix

package daemon

import (
	"fmt"
	"syscall"
)

// raiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit and
// returns the result. Each connection holds a descriptor: at the usual soft
// limit of 1024, a few hundred idle connections stop signing (the database
// and key files cannot be opened) and the JWKS. Go raises the soft limit
// itself at start on Linux since 1.19; doing it here too makes it explicit,
// works whatever started the process, and gives the value to log and to
// derive the connection limits from.
func raiseFileLimit() (cur, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur < lim.Max {
		want := lim
		want.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return uint64(lim.Cur), uint64(lim.Max), fmt.Errorf("setrlimit RLIMIT_NOFILE to %d: %w", lim.Max, err)
		}
		lim = want
	}
	return uint64(lim.Cur), uint64(lim.Max), nil
}
