package server

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// BackendStats are a key backend's request counters: what a KMS backend
// needs watched (attempts, throttling, retries, latency) before a provider
// quota becomes an outage.
type BackendStats struct {
	Attempts, Throttled, Retries, Failures uint64
	LatencyCount                           uint64
	LatencyTotal, LatencyMax               time.Duration
}

// StatsSource names a backend and reads its counters.
type StatsSource struct {
	Backend string
	Read    func() BackendStats
}

// metricsHandler serves the backends' counters in the Prometheus text
// format. The full set of daemon metrics (signatures, audit, JWKS) belongs
// to the production work item; this covers the key backends.
func metricsHandler(sources []StatsSource) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		type series struct {
			name, help, kind string
			value            func(BackendStats) string
		}
		all := []series{
			{"cardsign_backend_attempts_total", "Requests sent to the key backend, retries included.", "counter", func(s BackendStats) string { return fmt.Sprint(s.Attempts) }},
			{"cardsign_backend_throttled_total", "Backend requests answered with throttling.", "counter", func(s BackendStats) string { return fmt.Sprint(s.Throttled) }},
			{"cardsign_backend_retries_total", "Backend requests that retried an earlier one.", "counter", func(s BackendStats) string { return fmt.Sprint(s.Retries) }},
			{"cardsign_backend_failures_total", "Backend operations that failed after retries.", "counter", func(s BackendStats) string { return fmt.Sprint(s.Failures) }},
			{"cardsign_backend_request_seconds_sum", "Total time of backend requests.", "counter", func(s BackendStats) string { return fmt.Sprint(s.LatencyTotal.Seconds()) }},
			{"cardsign_backend_request_seconds_count", "Number of timed backend requests.", "counter", func(s BackendStats) string { return fmt.Sprint(s.LatencyCount) }},
			{"cardsign_backend_request_seconds_max", "Longest backend request so far.", "gauge", func(s BackendStats) string { return fmt.Sprint(s.LatencyMax.Seconds()) }},
		}
		stats := make([]BackendStats, len(sources))
		for i, src := range sources {
			stats[i] = src.Read()
		}
		for _, m := range all {
			fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.kind)
			for i, src := range sources {
				fmt.Fprintf(&b, "%s{backend=%q} %s\n", m.name, src.Backend, m.value(stats[i]))
			}
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(b.String()))
	})
}
