package events

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/rsyslogtest"
	"github.com/cardsign/cardsign/internal/testpki"
)

// rfc5424 is the header cardsign writes: PRI, version 1, a UTC timestamp
// with microseconds, hostname, app name, pid, msgid, no structured data.
var rfc5424 = regexp.MustCompile(`^<(\d+)>1 \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z \S+ cardsignd \d+ ([!-~]{1,32}) - (\{.*\})$`)

// TestSyslogToRsyslog sends events to a real rsyslogd over TCP and over TLS
// (RFC 5425), restarts it between batches, and checks that it took every
// message, whole, with the header and the event.
func TestSyslogToRsyslog(t *testing.T) {
	ca := testpki.NewCA(t, "syslog CA")
	certPEM, keyPEM := ca.Issue(t, testpki.ServerLeaf())
	dir := t.TempDir()
	cert, key := testpki.WriteFiles(t, dir, "rsyslog", certPEM, keyPEM)
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	for _, tc := range []struct {
		name string
		tls  *rsyslogtest.TLS
		cfg  *tls.Config
	}{
		{"tcp", nil, nil},
		{"tls", &rsyslogtest.TLS{CAFile: caFile, CertFile: cert, KeyFile: key}, &tls.Config{RootCAs: roots}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := rsyslogtest.Start(t, tc.tls)
			s, err := NewSyslog(SyslogConfig{Address: srv.Addr, TLS: tc.cfg, Facility: 10, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			msgs := messages(34)
			if n, err := s.Send(t.Context(), msgs[:17]); n != 17 || err != nil {
				t.Fatalf("Send: %d, %v", n, err)
			}
			// The receiver restarts between batches: the sink sees the
			// closed connection and sends the next batch on a new one.
			waitLines(t, srv, 17)
			srv.Restart()
			if n, err := s.Send(t.Context(), msgs[17:]); n != 17 || err != nil {
				t.Fatalf("Send after the receiver restarted: %d, %v", n, err)
			}
			lines := waitLines(t, srv, 34)
			for i, l := range lines {
				m := rfc5424.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("line %d is not cardsign's RFC 5424: %q", i, l)
				}
				if m[3] != string(msgs[i].JSON) || m[2] != strings.TrimPrefix(msgs[i].Type, TypePrefix) {
					t.Fatalf("line %d: msgid %s msg %.80s, want %s", i, m[2], m[3], msgs[i].Type)
				}
				if want := 10*8 + severity(msgs[i].Type); m[1] != strconv.Itoa(want) {
					t.Fatalf("line %d: PRI %s, want %d", i, m[1], want)
				}
			}
		})
	}
	t.Run("receiver down", func(t *testing.T) {
		srv := rsyslogtest.Start(t, nil)
		srv.Stop()
		s, _ := NewSyslog(SyslogConfig{Address: srv.Addr, Timeout: time.Second})
		if n, err := s.Send(t.Context(), messages(1)); n != 0 || err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("Send to a stopped receiver: %d, %v", n, err)
		}
	})
}

func waitLines(t *testing.T, srv *rsyslogtest.Server, n int) []string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		lines := srv.Lines()
		if len(lines) >= n || time.Now().After(deadline) {
			if len(lines) != n {
				t.Fatalf("rsyslogd wrote %d messages, want %d", len(lines), n)
			}
			return lines
		}
		time.Sleep(50 * time.Millisecond)
	}
}
