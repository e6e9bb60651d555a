package witnesstest

import "syscall"

// sysProcAttr kills the processes a test starts when the test binary dies
// without running its cleanups (a timeout's panic, a kill).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
