package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/buildinfo"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/server/httpapi"
	"github.com/cardsign/cardsign/signer"
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

// Label value for a key whose backend is not known.
const noLabel = "none"

// Results of a signing request, the "result" label.
const (
	resultSigned      = "signed"       // signed and audited
	resultRefused     = "refused"      // the signing policy refused the card
	resultHeld        = "held"         // a signing policy rule holds the card for approval
	resultInvalid     = "invalid"      // the card failed parsing or lint
	resultRateLimited = "rate_limited" // the caller was over its rate
	resultError       = "error"        // anything else: backend, audit, deadline
)

// Metrics is the daemon's Prometheus registry. It is a value owned by the
// daemon, not the process-wide default registry, so tests can run several.
type Metrics struct {
	reg *prometheus.Registry

	signatures   *prometheus.CounterVec
	signRequests *prometheus.CounterVec
	signDuration *prometheus.HistogramVec
	backendSign  *prometheus.HistogramVec
	auditCommit  prometheus.Histogram
	jwksRequests *prometheus.CounterVec
	rateLimited  *prometheus.CounterVec
	rpcs         *prometheus.CounterVec
	canaryRuns   *prometheus.CounterVec
	ready        prometheus.Gauge

	connections        *prometheus.GaugeVec
	connectionsRefused *prometheus.CounterVec
	authFailures       *prometheus.CounterVec
	registryResigns    *prometheus.CounterVec
	approvals          *prometheus.CounterVec
	registryStale      prometheus.Gauge
	catalogSignatures  *prometheus.CounterVec
	catalogSigner      prometheus.Gauge
	dutiesHeld         prometheus.Gauge

	// The series observed on every call, resolved once per label values:
	// WithLabelValues hashes the values and locks the vector each time.
	rpcSeries       seriesCache[[2]string, prometheus.Counter] // method, code
	requestSeries   seriesCache[[2]string, prometheus.Counter] // result, caller
	signatureSeries seriesCache[[4]string, prometheus.Counter] // result, alg, backend, caller
	durationSeries  seriesCache[string, prometheus.Observer]   // result
}

// seriesCache holds the series of a vector already resolved, by label
// values. The vectors' series are never deleted, so a cached series stays
// the one exported; the label values are bounded as the vector's are
// (methods and codes, results, configured callers, keys' algorithms and
// backends).
type seriesCache[K comparable, V any] struct {
	mu     sync.RWMutex
	series map[K]V
}

// get returns the series of k, resolving it with resolve the first time.
func (c *seriesCache[K, V]) get(k K, resolve func(K) V) V {
	c.mu.RLock()
	v, ok := c.series[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = resolve(k)
	c.mu.Lock()
	if c.series == nil {
		c.series = map[K]V{}
	}
	c.series[k] = v
	c.mu.Unlock()
	return v
}

// Latency buckets from 100 µs (a file key) to 10 s (a KMS under retry),
// 1-2.5-5 per decade. Literal values, not a generator's: computed buckets
// print as le="0.0025000000000000005", which dashboards and recording rules
// then have to match exactly. A function, so no caller can change them.
func latencyBuckets() []float64 {
	return []float64{
		0.0001, 0.00025, 0.0005,
		0.001, 0.0025, 0.005,
		0.01, 0.025, 0.05,
		0.1, 0.25, 0.5,
		1, 2.5, 5, 10,
	}
}

// preset lists the label values of the counters and histograms that alert
// rules read, exported at 0 from the start: rate() and increase() see no
// change in a series that appears with its first event, so the first
// signing error after a restart would otherwise go unnoticed.
type presetLabels struct {
	signResults, readiness, resigns, catalogKinds, authMethods []string
}

// preset returns the label values exported at 0 (a function: no
// package-level state).
func preset() presetLabels {
	return presetLabels{
		// signDuration's results: rate_limited calls are refused before
		// SignCard runs, so they are counted in sign_requests only.
		signResults:  []string{resultSigned, resultRefused, resultHeld, resultInvalid, resultError},
		readiness:    []string{"ok", "failed"},
		resigns:      []string{"resigned", "superseded", "failed"},
		catalogKinds: []string{"manifest", "snapshot"},
		// Credentials other than identity tokens are refused for one reason,
		// "unknown"; identity tokens' reasons are the verifier's, not listed.
		authMethods: []string{"token", "cert", "none"},
	}
}

// NewMetrics registers the daemon's metrics, the Go runtime's and the
// process's (goroutines, memory, file descriptors).
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		signatures: newCounterVec("cardsign_signatures_total",
			"Signatures made, by result (signed: returned with its audit record; discarded: its audit record was not committed), key alg, key backend and caller (the configured token or client pattern).", "result", "alg", "backend", "caller"),
		signRequests: newCounterVec("cardsign_sign_requests_total",
			"SignCard requests by result (signed, refused by the signing policy, invalid card, rate_limited, error) and caller.", "result", "caller"),
		signDuration: newHistogramVec("cardsign_sign_duration_seconds",
			"SignCard latency end to end (parse, lint, policy, signatures, audit commit), by result.", "result"),
		backendSign: newHistogramVec("cardsign_backend_sign_duration_seconds",
			"Time a key backend took for one signature, waiting for a concurrency slot included, by backend and alg.", "backend", "alg"),
		auditCommit: newHistogram("cardsign_audit_commit_duration_seconds",
			"Time from handing a request's audit records to the log until they were durable."),
		jwksRequests: newCounterVec("cardsign_jwks_requests_total",
			"Requests for the published documents, by document (jwks, revocations, did) and HTTP status (304 = not modified).", "document", "code"),
		rateLimited: newCounterVec("cardsign_rate_limited_total",
			"Calls refused with RESOURCE_EXHAUSTED because the caller was over its rate.", "caller"),
		rpcs: newCounterVec("cardsign_grpc_requests_total",
			"gRPC calls by method and status code.", "method", "code"),
		canaryRuns: newCounterVec("cardsign_readiness_checks_total",
			"Periodic readiness checks (a canary signature with every signing key), by result (ok, failed).", "result"),
		ready: newGauge("cardsign_ready",
			"1 when the last readiness check passed, else 0."),
		connections: newGaugeVec("cardsign_connections",
			"Open connections by listener (grpc, http), counted against limits.max_connections.", "listener"),
		connectionsRefused: newCounterVec("cardsign_connections_refused_total",
			"Connections closed as soon as accepted, by listener and the limit they were over (total: limits.max_connections; per_ip: limits.max_connections_per_ip).", "listener", "reason"),
		authFailures: newCounterVec("cardsign_auth_failures_total",
			"Calls refused as unauthenticated, by credential (token: a bearer that is no configured token and no identity token; oidc: an identity token; cert; none) and reason (for oidc, the verifier's check: expired, audience, unknown_kid, alg, ...; else \"unknown\").", "method", "reason"),
		registryResigns: newCounterVec("cardsign_registry_resigns_total",
			"Registered cards signed again by the registry after a key event, by result (resigned; superseded: registered again or removed meanwhile; failed: retried at the next duty round).", "result"),
		registryStale: newGauge("cardsign_registry_stale_cards",
			"Registered cards not carrying signatures by exactly the current signing keys after the last re-signing round (alert when above 0 for long)."),
		catalogSignatures: newCounterVec("cardsign_catalog_signatures_total",
			"AI Catalog signatures made by this replica (audited and logged), by kind (manifest: an entry's Trust Manifest; snapshot: the catalog signature).", "kind"),
		catalogSigner: newGauge("cardsign_catalog_signer",
			"1 when an ES256 (P-256) key can sign the AI Catalog, 0 when none is active or pending (the catalog route answers 503); set by the duties lease holder."),
		approvals: newCounterVec("cardsign_approvals_total",
			"Steps of signatures held for approval by a signing policy rule, on this replica, by step (requested: a card held; approved, denied: an approver's vote; refused: a vote refused, by role, group, requester or a closed request).", "step"),
		dutiesHeld: newGauge("cardsign_duties_lease_held",
			"1 while this replica holds the duties lease (it re-signs the revocation document, re-signs registered cards, publishes the AI Catalog), else 0; one replica of a cluster should hold it."),
	}
	m.reg.MustRegister(m.signatures, m.signRequests, m.signDuration, m.backendSign, m.auditCommit, m.jwksRequests,
		m.rateLimited, m.rpcs, m.canaryRuns, m.ready, m.connections, m.connectionsRefused, m.authFailures, m.registryResigns, m.registryStale,
		m.catalogSignatures, m.catalogSigner, m.dutiesHeld, m.approvals,
		newBuildInfo(buildinfo.Read()),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.presetSeries()
	return m
}

// presetSeries creates the series of preset at 0.
func (m *Metrics) presetSeries() {
	p := preset()
	for _, r := range p.signResults {
		m.signDuration.WithLabelValues(r)
	}
	for _, r := range p.readiness {
		m.canaryRuns.WithLabelValues(r)
	}
	for _, r := range p.resigns {
		m.registryResigns.WithLabelValues(r)
	}
	for _, step := range []string{"requested", "approved", "denied", "refused"} {
		m.approvals.WithLabelValues(step)
	}
	for _, k := range p.catalogKinds {
		m.catalogSignatures.WithLabelValues(k)
	}
	for _, method := range p.authMethods {
		m.authFailures.WithLabelValues(method, "unknown")
	}
}

// newBuildInfo is the cardsign_build_info gauge: always 1, its labels say
// which build is running, so a dashboard can show versions across replicas
// and a query can join them to other series.
func newBuildInfo(in buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cardsign_build_info",
		Help: "Always 1; the labels name the running build: module version, VCS revision (empty without VCS stamping; modified: the tree had changes), Go version, platform and build tags.",
		ConstLabels: prometheus.Labels{
			"version":   in.Version,
			"revision":  in.Revision,
			"modified":  strconv.FormatBool(in.Modified),
			"goversion": in.GoVersion,
			"platform":  in.Platform,
			"tags":      strings.Join(in.Tags, ","),
		},
	})
	g.Set(1)
	return g
}

// newCounterVec, newGauge, newGaugeVec, newHistogram and newHistogramVec
// make the daemon's metrics: a name, its help and its labels; latencies in
// latencyBuckets.
func newCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func newGauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

func newGaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func newHistogram(name, help string) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets()})
}

func newHistogramVec(name, help string, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets()}, labels)
}

// Register adds collectors owned by other parts of the daemon (TLS reloads).
func (m *Metrics) Register(cs ...prometheus.Collector) { m.reg.MustRegister(cs...) }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

var keysDesc = prometheus.NewDesc("cardsign_keys", "Keys by lifecycle state.", []string{"state"}, nil)

// keysCollector reports the number of keys in each lifecycle state, derived
// at scrape time from the cached key records.
type keysCollector struct {
	a    *Authority
	desc *prometheus.Desc
}

func (c keysCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c keysCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	views, err := c.a.keys.views(ctx, c.a.now())
	if err != nil {
		return // the store is down; readiness says so
	}
	counts := map[jwks.State]int{}
	for _, v := range views {
		counts[v.State]++
	}
	for _, s := range []jwks.State{jwks.StateScheduled, jwks.StatePending, jwks.StateActive, jwks.StateRetired, jwks.StateExpired, jwks.StateRevoked} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

// backendCollector exports a key backend's own counters.
type backendCollector struct{ sources []StatsSource }

var backendDescs = struct {
	attempts, throttled, retries, failures, latSum, latCount, latMax *prometheus.Desc
}{
	attempts:  prometheus.NewDesc("cardsign_backend_attempts_total", "Requests sent to the key backend, retries included.", []string{"backend"}, nil),
	throttled: prometheus.NewDesc("cardsign_backend_throttled_total", "Backend requests answered with throttling.", []string{"backend"}, nil),
	retries:   prometheus.NewDesc("cardsign_backend_retries_total", "Backend requests that retried an earlier one.", []string{"backend"}, nil),
	failures:  prometheus.NewDesc("cardsign_backend_failures_total", "Backend operations that failed after retries.", []string{"backend"}, nil),
	latSum:    prometheus.NewDesc("cardsign_backend_request_seconds_sum", "Total time of backend requests.", []string{"backend"}, nil),
	latCount:  prometheus.NewDesc("cardsign_backend_request_seconds_count", "Number of timed backend requests.", []string{"backend"}, nil),
	latMax:    prometheus.NewDesc("cardsign_backend_request_seconds_max", "Longest backend request so far.", []string{"backend"}, nil),
}

func (c backendCollector) Describe(ch chan<- *prometheus.Desc) {
	d := backendDescs
	for _, x := range []*prometheus.Desc{d.attempts, d.throttled, d.retries, d.failures, d.latSum, d.latCount, d.latMax} {
		ch <- x
	}
}

func (c backendCollector) Collect(ch chan<- prometheus.Metric) {
	d := backendDescs
	for _, src := range c.sources {
		s := src.Read()
		counter := func(desc *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, src.Backend)
		}
		counter(d.attempts, float64(s.Attempts))
		counter(d.throttled, float64(s.Throttled))
		counter(d.retries, float64(s.Retries))
		counter(d.failures, float64(s.Failures))
		counter(d.latSum, s.LatencyTotal.Seconds())
		counter(d.latCount, float64(s.LatencyCount))
		ch <- prometheus.MustNewConstMetric(d.latMax, prometheus.GaugeValue, s.LatencyMax.Seconds(), src.Backend)
	}
}

// AuthFailed counts a refused authentication: an identity token by the
// verifier's reason, anything else by what was presented.
func (m *Metrics) AuthFailed(creds access.Credentials, err error) { m.authFailed(creds, err) }

func (m *Metrics) authFailed(creds access.Credentials, err error) {
	if m == nil {
		return
	}
	if e, ok := errors.AsType[*access.IDTokenError](err); ok {
		m.authFailures.WithLabelValues("oidc", e.Reason).Inc()
		return
	}
	method := "none"
	switch {
	case creds.Authorization != "":
		method = "token"
	case creds.CertIdentity != "":
		method = "cert"
	}
	m.authFailures.WithLabelValues(method, "unknown").Inc()
}

// RateLimited counts a call refused over its caller's rate; sign says it
// was a signing request, counted among those too.
func (m *Metrics) RateLimited(principal string, sign bool) {
	m.rateLimited.WithLabelValues(principal).Inc()
	if sign {
		m.signRequest(resultRateLimited, principal)
	}
}

// signRequest counts a signing request by result and caller.
func (m *Metrics) signRequest(result, principal string) {
	m.requestSeries.get([2]string{result, principal}, func(k [2]string) prometheus.Counter {
		return m.signRequests.WithLabelValues(k[0], k[1])
	}).Inc()
}

// signed times a signing request by result.
func (m *Metrics) signed(result string, d time.Duration) {
	m.durationSeries.get(result, func(r string) prometheus.Observer {
		return m.signDuration.WithLabelValues(r)
	}).Observe(d.Seconds())
}

// dutiesLeaseHeld records whether this replica holds the duties lease
// after a duty round.
func (m *Metrics) dutiesLeaseHeld(held bool) {
	v := 0.0
	if held {
		v = 1
	}
	m.dutiesHeld.Set(v)
}

// RPC counts a finished gRPC call by method and status code.
func (m *Metrics) RPC(method, code string) {
	m.rpcSeries.get([2]string{method, code}, func(k [2]string) prometheus.Counter {
		return m.rpcs.WithLabelValues(k[0], k[1])
	}).Inc()
}

// ListenerCounters are a listener's connection counters (httpapi.LimitListener).
func (m *Metrics) ListenerCounters(listener string) (open httpapi.Gauge, refusedTotal, refusedPerIP httpapi.Counter) {
	return m.connections.WithLabelValues(listener),
		m.connectionsRefused.WithLabelValues(listener, httpapi.RefusedTotal),
		m.connectionsRefused.WithLabelValues(listener, httpapi.RefusedPerIP)
}

// countSignatures counts a result's signatures (none for nil) as returned
// ("signed") or made and then dropped ("discarded"), by key and backend.
func (m *Metrics) countSignatures(outcome string, res *signer.Result, principal string, backendOf func(kid string) string) {
	if res == nil {
		return
	}
	for _, s := range res.Signatures {
		m.signatureSeries.get([4]string{outcome, string(s.Alg), backendOf(s.KID), principal}, func(k [4]string) prometheus.Counter {
			return m.signatures.WithLabelValues(k[0], k[1], k[2], k[3])
		}).Inc()
	}
}
