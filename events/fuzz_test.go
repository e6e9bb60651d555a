package events

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
)

// FuzzSyslogFormat: whatever a card or a caller put in a record, its syslog
// message is one well-framed RFC 5424 message: the octet count is the
// message's length, the header fields are printable ASCII without spaces,
// and the MSG is the event's JSON, on one line.
func FuzzSyslogFormat(f *testing.F) {
	f.Add("Orders <EU>", "token:ci", "refused", "host not allowed", "orders.example.com")
	f.Add("\x00\n\u2028", "a b\tc", "key.revoke", "\xff\xfe", "")
	s, err := NewSyslog(SyslogConfig{Address: "127.0.0.1:6514", Facility: 4, Hostname: "host name\n", AppName: "cardsignd"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name, caller, outcome, reason, host string) {
		r := audit.Record{Seq: 7, Time: time.Unix(1764400000, 5).UTC(), Caller: caller, CardName: name, Outcome: outcome, Reason: reason,
			Hosts: []string{host}, CanonicalSHA256: make([]byte, 32), Hash: make([]byte, 32), PrevHash: make([]byte, 32)}
		m := testBuilder.Message(r)
		if !json.Valid(m.JSON) || bytes.ContainsAny(m.JSON, "\n\r") {
			t.Fatalf("event is not one line of JSON: %q", m.JSON)
		}
		framed := s.Format(m)
		sp := bytes.IndexByte(framed, ' ')
		n, err := strconv.Atoi(string(framed[:sp]))
		if sp < 1 || err != nil || n != len(framed)-sp-1 {
			t.Fatalf("frame %q: the count is not the message's length", framed[:min(len(framed), 40)])
		}
		msg := string(framed[sp+1:])
		fields := strings.SplitN(msg, " ", 8)
		if len(fields) != 8 || fields[6] != "-" || fields[7] != string(m.JSON) {
			t.Fatalf("message %q: want PRI+VERSION TIMESTAMP HOST APP PROCID MSGID - JSON", msg)
		}
		for _, h := range fields[:6] {
			for i := 0; i < len(h); i++ {
				if h[i] < 33 || h[i] > 126 {
					t.Fatalf("header field %q holds %q", h, h[i])
				}
			}
		}
	})
}
