package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardsign/cardsign/events"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/registry/catalog"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

// EventsSettings are the event sinks (Config.Events): none, no delivery.
type EventsSettings struct {
	// Source is every event's source attribute.
	Source  string
	Sinks   []events.SinkConfig
	Options events.Options
}

// DefaultEventSource is the events' source when none is configured (the
// daemon configures urn:cardsign:LOG-ORIGIN).
const DefaultEventSource = "urn:cardsign:cardsignd"

// Builder returns the events' builder for these settings.
func (s EventsSettings) Builder() events.Builder {
	return EventBuilder(s.Source)
}

// EventBuilder is the builder of the events of this authority's audit
// records, with source: the registry's re-signatures and the catalog's
// signatures told apart from a caller's.
func EventBuilder(source string) events.Builder {
	return events.Builder{Source: source, ResignCaller: registry.ResignCaller, CatalogProfile: catalog.Profile}
}

// eventing delivers the audit log's events to the sinks while this replica
// holds the duties lease, as witnessing asks the witnesses: one replica
// delivers at a time, and each cursor move is fenced by the lease.
type eventing struct {
	d     *events.Deliverer
	fence events.Fence
	log   *slog.Logger

	mu   sync.Mutex
	stop context.CancelFunc
	done chan struct{}
}

func newEventing(s EventsSettings, st store.Store, fence events.Fence, tlog *transparency.Checkpointer, log *slog.Logger) (*eventing, error) {
	opt := s.Options
	opt.Log = log
	if tlog != nil {
		opt.Checkpoint = tlog.CheckpointAt
	}
	d, err := events.NewDeliverer(st, s.Builder(), s.Sinks, opt)
	if err != nil {
		return nil, err
	}
	return &eventing{d: d, fence: fence, log: log}, nil
}

// wake tells the sinks records were committed here.
func (e *eventing) wake() { e.d.Wake() }

// lead starts delivery when this replica holds the duties lease and stops
// it when it does not.
func (e *eventing) lead(ctx context.Context, leader bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done != nil {
		select {
		case <-e.done:
			e.stop, e.done = nil, nil
		default:
		}
	}
	switch {
	case leader && e.stop == nil:
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		e.stop, e.done = cancel, done
		go func() {
			defer close(done)
			stop := context.AfterFunc(ctx, cancel)
			defer stop()
			err := e.d.Run(rctx, e.fence)
			switch {
			case rctx.Err() != nil:
			case errors.Is(err, events.ErrNotLeader) || errors.Is(err, store.ErrLeaseLost):
				e.log.Info("events: delivery stopped: this replica no longer holds the duties lease", "err", err)
			default:
				e.log.Error("events: delivery stopped; it starts again at the next duties round", "err", err)
			}
		}()
		e.log.Info("events: this replica delivers the events (it holds the duties lease)", "sinks", e.d.Names())
	case !leader && e.stop != nil:
		e.stopLocked()
		e.log.Info("events: this replica no longer delivers the events (it does not hold the duties lease)")
	}
}

func (e *eventing) stopLocked() {
	if e.stop == nil {
		return
	}
	e.stop()
	<-e.done
	e.stop, e.done = nil, nil
}

// halt stops delivery and closes the sinks, at the end of the duties.
func (e *eventing) halt() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopLocked()
	_ = e.d.Close()
}

// eventsCollector exports each sink's delivery: the lag, read from the
// store on every replica (whichever delivers), and this process's counts.
type eventsCollector struct {
	st store.Store
	e  *eventing
}

var eventsDescs = struct {
	lagRecords, lagSeconds, cursor, delivered, failures, lastSuccess *prometheus.Desc
}{
	lagRecords:  prometheus.NewDesc("cardsign_events_lag_records", "Audit records not yet delivered to the sink (the audit head's seq minus the sink's cursor).", []string{"sink"}, nil),
	lagSeconds:  prometheus.NewDesc("cardsign_events_lag_seconds", "Age of the oldest audit record not yet delivered to the sink; 0 when it is caught up.", []string{"sink"}, nil),
	cursor:      prometheus.NewDesc("cardsign_events_cursor", "The seq of the last audit record delivered to the sink.", []string{"sink"}, nil),
	delivered:   prometheus.NewDesc("cardsign_events_delivered_total", "Events this process delivered to the sink.", []string{"sink"}, nil),
	failures:    prometheus.NewDesc("cardsign_events_failures_total", "Failed deliveries to the sink by this process (each is retried).", []string{"sink"}, nil),
	lastSuccess: prometheus.NewDesc("cardsign_events_last_success_timestamp_seconds", "When this process last delivered to the sink (Unix time); 0: not yet.", []string{"sink"}, nil),
}

func (c eventsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- eventsDescs.lagRecords
	ch <- eventsDescs.lagSeconds
	ch <- eventsDescs.cursor
	ch <- eventsDescs.delivered
	ch <- eventsDescs.failures
	ch <- eventsDescs.lastSuccess
}

func (c eventsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.e.d.Stats() {
		last := 0.0
		if !s.LastSuccess.IsZero() {
			last = float64(s.LastSuccess.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(eventsDescs.delivered, prometheus.CounterValue, float64(s.Delivered), s.Name)
		ch <- prometheus.MustNewConstMetric(eventsDescs.failures, prometheus.CounterValue, float64(s.Failures), s.Name)
		ch <- prometheus.MustNewConstMetric(eventsDescs.lastSuccess, prometheus.GaugeValue, last, s.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	head, _, err := c.st.AuditHead(ctx)
	if err != nil {
		return // the store is down; readiness says so
	}
	cursors, err := c.st.EventCursors(ctx)
	if err != nil {
		return
	}
	at := map[string]int64{}
	for _, cur := range cursors {
		at[cur.Sink] = cur.Seq
	}
	for _, name := range c.e.d.Names() {
		seq := at[name] // a sink that never delivered is at 0
		lag, age := max(head-seq, 0), 0.0
		if lag > 0 {
			if recs, err := c.st.ListAudit(ctx, seq, 1); err == nil && len(recs) == 1 {
				age = max(time.Since(recs[0].Time).Seconds(), 0)
			}
		}
		ch <- prometheus.MustNewConstMetric(eventsDescs.lagRecords, prometheus.GaugeValue, float64(lag), name)
		ch <- prometheus.MustNewConstMetric(eventsDescs.lagSeconds, prometheus.GaugeValue, age, name)
		ch <- prometheus.MustNewConstMetric(eventsDescs.cursor, prometheus.GaugeValue, float64(seq), name)
	}
}
