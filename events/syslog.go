package events

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Facilities a syslog sink may log under (RFC 5424 §6.2.1), by name.
var facilities = map[string]int{
	"kern": 0, "user": 1, "mail": 2, "daemon": 3, "auth": 4, "syslog": 5, "lpr": 6, "news": 7,
	"uucp": 8, "cron": 9, "authpriv": 10, "ftp": 11, "ntp": 12, "security": 13, "console": 14, "solaris-cron": 15,
	"local0": 16, "local1": 17, "local2": 18, "local3": 19, "local4": 20, "local5": 21, "local6": 22, "local7": 23,
}

// Facility returns the number of a facility name.
func Facility(name string) (int, bool) {
	f, ok := facilities[name]
	return f, ok
}

// Severities of the events (RFC 5424 §6.2.1): a refusal, a revocation, a
// removal and a denial stand out from the rest.
const (
	sevWarning = 4
	sevNotice  = 5
	sevInfo    = 6
)

func severity(t string) int {
	switch t {
	case TypeCardRefused, TypeMonitorAlarm, TypeMonitorMatch:
		return sevWarning
	case TypeKeyRevoked, TypeCardRevoked, TypeAgentRemoved, TypeApprovalDenied:
		return sevNotice
	}
	return sevInfo
}

// SyslogConfig is a syslog sink's.
type SyslogConfig struct {
	// Address is the receiver's host:port.
	Address string
	// TLS, when set, wraps the connection (RFC 5425); nil is plain TCP
	// (RFC 6587), for a receiver on a trusted network or the same host.
	TLS *tls.Config
	// Facility is the messages' facility number (Facility).
	Facility int
	// Hostname and AppName are the messages' HOSTNAME and APP-NAME
	// (defaults: the host's name, cardsignd).
	Hostname, AppName string
	// Timeout bounds connecting and each write (10s when 0).
	Timeout time.Duration
}

// Syslog is a sink that writes one RFC 5424 message per event to a syslog
// receiver over TCP or TLS, framed by octet counting (RFC 6587 §3.4.1,
// RFC 5425 §4.3). The MSG is the event's JSON; MSGID is its type without
// "dev.cardsign."; STRUCTURED-DATA is "-".
//
// Syslog over TCP has no acknowledgement: a message is delivered when it
// was written to the connection. Before each batch the sink checks that
// the receiver has not closed the connection (a receiver that restarted),
// and a write that fails sends the batch again on a new connection, so a
// restart between batches loses nothing; what a receiver held unread when
// it crashed is beyond what the protocol can tell.
type Syslog struct {
	cfg SyslogConfig
	pid string

	mu   sync.Mutex
	conn net.Conn
}

// NewSyslog makes the sink; it connects at the first Send.
func NewSyslog(cfg SyslogConfig) (*Syslog, error) {
	if _, _, err := net.SplitHostPort(cfg.Address); err != nil {
		return nil, fmt.Errorf("syslog address %q: want host:port", cfg.Address)
	}
	if cfg.Facility < 0 || cfg.Facility > 23 {
		return nil, fmt.Errorf("syslog facility %d: want 0 to 23", cfg.Facility)
	}
	if cfg.Hostname == "" {
		cfg.Hostname, _ = os.Hostname()
	}
	cfg.Hostname = header(cfg.Hostname, 255)
	if cfg.AppName == "" {
		cfg.AppName = "cardsignd"
	}
	cfg.AppName = header(cfg.AppName, 48)
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &Syslog{cfg: cfg, pid: strconv.Itoa(os.Getpid())}, nil
}

// header makes s a header field: printable US-ASCII without spaces, at
// most max characters, "-" when empty (RFC 5424 §6.2).
func header(s string, max int) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s) && len(b) < max; i++ {
		if c := s[i]; c >= 33 && c <= 126 {
			b = append(b, c)
		}
	}
	if len(b) == 0 {
		return "-"
	}
	return string(b)
}

// Format returns the RFC 5424 message of m, framed by octet counting.
func (s *Syslog) Format(m Message) []byte {
	pri := s.cfg.Facility*8 + severity(m.Type)
	msgid := header(strings.TrimPrefix(m.Type, TypePrefix), 32)
	msg := fmt.Appendf(nil, "<%d>1 %s %s %s %s %s - ", pri, m.Time.UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
		s.cfg.Hostname, s.cfg.AppName, s.pid, msgid)
	msg = append(msg, m.JSON...)
	return append(strconv.AppendInt(nil, int64(len(msg)), 10), append([]byte{' '}, msg...)...)
}

// Send writes msgs to the connection, connecting first when needed.
func (s *Syslog) Send(ctx context.Context, msgs []Message) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && closedByPeer(s.conn) {
		s.dropLocked()
	}
	if s.conn == nil {
		c, err := s.dial(ctx)
		if err != nil {
			return 0, err
		}
		s.conn = c
	}
	var buf []byte
	for _, m := range msgs {
		buf = append(buf, s.Format(m)...)
	}
	deadline := time.Now().Add(s.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = s.conn.SetWriteDeadline(deadline)
	// A write held up by a receiver that does not read ends when ctx does
	// (the lease lost, a shutdown), not only at the timeout.
	conn := s.conn
	stop := context.AfterFunc(ctx, func() { _ = conn.SetWriteDeadline(time.Now()) })
	_, err := conn.Write(buf)
	stop()
	if err != nil {
		s.dropLocked()
		// How much of buf the receiver took is unknown: the batch is sent
		// again, whole, on a new connection.
		return 0, fmt.Errorf("syslog %s: %w", s.cfg.Address, err)
	}
	return len(msgs), nil
}

func (s *Syslog) dial(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	var c net.Conn
	var err error
	if s.cfg.TLS != nil {
		tc := s.cfg.TLS.Clone()
		if tc.MinVersion < tls.VersionTLS12 {
			tc.MinVersion = tls.VersionTLS12
		}
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(s.cfg.Address)
		}
		c, err = (&tls.Dialer{NetDialer: d, Config: tc}).DialContext(ctx, "tcp", s.cfg.Address)
	} else {
		c, err = d.DialContext(ctx, "tcp", s.cfg.Address)
	}
	if err != nil {
		return nil, fmt.Errorf("syslog %s: %w", s.cfg.Address, err)
	}
	return c, nil
}

// closedByPeer reports whether the receiver closed c (or reset it): a
// syslog receiver never writes, so anything read, or an error other than
// the deadline, means the connection is gone.
func closedByPeer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
	var one [1]byte
	_, err := c.Read(one[:])
	_ = c.SetReadDeadline(time.Time{})
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func (s *Syslog) dropLocked() {
	if s.conn != nil {
		_ = s.conn.Close()
		s.conn = nil
	}
}

// Close closes the connection.
func (s *Syslog) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked()
	return nil
}
