// Package loadgen is the load generator of scripts/bench: a cheap gRPC
// SignCard client (pre-marshalled request bytes, several connections, no
// decoding of responses), a keep-alive HTTP/1.1 client that writes one
// pre-built request and reads only the status line and Content-Length, a
// bare net/http handler serving fixed bytes to compare the daemon's JWKS
// with, and readers of a process's CPU time and RSS from /proc.
package loadgen

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"
)

// Result is what one load run measured, over its measurement window only
// (the warm-up is not counted).
type Result struct {
	N         int           // successful calls completed in the window
	Errors    int           // failed calls in the window
	Bytes     int64         // response bytes received in the window (message or body)
	Elapsed   time.Duration // length of the window
	Latencies []time.Duration
	FirstErr  error
	Statuses  map[int]int // HTTP only: status code → count
}

// Rate is successful calls per second.
func (r *Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.N) / r.Elapsed.Seconds()
}

// Percentile returns the q-th percentile (0–100) of the latencies, which
// must be sorted (the load functions sort them).
func (r *Result) Percentile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(float64(len(r.Latencies)-1) * q / 100)
	return r.Latencies[i]
}

func (r *Result) finish() {
	slices.Sort(r.Latencies)
	r.N = len(r.Latencies)
}

// ProcCPU returns the user+system CPU time of process pid, in clock ticks,
// from fields 14 and 15 of /proc/<pid>/stat.
func ProcCPU(pid int) (ticks int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

func parseStatCPU(b []byte) (int64, error) {
	// The command name (field 2) is in parentheses and may itself hold
	// spaces and parentheses: fields are counted after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat: no command name")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name", len(f))
	}
	u, err := strconv.ParseInt(string(f[11]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc stat utime: %v", err)
	}
	s, err := strconv.ParseInt(string(f[12]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc stat stime: %v", err)
	}
	return u + s, nil
}

// ProcRSS returns the resident set size of process pid in KiB (VmRSS in
// /proc/<pid>/status).
func ProcRSS(pid int) (kib int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := bytes.Fields(v)
			if len(f) < 1 {
				break
			}
			return strconv.ParseInt(string(f[0]), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// RSSSampler samples a process's RSS every interval until Stop.
type RSSSampler struct {
	stop    chan struct{}
	done    chan struct{}
	Samples []int64 // KiB, in order; valid after Stop
}

// SampleRSS starts sampling pid's RSS now and then every interval.
func SampleRSS(pid int, interval time.Duration) *RSSSampler {
	s := &RSSSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if v, err := ProcRSS(pid); err == nil {
				s.Samples = append(s.Samples, v)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop takes one last sample and stops the sampler.
func (s *RSSSampler) Stop(pid int) {
	close(s.stop)
	<-s.done
	if v, err := ProcRSS(pid); err == nil {
		s.Samples = append(s.Samples, v)
	}
}
