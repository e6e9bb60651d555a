package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cardsign/cardsign/events"
	"github.com/cardsign/cardsign/secretfile"
	"github.com/cardsign/cardsign/transparency/tlogclient"
)

// monitorHook sends cardsign log monitor's matches and alarms to a webhook
// (--webhook), signed as cardsignd's webhook sinks sign their events.
type monitorHook struct {
	url         string
	secretFiles stringsFlag
	w           *events.Webhook
}

// monitorHookFlags defines log monitor's --webhook flags on fs.
func monitorHookFlags(fs *flag.FlagSet) *monitorHook {
	h := &monitorHook{}
	fs.StringVar(&h.url, "webhook", "", "monitor: also POST each match and alarm to this URL as a CloudEvent, signed as cardsignd's webhook sinks are (https, or http to loopback); a delivery that fails fails the run and leaves the state file where it was")
	fs.Var(&h.secretFiles, "webhook-secret-file", "monitor, with --webhook: a file holding the Standard Webhooks secret (whsec_…, cardsign events secret) the requests are signed with (repeatable, at most 2: a rotation)")
	return h
}

// open reads the secrets and the CA file and makes the webhook.
func (h *monitorHook) open(caFile string) error {
	if len(h.secretFiles) == 0 || len(h.secretFiles) > 2 {
		return errors.New("--webhook needs --webhook-secret-file FILE (once, or twice during a rotation): its requests are always signed")
	}
	var secrets []string
	for _, p := range h.secretFiles {
		b, err := secretfile.ReadFile(p, 4<<10)
		if err != nil {
			return fmt.Errorf("--webhook-secret-file: %w", err)
		}
		secrets = append(secrets, strings.TrimSpace(string(b)))
	}
	var tc *tls.Config
	if caFile != "" {
		pem, err := secretfile.ReadFile(caFile, 1<<20)
		if err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--ca-file: %s holds no PEM certificate", caFile)
		}
		tc = &tls.Config{RootCAs: roots}
	}
	w, err := events.NewWebhook(events.WebhookConfig{URL: h.url, Secrets: secrets, TLS: tc, UserAgent: "cardsign-log-monitor"})
	if err != nil {
		return fmt.Errorf("--webhook: %w", err)
	}
	h.w = w
	return nil
}

// send POSTs a match or an alarm; checkpoints are not sent. The event id
// names the leaf or the alarm, so a run that sends again (its state file
// was not advanced) sends the same ids.
func (h *monitorHook) send(ctx context.Context, logURL string, ev tlogclient.Event) error {
	if h == nil || h.w == nil {
		return nil
	}
	var typ, id, subject string
	switch ev.Kind {
	case tlogclient.EventEntry:
		typ, id, subject = events.TypeMonitorMatch, ev.Origin+"/leaf/"+strconv.FormatInt(ev.Index, 10), ev.Entry.Card.Name
	case tlogclient.EventAlarm:
		typ, subject = events.TypeMonitorAlarm, ev.Origin
		id = fmt.Sprintf("%s/alarm/%s/%d", ev.Origin, ev.Alarm.Kind, ev.Alarm.New.Size)
	default:
		return nil
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return h.post(ctx, events.Other(logURL, typ, id, subject, time.Now(), data))
}

// sendUnwitnessed POSTs the alarm of a checkpoint without its witnesses'
// quorum.
func (h *monitorHook) sendUnwitnessed(ctx context.Context, logURL string, cause error) error {
	if h == nil || h.w == nil {
		return nil
	}
	data, _ := json.Marshal(map[string]string{"event": "alarm", "alarm": "not-witnessed", "detail": cause.Error()})
	id := "not-witnessed/" + strconv.FormatInt(time.Now().Unix(), 10)
	return h.post(ctx, events.Other(logURL, events.TypeMonitorAlarm, id, "", time.Now(), data))
}

func (h *monitorHook) post(ctx context.Context, m events.Message) error {
	if _, err := h.w.Send(ctx, []events.Message{m}); err != nil {
		return fmt.Errorf("--webhook: %w", err)
	}
	return nil
}
