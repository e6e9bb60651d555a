package loadgen

import (
	"sync"
	"sync/atomic"
	"time"
)

// Hooks are called by Run around its measurement window: Start just before
// the window opens (after the warm-up), End just after it closes, both from
// Run's goroutine. Either may be nil.
type Hooks struct {
	Start func()
	End   func()
}

// A call makes one request from worker w and reports the response bytes and
// the status (HTTP status code, or 0 for gRPC).
type call func(w int) (n int, status int, err error)

const (
	phaseWarm = iota
	phaseMeasure
	phaseStop
)

// run keeps conc workers calling f for warmup+dur and returns what
// completed inside the dur window.
func run(conc int, warmup, dur time.Duration, h Hooks, f call) *Result {
	var (
		phase atomic.Int32
		wg    sync.WaitGroup
		mu    sync.Mutex
		res   = &Result{Statuses: map[int]int{}}
	)
	// Room for the latencies up front: no slice growth while measuring.
	capHint := 1024
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, capHint)
			var (
				errs     int
				nbytes   int64
				firstErr error
				statuses = map[int]int{}
			)
			for {
				p := phase.Load()
				if p == phaseStop {
					break
				}
				t := time.Now()
				n, st, err := f(w)
				d := time.Since(t)
				if phase.Load() != phaseMeasure {
					if err != nil && p == phaseWarm {
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				if err != nil {
					errs++
					if firstErr == nil {
						firstErr = err
					}
					time.Sleep(10 * time.Millisecond) // no tight loop on a failing server
					continue
				}
				statuses[st]++
				nbytes += int64(n)
				lat = append(lat, d)
			}
			mu.Lock()
			res.Latencies = append(res.Latencies, lat...)
			res.Errors += errs
			res.Bytes += nbytes
			if res.FirstErr == nil {
				res.FirstErr = firstErr
			}
			for k, v := range statuses {
				res.Statuses[k] += v
			}
			mu.Unlock()
		}()
	}
	time.Sleep(warmup)
	if h.Start != nil {
		h.Start()
	}
	start := time.Now()
	phase.Store(phaseMeasure)
	time.Sleep(dur)
	phase.Store(phaseStop)
	res.Elapsed = time.Since(start)
	if h.End != nil {
		h.End()
	}
	wg.Wait()
	res.finish()
	return res
}
