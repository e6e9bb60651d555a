package daemonconfig

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cardsign/cardsign/events"
)

// EventsConfig is where cardsignd sends its events: one CloudEvents 1.0
// event for every audit record (every signature, refusal, key change,
// registry action and approval), delivered at least once, in order, from
// the audit log, by the replica holding the duties lease (while a lease
// changes hands, the new holder may send again, with the same ids, what
// the old one sent last). With several replicas, a file sink writes on the
// host of the replica delivering at the time. See ../events.md.
type EventsConfig struct {
	// Every event's CloudEvents source attribute (a URI reference).
	// Default: urn:cardsign: followed by log.origin.
	Source string `yaml:"source"`
	// The sinks. Each keeps its own cursor in the store (named by its
	// name): a sink that is down lags behind and catches up, and never
	// holds signing back.
	//
	//	events:
	//	  sinks:
	//	    - name: siem
	//	      type: webhook
	//	      url: https://siem.example.com/hooks/cardsign
	//	      secret_files: [/etc/cardsignd/webhook-secret]
	//	    - name: syslog
	//	      type: syslog
	//	      address: logs.example.com:6514
	//	      transport: tls
	//	      types: ["dev.cardsign.key.*", "dev.cardsign.card.refused"]
	Sinks []SinkConfig `yaml:"sinks"`
}

// SinkConfig is one event sink. Fields of another type are refused.
type SinkConfig struct {
	// The sink's name (letters, digits, -, _ and ., up to 64): its
	// cursor's name in the store and its metrics label. Renaming a sink
	// starts it afresh, from its from.
	Name string `yaml:"name"`
	// webhook, syslog or file.
	Type string `yaml:"type"`
	// Event type patterns (* and ?) the sink takes, e.g.
	// "dev.cardsign.key.*"; empty: every event. A pattern that matches no
	// event type is refused.
	Types []string `yaml:"types"`
	// Where a sink without a cursor starts: start (every record in the
	// audit log, the default) or now (records appended from its first
	// start on).
	From string `yaml:"from"`

	// webhook: the URL POSTed to: https, or http to a loopback address.
	URL string `yaml:"url"`
	// webhook: files each holding a Standard Webhooks secret (whsec_ and
	// base64; cardsign events secret makes one), at most 2: every request
	// is signed with each, so a rotation adds the new secret, moves the
	// receivers to it, then drops the old one.
	SecretFiles []string `yaml:"secret_files"`
	// webhook, syslog with transport tls: a PEM file of the CAs that
	// sign the receiver's certificate; unset: the system's roots.
	CAFile string `yaml:"ca_file"`
	// webhook, syslog: the longest a request (connect, send, the answer's
	// headers) or a write may take, up to 1m. Default 10s.
	Timeout time.Duration `yaml:"timeout"`
	// webhook: up to this many events per request, as a JSON array
	// (application/cloudevents-batch+json); 0 or 1: one event per request.
	Batch int `yaml:"batch"`

	// syslog: the receiver's host:port.
	Address string `yaml:"address"`
	// syslog: tcp (RFC 6587, octet counting) or tls (RFC 5425, the
	// default).
	Transport string `yaml:"transport"`
	// syslog: the facility name (auth, authpriv, daemon, local0 to
	// local7, ...). Default auth.
	Facility string `yaml:"facility"`

	// file: the absolute path of the JSON-lines file (created 0600).
	Path string `yaml:"path"`
	// file: rotate before the file grows past this many bytes. Default
	// 100 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// file: how many rotated files (PATH.1 to PATH.N) are kept. Default
	// 10.
	Keep int `yaml:"keep"`
}

// DefaultEventsTimeout is a sink's timeout when none is configured.
const DefaultEventsTimeout = 10 * time.Second

var sinkName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// EventSource is events.source, or its default.
func (c Config) EventSource() string {
	if c.Events.Source != "" {
		return c.Events.Source
	}
	return "urn:cardsign:" + c.Log.Origin
}

// validateEvents checks the events section.
func validateEvents(c *Config, bad reporter) {
	if src := c.Events.Source; src != "" {
		if u, err := url.Parse(src); err != nil || strings.ContainsAny(src, " \t\r\n") || (u.Scheme == "" && u.Path == "" && u.Opaque == "") || !utf8.ValidString(src) {
			bad("events.source", "%q is not a URI reference (e.g. urn:cardsign:cardsign.example.com or https://cardsign.example.com)", src)
		}
	}
	names := map[string]int{}
	for i, s := range c.Events.Sinks {
		f := fmt.Sprintf("events.sinks[%d]", i)
		switch {
		case !sinkName.MatchString(s.Name):
			bad(f+".name", "%q: want 1 to 64 letters, digits, -, _ or . (a letter or digit first)", s.Name)
		default:
			if j, dup := names[s.Name]; dup {
				bad(f+".name", "%q is also events.sinks[%d]'s: each sink needs its own name (its cursor's)", s.Name, j)
			}
			names[s.Name] = i
		}
		if _, err := events.NewFilter(s.Types); err != nil {
			bad(f+".types", "%v", err)
		}
		if s.From != "" && s.From != events.FromStart && s.From != events.FromNow {
			bad(f+".from", "%q is not start (the default: the whole audit log) or now", s.From)
		}
		if s.Timeout < 0 || s.Timeout > time.Minute {
			bad(f+".timeout", "%s: want 0 (the default, %s) up to 1m", s.Timeout, DefaultEventsTimeout)
		}
		switch s.Type {
		case "webhook":
			validateWebhookSink(f, s, bad)
		case "syslog":
			validateSyslogSink(f, s, bad)
		case "file":
			validateFileSink(f, s, bad)
		default:
			bad(f+".type", "%q is not webhook, syslog or file", s.Type)
		}
	}
}

// notFor refuses the fields set that a sink of type t does not read.
func notFor(f, t string, bad reporter, fields map[string]bool) {
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if fields[name] {
			bad(f+"."+name, "is not a field of a %s sink", t)
		}
	}
}

func validateWebhookSink(f string, s SinkConfig, bad reporter) {
	if err := events.CheckWebhookURL(s.URL); err != nil {
		bad(f+".url", "%v", err)
	}
	switch n := len(s.SecretFiles); {
	case n == 0:
		bad(f+".secret_files", "is required: a webhook is always signed (make a secret with cardsign events secret)")
	case n > 2:
		bad(f+".secret_files", "%d files: at most 2 (the current secret and the next, during a rotation)", n)
	}
	for j, p := range s.SecretFiles {
		if _, err := os.Stat(p); err != nil {
			bad(fmt.Sprintf("%s.secret_files[%d]", f, j), "%v", err)
		}
	}
	checkCAFile(f, s.CAFile, bad)
	if s.Batch < 0 || s.Batch > events.MaxWebhookBatch {
		bad(f+".batch", "%d: want 0 (one event per request) to %d", s.Batch, events.MaxWebhookBatch)
	}
	notFor(f, "webhook", bad, map[string]bool{"address": s.Address != "", "transport": s.Transport != "",
		"facility": s.Facility != "", "path": s.Path != "", "max_bytes": s.MaxBytes != 0, "keep": s.Keep != 0})
}

func validateSyslogSink(f string, s SinkConfig, bad reporter) {
	if _, _, err := net.SplitHostPort(s.Address); err != nil || s.Address == "" {
		bad(f+".address", "%q: want the receiver's host:port", s.Address)
	}
	switch s.Transport {
	case "", "tls":
		checkCAFile(f, s.CAFile, bad)
	case "tcp":
		if s.CAFile != "" {
			bad(f+".ca_file", "is for transport tls")
		}
	default:
		bad(f+".transport", "%q is not tls (the default) or tcp", s.Transport)
	}
	if _, ok := events.Facility(s.Facility); s.Facility != "" && !ok {
		bad(f+".facility", "%q is not a syslog facility name (auth, authpriv, daemon, local0 to local7, ...)", s.Facility)
	}
	notFor(f, "syslog", bad, map[string]bool{"url": s.URL != "", "secret_files": len(s.SecretFiles) > 0,
		"batch": s.Batch != 0, "path": s.Path != "", "max_bytes": s.MaxBytes != 0, "keep": s.Keep != 0})
}

func validateFileSink(f string, s SinkConfig, bad reporter) {
	if !filepath.IsAbs(s.Path) {
		bad(f+".path", "%q: want an absolute path", s.Path)
	} else if st, err := os.Stat(filepath.Dir(s.Path)); err != nil || !st.IsDir() {
		bad(f+".path", "its directory %s is not a directory (%v)", filepath.Dir(s.Path), err)
	}
	if s.MaxBytes != 0 && s.MaxBytes < 4096 {
		bad(f+".max_bytes", "%d: want at least 4096 (default %d)", s.MaxBytes, events.DefaultFileMaxBytes)
	}
	if s.Keep < 0 || s.Keep > 1000 {
		bad(f+".keep", "%d: want 0 (the default, %d) to 1000", s.Keep, events.DefaultFileKeep)
	}
	notFor(f, "file", bad, map[string]bool{"url": s.URL != "", "secret_files": len(s.SecretFiles) > 0,
		"batch": s.Batch != 0, "address": s.Address != "", "transport": s.Transport != "", "facility": s.Facility != "",
		"ca_file": s.CAFile != "", "timeout": s.Timeout != 0})
}

func checkCAFile(f, path string, bad reporter) {
	if path == "" {
		return
	}
	if _, err := os.Stat(path); err != nil {
		bad(f+".ca_file", "%v", err)
	}
}
