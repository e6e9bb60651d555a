package httpapi

import (
	"context"
	"fmt"
	stdlog "log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cardsign/cardsign/limits"
)

// RefusalLog writes the first burst refusals of each reason per interval
// and then, at the end of the interval, one line counting the rest. It is
// owned by its gate (or listener); there is no process-wide state.
type RefusalLog struct {
	log      *slog.Logger
	burst    int
	interval time.Duration

	mu      sync.Mutex
	windows map[string]*refusalWindow // by reason: a handful of codes
}

// refusalWindow counts one reason's refusals in one interval.
type refusalWindow struct {
	start      time.Time
	logged     int
	suppressed int
}

// NewRefusalLog logs to log at most burst refusals per reason per interval
// (0: the defaults).
func NewRefusalLog(log *slog.Logger, burst int, interval time.Duration) *RefusalLog {
	if burst <= 0 {
		burst = limits.DefaultRefusalLogBurst
	}
	if interval <= 0 {
		interval = limits.DefaultRefusalLogInterval
	}
	return &RefusalLog{log: log, burst: burst, interval: interval, windows: map[string]*refusalWindow{}}
}

// Log writes msg with args at level when the reason's budget for the
// current interval allows, and otherwise counts it for the summary.
func (r *RefusalLog) Log(ctx context.Context, level slog.Level, reason, msg string, args ...any) {
	now := time.Now()
	r.mu.Lock()
	w := r.windows[reason]
	if w == nil || now.Sub(w.start) >= r.interval {
		// The previous window's summary, if any, is its timer's job.
		w = &refusalWindow{start: now}
		r.windows[reason] = w
	}
	if w.logged < r.burst {
		w.logged++
		r.mu.Unlock()
		r.log.Log(ctx, level, msg, args...)
		return
	}
	w.suppressed++
	first := w.suppressed == 1
	r.mu.Unlock()
	if first {
		// One timer per window with suppressed lines, not a goroutine per
		// gate: the summary comes when the interval ends even if the
		// flood stops.
		time.AfterFunc(w.start.Add(r.interval).Sub(now), func() { r.summarize(reason, w) })
	}
}

func (r *RefusalLog) summarize(reason string, w *refusalWindow) {
	r.mu.Lock()
	n, logged := w.suppressed, w.logged
	w.suppressed = 0
	r.mu.Unlock()
	if n > 0 {
		r.log.Info(fmt.Sprintf("%d more refusals in the last %s", n, r.interval),
			"reason", reason, "count", n, "logged", logged, "interval", r.interval)
	}
}

// NewErrorLog returns a logger for http.Server.ErrorLog. net/http writes
// a line there for every failed TLS handshake and malformed request, which
// anyone who can connect can cause: the lines go through a refusal log's
// budget instead of straight to stderr.
func NewErrorLog(log *slog.Logger, burst int, interval time.Duration) *stdlog.Logger {
	return stdlog.New(refusalWriter{NewRefusalLog(log, burst, interval)}, "", 0)
}

type refusalWriter struct{ r *RefusalLog }

func (w refusalWriter) Write(p []byte) (int, error) {
	w.r.Log(context.Background(), slog.LevelWarn, "http-server", "HTTP listener error", "err", strings.TrimSpace(string(p)))
	return len(p), nil
}
