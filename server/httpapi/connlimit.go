package httpapi

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// ConnLimits bounds one listener's open connections. Zero means unlimited.
type ConnLimits struct {
	// Max is the most connections open at once on the listener.
	Max int
	// MaxPerIP is the most open at once from one source address.
	MaxPerIP int
	// RefusalLogBurst and RefusalLogInterval bound the log lines about
	// refused connections, as for refused calls.
	RefusalLogBurst    int
	RefusalLogInterval time.Duration
}

// Reasons a connection (or stream) was refused: the "reason" label, and
// what Slots.Acquire returns.
const (
	RefusedTotal = "total"
	RefusedPerIP = "per_ip"
)

// LimitListener wraps l so that a connection over the limits is closed as
// soon as it is accepted, and counted.
//
// Closing, not blocking, is deliberate. golang.org/x/net/netutil's
// LimitListener stops calling Accept at the limit: excess connections then
// wait in the kernel's backlog, completed handshakes the clients believe
// are open, until the backlog overflows and the kernel drops new SYNs for
// everyone: one abusive source (its connections hidden in the backlog) then
// delays every other client, and a per-source limit cannot be enforced at
// all without accepting to learn the source. Accepting and closing at once
// keeps the backlog empty, frees the descriptor immediately, tells the
// client right away (a reset, so it backs off or tries another replica), and
// lets the per-address limit apply to the noisy source only.
//
// m counts the listener's connections; nil counts nothing.
func LimitListener(l net.Listener, name string, lim ConnLimits, m ListenerMetrics, log *slog.Logger) net.Listener {
	ll := &limitListener{Listener: l, name: name, lim: lim, slots: NewSlots(lim.Max, lim.MaxPerIP),
		refusals: NewRefusalLog(log, lim.RefusalLogBurst, lim.RefusalLogInterval)}
	if m != nil {
		ll.open, ll.refusedTotal, ll.refusedPerIP = m.ListenerCounters(name)
	}
	return ll
}

// ListenerMetrics gives a listener its counters: the connections open, and
// those refused over the total and the per-source limit.
type ListenerMetrics interface {
	ListenerCounters(listener string) (open Gauge, refusedTotal, refusedPerIP Counter)
}

type limitListener struct {
	net.Listener
	name     string
	lim      ConnLimits
	refusals *RefusalLog
	slots    *Slots

	open                       Gauge
	refusedTotal, refusedPerIP Counter
}

// Slots counts what is open (connections, streams) in all and per source
// address against a total and a per-source limit; zero is unlimited.
type Slots struct {
	max, maxPerIP int

	mu    sync.Mutex
	total int
	byIP  map[netip.Addr]int
}

// NewSlots counts against max in all and maxPerIP per source address.
func NewSlots(max, maxPerIP int) *Slots {
	return &Slots{max: max, maxPerIP: maxPerIP, byIP: map[netip.Addr]int{}}
}

// Max is the limit in all (0: none).
func (s *Slots) Max() int { return s.max }

// MaxPerIP is the limit per source address (0: none).
func (s *Slots) MaxPerIP() int { return s.maxPerIP }

// Gauge and Counter are the parts of the Prometheus types used here; nil
// (no metrics) is allowed.
type Gauge interface {
	Inc()
	Dec()
}
type Counter interface{ Inc() }

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := SourceIP(c.RemoteAddr())
		reason := l.slots.Acquire(ip)
		if reason == "" {
			if l.open != nil {
				l.open.Inc()
			}
			return &limitConn{Conn: c, release: func() { l.release(ip) }}, nil
		}
		if tc, ok := c.(*net.TCPConn); ok {
			// A reset rather than a FIN: no TIME_WAIT state kept here
			// for a connection that never carried anything.
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
		if reason == RefusedTotal && l.refusedTotal != nil {
			l.refusedTotal.Inc()
		} else if reason == RefusedPerIP && l.refusedPerIP != nil {
			l.refusedPerIP.Inc()
		}
		l.refusals.Log(context.Background(), slog.LevelWarn, "connection-"+reason,
			"connection refused: over the limit", "listener", l.name, "source", ip.String(), "limit", reason,
			"max_connections", l.lim.Max, "max_connections_per_ip", l.lim.MaxPerIP)
	}
}

// Acquire counts one more from ip, or says which limit it is over
// (RefusedTotal, RefusedPerIP).
func (s *Slots) Acquire(ip netip.Addr) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && s.total >= s.max {
		return RefusedTotal
	}
	if s.maxPerIP > 0 && s.byIP[ip] >= s.maxPerIP {
		return RefusedPerIP
	}
	s.total++
	s.byIP[ip]++
	return ""
}

// Release gives back what Acquire took for ip.
func (s *Slots) Release(ip netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	if s.byIP[ip]--; s.byIP[ip] <= 0 {
		delete(s.byIP, ip) // the map holds only sources with something open
	}
}

func (l *limitListener) release(ip netip.Addr) {
	l.slots.Release(ip)
	if l.open != nil {
		l.open.Dec()
	}
}

// SourceIP is the address a connection comes from; IPv4-mapped IPv6
// addresses count as their IPv4 address.
func SourceIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// limitConn gives its slot back when closed, once, however many times the
// server closes it.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
