package events

import (
	"context"
	"sync"
	"time"
)

// sinkRun is one sink's delivery state, which Stats reports.
type sinkRun struct {
	cfg  SinkConfig
	wake chan struct{}

	mu          sync.Mutex
	cursor      int64
	movedAt     time.Time
	oldest      time.Time // the oldest record not yet delivered, when known
	sent        int64
	failures    int64
	lastSuccess time.Time
	lastError   string

	// The last log checkpoint sent (its size, when) and the last error
	// sending one; only the sink's own loop reads and writes them.
	cpSize int64
	cpAt   time.Time
	cpErr  string
}

func (s *sinkRun) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-s.wake:
	}
	return true
}

func (s *sinkRun) moved(seq int64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cursor, s.movedAt = seq, at
}

func (s *sinkRun) pending(oldest time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oldest = oldest
}

func (s *sinkRun) delivered(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent += int64(n)
	if n > 0 {
		s.lastSuccess = time.Now()
	}
}

func (s *sinkRun) failed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures++
	s.lastError = err.Error()
}

// SinkStats is one sink's delivery as this process saw it.
type SinkStats struct {
	Name   string
	Cursor int64 // the last record delivered (or skipped by the filter)
	// Oldest is the time of the oldest record not yet delivered, zero when
	// the sink is caught up (as of its last look).
	Oldest      time.Time
	Delivered   int64 // events delivered by this process
	Failures    int64 // failed deliveries by this process
	LastSuccess time.Time
	LastError   string
}

// Stats returns every sink's stats, in configuration order.
func (d *Deliverer) Stats() []SinkStats {
	out := make([]SinkStats, len(d.sinks))
	for i, s := range d.sinks {
		s.mu.Lock()
		out[i] = SinkStats{Name: s.cfg.Name, Cursor: s.cursor, Oldest: s.oldest, Delivered: s.sent, Failures: s.failures,
			LastSuccess: s.lastSuccess, LastError: s.lastError}
		s.mu.Unlock()
	}
	return out
}

// Names returns the sinks' names, in configuration order.
func (d *Deliverer) Names() []string {
	out := make([]string, len(d.sinks))
	for i, s := range d.sinks {
		out[i] = s.cfg.Name
	}
	return out
}
