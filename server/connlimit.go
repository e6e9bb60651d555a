package server

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/cardsign/cardsign/limits"
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

// Reasons a connection was refused, the "reason" label.
const (
	connRefusedTotal = "total"
	connRefusedPerIP = "per_ip"
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
func LimitListener(l net.Listener, name string, lim ConnLimits, m *Metrics, log *slog.Logger) net.Listener {
	ll := &limitListener{Listener: l, name: name, lim: lim, slots: newSourceSlots(lim.Max, lim.MaxPerIP),
		refusals: newRefusalLog(log, lim.RefusalLogBurst, lim.RefusalLogInterval)}
	if m != nil {
		ll.open = m.connections.WithLabelValues(name)
		ll.refusedTotal = m.connectionsRefused.WithLabelValues(name, connRefusedTotal)
		ll.refusedPerIP = m.connectionsRefused.WithLabelValues(name, connRefusedPerIP)
	}
	return ll
}

type limitListener struct {
	net.Listener
	name     string
	lim      ConnLimits
	refusals *refusalLog
	slots    *sourceSlots

	open                       gauge
	refusedTotal, refusedPerIP counter
}

// sourceSlots counts what is open (connections, streams) in all and per
// source address against a total and a per-source limit; zero is
// unlimited.
type sourceSlots struct {
	max, maxPerIP int

	mu    sync.Mutex
	total int
	byIP  map[netip.Addr]int
}

func newSourceSlots(max, maxPerIP int) *sourceSlots {
	return &sourceSlots{max: max, maxPerIP: maxPerIP, byIP: map[netip.Addr]int{}}
}

// gauge and counter are the parts of the Prometheus types used here; nil
// (no metrics) is allowed.
type gauge interface {
	Inc()
	Dec()
}
type counter interface{ Inc() }

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := sourceIP(c.RemoteAddr())
		reason := l.slots.acquire(ip)
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
		if reason == connRefusedTotal && l.refusedTotal != nil {
			l.refusedTotal.Inc()
		} else if reason == connRefusedPerIP && l.refusedPerIP != nil {
			l.refusedPerIP.Inc()
		}
		l.refusals.Log(context.Background(), slog.LevelWarn, "connection-"+reason,
			"connection refused: over the limit", "listener", l.name, "source", ip.String(), "limit", reason,
			"max_connections", l.lim.Max, "max_connections_per_ip", l.lim.MaxPerIP)
	}
}

// acquire counts one more from ip, or says which limit it is over
// (connRefusedTotal, connRefusedPerIP).
func (s *sourceSlots) acquire(ip netip.Addr) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && s.total >= s.max {
		return connRefusedTotal
	}
	if s.maxPerIP > 0 && s.byIP[ip] >= s.maxPerIP {
		return connRefusedPerIP
	}
	s.total++
	s.byIP[ip]++
	return ""
}

func (s *sourceSlots) release(ip netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	if s.byIP[ip]--; s.byIP[ip] <= 0 {
		delete(s.byIP, ip) // the map holds only sources with something open
	}
}

func (l *limitListener) release(ip netip.Addr) {
	l.slots.release(ip)
	if l.open != nil {
		l.open.Dec()
	}
}

// sourceIP is the address a connection comes from; IPv4-mapped IPv6
// addresses count as their IPv4 address.
func sourceIP(a net.Addr) netip.Addr {
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

// withDefaults fills the zero limits of o with their defaults.
func (o GRPCOptions) withDefaults() GRPCOptions {
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = limits.DefaultMaxStreamsPerConnection
	}
	if o.MaxHeaderListBytes == 0 {
		o.MaxHeaderListBytes = limits.DefaultMaxHeaderBytes
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = limits.DefaultHandshakeTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = limits.DefaultIdleTimeout
	}
	if o.MaxUnauthenticatedStreams <= 0 {
		o.MaxUnauthenticatedStreams = limits.DefaultMaxUnauthenticatedStreams
	}
	if o.MaxUnauthenticatedStreamsPerIP <= 0 {
		o.MaxUnauthenticatedStreamsPerIP = limits.DefaultMaxUnauthenticatedStreamsPerIP
	}
	return o
}
