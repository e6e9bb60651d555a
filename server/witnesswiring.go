package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/witness"
)

// Witness wait modes (Config.WitnessWait.Mode, log.witness_wait.mode).
const (
	WitnessWaitNone    = "none"
	WitnessWaitWait    = "wait"
	WitnessWaitRequire = "require"
)

// WitnessWait is what signing does until a checkpoint that includes its
// signatures carries the witnesses' quorum.
type WitnessWait struct {
	Mode    string        // WitnessWaitNone, WitnessWaitWait (the default) or WitnessWaitRequire
	Timeout time.Duration // the longest a sign waits (default 3s)
}

// witnessing is the authority's side of the log's witnesses: the replica
// holding the duties lease runs the collector, which asks them to cosign
// each new checkpoint and stores their cosignatures; every replica reads
// them (the witnessed view) to serve the cosigned checkpoint and to put it
// in the proofs it returns.
type witnessing struct {
	view      *transparency.Witnessed
	collector *witness.Collector
	wait      WitnessWait
	metrics   *witnessMetrics
	log       *slog.Logger

	// conflict is the last split-view alarm a witness raised here, for
	// /readyz's details.
	conflict atomic.Pointer[witness.ConflictError]

	mu   sync.Mutex
	stop context.CancelFunc // the collector's run, while this replica leads
	done chan struct{}      // closed when that run returns
}

// newWitnessing wires the witnesses of cfg over the log cp and st.
func newWitnessing(cfg Config, cp *transparency.Checkpointer, st transparency.CosignatureReader, colStore witness.Store, m *Metrics, log *slog.Logger) (*witnessing, error) {
	w := &witnessing{wait: cfg.WitnessWait, log: log}
	if w.wait.Mode == "" {
		w.wait.Mode = WitnessWaitWait
	}
	if w.wait.Timeout <= 0 {
		w.wait.Timeout = 3 * time.Second
	}
	w.view = transparency.NewWitnessed(cp, st, cfg.WitnessPolicy)
	w.metrics = newWitnessMetrics(cfg.WitnessPolicy.Names(), w.view)
	m.Register(w.metrics)
	c, err := witness.NewCollector(cp, colStore, cfg.Witnesses, cfg.WitnessPolicy, witness.Options{
		RequestTimeout: cfg.WitnessTimeout, Logger: log, Observer: witnessObserver{w},
	})
	if err != nil {
		return nil, fmt.Errorf("log witnesses: %w", err)
	}
	w.collector = c
	return w, nil
}

// lead starts the collector when this replica holds the duties lease and
// stops it when it does not: one replica at a time asks the witnesses.
func (w *witnessing) lead(ctx context.Context, leader bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done != nil {
		select {
		case <-w.done: // the run ended (its context, or it failed): start again if still leading
			w.stop, w.done = nil, nil
		default:
		}
	}
	switch {
	case leader && w.stop == nil:
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		w.stop, w.done = cancel, done
		go func() {
			defer close(done)
			// Stop with the duties' context too.
			stop := context.AfterFunc(ctx, cancel)
			defer stop()
			if err := w.collector.Run(rctx); err != nil && rctx.Err() == nil {
				w.log.Error("log witnesses: the collector stopped; it starts again at the next duties round", "err", err)
			}
		}()
		w.log.Info("log witnesses: this replica asks the witnesses to cosign the log's checkpoints (it holds the duties lease)")
	case !leader && w.stop != nil:
		w.stopLocked()
		w.log.Info("log witnesses: this replica no longer asks the witnesses (it does not hold the duties lease)")
	}
}

// stopLocked stops the collector's run and waits until it has returned
// (its requests in flight end within the request timeout), so that a new
// run never overlaps it and nothing writes after the authority stops; w.mu
// is held.
func (w *witnessing) stopLocked() {
	if w.stop == nil {
		return
	}
	w.stop()
	<-w.done
	w.stop, w.done = nil, nil
}

// halt stops the collector, at the end of the duties.
func (w *witnessing) halt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopLocked()
}

// committed tells the collector the log grew here.
func (w *witnessing) committed([]audit.Record) { w.collector.Wake() }

// proofs returns the proofs of committed records, witnessed as the wait
// mode asks.
func (w *witnessing) proofs(ctx context.Context, committed []audit.Record) ([]transparency.Proof, error) {
	return w.proofsIn(ctx, committed, w.wait.Mode)
}

// resignProofs are the proofs of the registry's re-signatures: never
// waited for (mode none), so that a re-signing pass after a key event is
// not held back a witness round per card, nor refused after its commit.
func (w *witnessing) resignProofs(ctx context.Context, committed []audit.Record) ([]transparency.Proof, error) {
	return w.proofsIn(ctx, committed, WitnessWaitNone)
}

func (w *witnessing) proofsIn(ctx context.Context, committed []audit.Record, mode string) ([]transparency.Proof, error) {
	var deadline time.Time
	if mode != WitnessWaitNone {
		deadline = time.Now().Add(w.wait.Timeout)
	}
	ps, witnessed, err := w.view.Proofs(ctx, committed, deadline)
	if err != nil || witnessed {
		return ps, err
	}
	w.metrics.unwitnessed.WithLabelValues(mode).Inc()
	p := w.view.Policy()
	var vouched []string
	if len(ps) > 0 {
		for _, v := range p.Vouches(ps[0].Checkpoint) {
			vouched = append(vouched, v.Witness)
		}
	}
	first := committed[0].Seq
	switch mode {
	case WitnessWaitRequire:
		return nil, &WitnessQuorumError{Quorum: p.Quorum, Witnesses: p.Names(), Vouched: vouched, Waited: w.wait.Timeout, Seq: first}
	case WitnessWaitWait:
		w.log.Warn("log witnesses: returning a proof without the witnesses' quorum (log.witness_wait.timeout passed)",
			"audit_seq", first, "quorum", p.Quorum, "vouched", vouched, "waited", w.wait.Timeout)
	}
	return ps, nil
}

// WitnessQuorumError refuses a signature whose checkpoint did not reach the
// witnesses' quorum in time (log.witness_wait.mode require). The signature
// is in the audit log and the transparency log; it is not returned.
type WitnessQuorumError struct {
	Quorum    int
	Witnesses []string
	Vouched   []string
	Waited    time.Duration
	Seq       int64 // the first signature's audit record
}

func (e *WitnessQuorumError) Error() string {
	vouched := "none"
	if len(e.Vouched) > 0 {
		vouched = strings.Join(e.Vouched, ", ")
	}
	return fmt.Sprintf("the log's witnesses did not cosign a checkpoint with this signature within %s (quorum %d of %s; vouched: %s): "+
		"the signature was made and logged (audit record %d) but is not returned (log.witness_wait.mode require); retry, and check the witnesses",
		e.Waited, e.Quorum, strings.Join(e.Witnesses, ", "), vouched, e.Seq)
}

// Unwrap makes the refusal an unavailability (UNAVAILABLE: retry).
func (e *WitnessQuorumError) Unwrap() error { return errWitnessesUnavailable }

var errWitnessesUnavailable = errors.New("log witnesses unavailable")

// alarm is the last split-view alarm, for /readyz ("" when none).
func (w *witnessing) alarm() string {
	c := w.conflict.Load()
	if c == nil {
		return ""
	}
	return fmt.Sprintf("witness %q refused the log's checkpoint of size %d as inconsistent with one it saw (size %d): a split view? see the log and cardsign log monitor", c.Witness, c.Size, c.Known)
}

// witnessObserver is the collector's Observer: metrics, alarms, and waking
// the signers that wait for cosignatures.
type witnessObserver struct{ w *witnessing }

func (o witnessObserver) Answered(name string, size int64, latency time.Duration, err error) {
	m := o.w.metrics
	outcome := "cosigned"
	switch {
	case err == nil:
		m.cosignedSize.WithLabelValues(name).Set(float64(size))
	case errors.Is(err, witness.ErrConflict):
		outcome = "conflict"
	case errors.Is(err, witness.ErrRefused):
		outcome = "refused"
	default:
		outcome = "failed"
	}
	m.requests.WithLabelValues(name, outcome).Inc()
	m.duration.WithLabelValues(name).Observe(latency.Seconds())
}

func (o witnessObserver) Conflict(c *witness.ConflictError) {
	o.w.metrics.conflicts.WithLabelValues(c.Witness).Inc()
	o.w.conflict.Store(c)
	o.w.log.Error("log witnesses: SPLIT VIEW ALARM: a witness refuses the log's checkpoint as inconsistent with one it saw under the same origin and key",
		"witness", c.Witness, "size", c.Size, "witness_size", c.Known, "detail", c.Detail)
}

func (o witnessObserver) Stored(size int64) { o.w.view.Stored(size) }

// witnessMetrics are the witnesses' series (docs/monitoring.md).
type witnessMetrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	cosignedSize *prometheus.GaugeVec
	conflicts    *prometheus.CounterVec
	unwitnessed  *prometheus.CounterVec
	witnessed    prometheus.GaugeFunc
}

func newWitnessMetrics(names []string, view *transparency.Witnessed) *witnessMetrics {
	m := &witnessMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardsign_witness_requests_total",
			Help: "add-checkpoint requests to each log witness by outcome (cosigned, conflict, refused, failed), made by the duties lease holder"}, []string{"witness", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cardsign_witness_request_duration_seconds",
			Help: "time a log witness took to answer add-checkpoint", Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}, []string{"witness"}),
		cosignedSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cardsign_witness_cosigned_size",
			Help: "the largest log size each witness cosigned for this replica"}, []string{"witness"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardsign_witness_conflicts_total",
			Help: "split-view alarms: a witness refused the log's checkpoint as inconsistent with one it saw"}, []string{"witness"}),
		unwitnessed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardsign_log_unwitnessed_proofs_total",
			Help: "proofs returned (or refused, mode require) whose checkpoint lacked the witnesses' quorum, by log.witness_wait.mode"}, []string{"mode"}),
	}
	m.witnessed = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cardsign_log_witnessed_size",
		Help: "the largest log size whose checkpoint a quorum of witnesses cosigned, as this replica last read it"},
		func() float64 { return float64(view.WitnessedSize()) })
	for _, n := range names {
		for _, o := range []string{"cosigned", "conflict", "refused", "failed"} {
			m.requests.WithLabelValues(n, o)
		}
		m.duration.WithLabelValues(n)
		m.cosignedSize.WithLabelValues(n)
		m.conflicts.WithLabelValues(n)
	}
	for _, mode := range []string{WitnessWaitNone, WitnessWaitWait, WitnessWaitRequire} {
		m.unwitnessed.WithLabelValues(mode)
	}
	return m
}

// Describe and Collect make witnessMetrics one prometheus.Collector.
func (m *witnessMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect collects every witness series.
func (m *witnessMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *witnessMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.duration, m.cosignedSize, m.conflicts, m.unwitnessed, m.witnessed}
}
