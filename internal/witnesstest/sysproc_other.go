//go:build !linux

package witnesstest

import "syscall"

// sysProcAttr is nil where there is no parent-death signal: the tests'
// cleanups stop the processes.
func sysProcAttr() *syscall.SysProcAttr { return nil }
