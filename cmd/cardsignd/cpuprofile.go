package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names a file to write the daemon's CPU profile to, from
// start to shutdown: a developer's knob for profiling the daemon under a
// real load (scripts/bench, internal/loadgen), not an operator's setting.
// It does nothing unless set; when set, a file that cannot be created stops
// the start, so that a profiling run never goes unprofiled by mistake.
const cpuProfileEnv = "CARDSIGND_CPUPROFILE"

// startCPUProfile starts the profile cpuProfileEnv asks for and returns
// what stops it and closes the file (a no-op when the variable is unset).
func startCPUProfile(getenv func(string) string) (stop func(), err error) {
	path := getenv(cpuProfileEnv)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
