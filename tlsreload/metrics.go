package tlsreload

import "github.com/prometheus/client_golang/prometheus"

// Collector exports the serving certificate's expiry and the reload counts
// as Prometheus metrics.
func (r *Reloader) Collector() prometheus.Collector {
	return tlsMetrics{r: r,
		expiry:   prometheus.NewDesc("cardsign_tls_certificate_expiry_timestamp_seconds", "NotAfter of the serving certificate.", nil, nil),
		reloads:  prometheus.NewDesc("cardsign_tls_reloads_total", "TLS file reloads that changed the served material.", nil, nil),
		failures: prometheus.NewDesc("cardsign_tls_reload_failures_total", "TLS file reloads that failed (the previous material kept serving).", nil, nil),
	}
}

// tlsMetrics reads its Reloader at each scrape.
type tlsMetrics struct {
	r                         *Reloader
	expiry, reloads, failures *prometheus.Desc
}

// Describe sends the three descriptions.
func (m tlsMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.expiry
	ch <- m.reloads
	ch <- m.failures
}

// Collect reads the current values.
func (m tlsMetrics) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(m.expiry, prometheus.GaugeValue, float64(m.r.Leaf().NotAfter.Unix()))
	ch <- prometheus.MustNewConstMetric(m.reloads, prometheus.CounterValue, float64(m.r.Reloads()))
	ch <- prometheus.MustNewConstMetric(m.failures, prometheus.CounterValue, float64(m.r.Failures()))
}
