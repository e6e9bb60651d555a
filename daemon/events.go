package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/cardsign/cardsign/buildinfo"
	"github.com/cardsign/cardsign/events"
	"github.com/cardsign/cardsign/internal/daemonconfig"
	"github.com/cardsign/cardsign/secretfile"
	"github.com/cardsign/cardsign/server"
)

// maxSecretBytes bounds a webhook secret file.
const maxSecretBytes = 4 << 10

// eventsSettings turns events (validated) into the authority's sinks,
// opening each: a secret or CA file that cannot be read, or a file sink's
// file that cannot be opened, stops the start with the field that names it.
// The sinks opened are closed by the authority at the end of its duties.
func eventsSettings(cfg daemonconfig.Config) (server.EventsSettings, error) {
	s := server.EventsSettings{Source: cfg.EventSource()}
	ua := "cardsignd/" + buildinfo.Read().Version
	for i, c := range cfg.Events.Sinks {
		sink, err := openSink(c, ua)
		if err != nil {
			for _, o := range s.Sinks {
				_ = o.Sink.Close()
			}
			return server.EventsSettings{}, fmt.Errorf("events.sinks[%d] (%s): %w", i, c.Name, err)
		}
		f, _ := events.NewFilter(c.Types) // validated
		s.Sinks = append(s.Sinks, events.SinkConfig{Name: c.Name, Filter: f, From: c.From, Sink: sink})
	}
	return s, nil
}

func openSink(c daemonconfig.SinkConfig, userAgent string) (events.Sink, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = daemonconfig.DefaultEventsTimeout
	}
	switch c.Type {
	case "webhook":
		var secrets []string
		for j, p := range c.SecretFiles {
			b, err := secretfile.ReadFile(p, maxSecretBytes)
			if err != nil {
				return nil, fmt.Errorf("secret_files[%d]: %w", j, err)
			}
			secrets = append(secrets, strings.TrimSpace(string(b)))
		}
		tc, err := caConfig(c.CAFile)
		if err != nil {
			return nil, err
		}
		return events.NewWebhook(events.WebhookConfig{URL: c.URL, Secrets: secrets, TLS: tc, Timeout: timeout, Batch: c.Batch, UserAgent: userAgent})
	case "syslog":
		fac := 4 // auth
		if c.Facility != "" {
			fac, _ = events.Facility(c.Facility)
		}
		var tc *tls.Config
		if c.Transport != "tcp" {
			var err error
			if tc, err = caConfig(c.CAFile); err != nil {
				return nil, err
			}
			if tc == nil {
				tc = &tls.Config{MinVersion: tls.VersionTLS12} // the system's roots
			}
		}
		return events.NewSyslog(events.SyslogConfig{Address: c.Address, TLS: tc, Facility: fac, Timeout: timeout})
	case "file":
		return events.NewFile(events.FileConfig{Path: c.Path, MaxBytes: c.MaxBytes, Keep: c.Keep})
	}
	return nil, fmt.Errorf("type %q is not webhook, syslog or file", c.Type)
}

// caConfig is a TLS client configuration trusting the CAs of a PEM file
// (a witness's or a sink's ca_file, read bounded); nil for none.
func caConfig(path string) (*tls.Config, error) {
	if path == "" {
		return nil, nil
	}
	pem, err := secretfile.ReadFile(path, maxCAFileBytes)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w (want a PEM file of at most %d bytes)", err, maxCAFileBytes)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_file: %s holds no PEM certificate", path)
	}
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}
