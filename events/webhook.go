package events

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The webhook defaults and bounds.
const (
	DefaultWebhookTimeout = 10 * time.Second
	// MaxWebhookBatch bounds the events of one request: delivery reads at
	// most 100 records at once.
	MaxWebhookBatch = 100
	// maxErrorBody is how much of a refusal's body is read, for its error.
	maxErrorBody = 512
	// maxDrain is how much of an accepted answer's body is read so the
	// connection can be reused; a longer (or endless) body closes it.
	maxDrain = 64 << 10
)

// WebhookConfig is a webhook sink's.
type WebhookConfig struct {
	// URL receives a POST per event (or per batch): https, or http to a
	// loopback address.
	URL string
	// Secrets sign every request, in the manner of Standard Webhooks:
	// "whsec_" and the base64 of the key. Each signs, so that receivers
	// holding either verify during a rotation.
	Secrets []string
	// TLS, when set, is the client's TLS configuration (a ca_file's roots).
	TLS *tls.Config
	// Timeout bounds one request, from connecting to the end of the
	// answer's headers (DefaultWebhookTimeout when 0).
	Timeout time.Duration
	// Batch > 1 sends up to Batch events per request as a JSON array
	// (application/cloudevents-batch+json); 0 or 1, one event per request
	// (application/cloudevents+json).
	Batch int
	// UserAgent is sent with every request.
	UserAgent string
}

// Webhook is a sink that POSTs events to a URL, signed in the manner of
// the Standard Webhooks specification: headers webhook-id (the event's id,
// or the batch's), webhook-timestamp (Unix seconds) and webhook-signature
// ("v1," and the base64 HMAC-SHA256 of "id.timestamp.body" under each
// secret, space-separated).
type Webhook struct {
	cfg     WebhookConfig
	url     string
	shown   string // the URL as errors and logs show it: scheme and host (a path or query may hold a token)
	signers []*standardwebhooks.Webhook
	client  *http.Client
}

// NewWebhook checks cfg and makes the sink.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if err := CheckWebhookURL(cfg.URL); err != nil {
		return nil, err
	}
	if len(cfg.Secrets) == 0 {
		return nil, errors.New("webhook: no secret: a webhook is always signed (secret_files)")
	}
	w := &Webhook{cfg: cfg, url: cfg.URL, shown: Redact(cfg.URL)}
	for i, s := range cfg.Secrets {
		sg, err := NewSigner(s)
		if err != nil {
			return nil, fmt.Errorf("webhook: secret %d: %w", i+1, err)
		}
		w.signers = append(w.signers, sg)
	}
	if w.cfg.Timeout <= 0 {
		w.cfg.Timeout = DefaultWebhookTimeout
	}
	if w.cfg.Batch < 1 {
		w.cfg.Batch = 1
	}
	if w.cfg.Batch > MaxWebhookBatch {
		return nil, fmt.Errorf("webhook: batch %d: at most %d events per request", w.cfg.Batch, MaxWebhookBatch)
	}
	w.client = NewHTTPClient(w.cfg.Timeout, cfg.TLS)
	return w, nil
}

// Redact returns the scheme and host of a webhook URL, the part errors and
// logs show: many receivers take their credential in the path or query.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(a webhook URL)"
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return u.Scheme + "://" + u.Host + "/…"
	}
	return u.Scheme + "://" + u.Host
}

// secretPrefix opens a Standard Webhooks secret.
const secretPrefix = "whsec_"

// NewSigner reads a Standard Webhooks secret ("whsec_" and base64 of at
// least 24 bytes; the prefix is optional).
func NewSigner(secret string) (*standardwebhooks.Webhook, error) {
	secret = strings.TrimSpace(secret)
	if len(strings.TrimPrefix(secret, secretPrefix)) < 32 {
		return nil, errors.New("the secret is shorter than 24 bytes of base64: make one with cardsign events secret")
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		// The library's error names the base64, never the secret.
		return nil, fmt.Errorf("the secret is not whsec_ followed by standard base64: %w", err)
	}
	return wh, nil
}

// CheckWebhookURL accepts https URLs, and http ones to a loopback address
// (a receiver on the same host): events are never sent in the clear over
// a network.
func CheckWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("webhook url %s: want an absolute https URL with a host (no user, no fragment)", Redact(raw))
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if ip := net.ParseIP(u.Hostname()); (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
			return nil
		}
		return fmt.Errorf("webhook url %s: http is only for a loopback receiver; use https", Redact(raw))
	}
	return fmt.Errorf("webhook url %s: the scheme is not https (or http to loopback)", Redact(raw))
}

// NewHTTPClient is the webhook client: a connect, TLS and header timeout,
// no redirects followed (a redirect is a refusal: the receiver's address
// is configured, not discovered), TLS 1.2 or newer.
func NewHTTPClient(timeout time.Duration, tc *tls.Config) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = timeout
	t.ResponseHeaderTimeout = timeout
	t.MaxResponseHeaderBytes = 64 << 10
	if tc == nil {
		tc = &tls.Config{}
	}
	tc = tc.Clone()
	if tc.MinVersion < tls.VersionTLS12 {
		tc.MinVersion = tls.VersionTLS12
	}
	t.TLSClientConfig = tc
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Send POSTs msgs, one request per event or per batch.
func (w *Webhook) Send(ctx context.Context, msgs []Message) (int, error) {
	done := 0
	for done < len(msgs) {
		n := min(w.cfg.Batch, len(msgs)-done)
		part := msgs[done : done+n]
		id, body, ctype := part[0].ID, part[0].JSON, ContentType
		if w.cfg.Batch > 1 {
			id, body, ctype = batchID(part), batchBody(part), BatchContentType
		}
		if err := w.post(ctx, id, body, ctype); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// batchID names a batch by its first and last event: the same batch sent
// again has the same id.
func batchID(part []Message) string {
	if len(part) == 1 {
		return part[0].ID
	}
	return part[0].ID + "-" + part[len(part)-1].ID
}

func batchBody(part []Message) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, m := range part {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m.JSON)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// Sign returns the webhook-signature header of one request under every
// secret.
func Sign(signers []*standardwebhooks.Webhook, id string, at time.Time, body []byte) (string, error) {
	sigs := make([]string, len(signers))
	for i, s := range signers {
		sig, err := s.Sign(id, at, body)
		if err != nil {
			return "", err
		}
		sigs[i] = sig
	}
	return strings.Join(sigs, " "), nil
}

func (w *Webhook) post(parent context.Context, id string, body []byte, ctype string) error {
	ctx, cancel := context.WithTimeout(parent, w.cfg.Timeout)
	defer cancel()
	now := time.Now()
	sig, err := Sign(w.signers, id, now, body)
	if err != nil {
		return fmt.Errorf("webhook: signing: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	req.Header.Set("Content-Type", ctype+"; charset=utf-8")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	if w.cfg.UserAgent != "" {
		req.Header.Set("User-Agent", w.cfg.UserAgent)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the URL, which may hold a token
		}
		// The request's own deadline and the transport's header timeout are
		// the same length; whichever fires first, say it one way.
		if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("webhook %s: POST: no answer within %v (timeout awaiting response headers): %w", w.shown, w.cfg.Timeout, err)
		}
		return fmt.Errorf("webhook %s: POST: %w", w.shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// Read a little, so the connection is reused; a receiver that
		// answers with an endless body is cut off, not waited for.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	err = fmt.Errorf("webhook %s answered %s: %q", w.shown, resp.Status, strings.TrimSpace(string(msg)))
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		err = fmt.Errorf("webhook %s answered %s, a redirect to %s: redirects are not followed; configure the final URL", w.shown, resp.Status, Redact(resp.Header.Get("Location")))
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		if after, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return &RetryAfterError{After: after, Err: err}
		}
	}
	return err
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(h string, now time.Time) (time.Duration, bool) {
	if h == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// Close closes idle connections.
func (w *Webhook) Close() error {
	w.client.CloseIdleConnections()
	return nil
}
