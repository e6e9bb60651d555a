package awskmsfake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of Options.
const (
	DefaultRegion  = "us-east-1"
	DefaultAccount = "111122223333"
)

// maxBody caps request bodies; KMS requests here are a few KiB at most.
const maxBody = 1 << 20

// Options configures a Server. The zero value listens on an ephemeral
// loopback port as account 111122223333 in us-east-1, without faults.
type Options struct {
	// Addr is the listen address, "127.0.0.1:0" by default. Its host must
	// be a loopback address: the fake checks no signatures.
	Addr    string
	Region  string
	Account string

	// Initial faults; see the setters of the same names.
	Latency      time.Duration
	ThrottleRate float64
	Unavailable  int
	WrongKeyID   bool
	// SignQuota and SignBurst: see SetSignQuota.
	SignQuota float64
	SignBurst int
}

// Server is a running fake KMS: the HTTP front of the KMS operations, the
// faults injected in front of them, and the Go-side helpers of tests. It is
// safe for concurrent use.
type Server struct {
	kms *kms
	srv *http.Server
	url string

	mu    sync.Mutex // guards everything below; never held with kms.mu
	calls map[string]int

	latency      time.Duration
	throttleRate float64
	unavailable  int
	wrongKeyID   bool
	quota        *rate.Limiter // Sign requests; nil: no quota
	quotaHits    int           // Sign requests the quota throttled
}

// Start listens on opts.Addr and serves until Close.
func Start(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("awskmsfake: listen address %q: %w", opts.Addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("awskmsfake: listen address %q is not a loopback address", opts.Addr)
	}
	if opts.ThrottleRate < 0 || opts.ThrottleRate > 1 {
		return nil, fmt.Errorf("awskmsfake: throttle rate %v is not in [0, 1]", opts.ThrottleRate)
	}
	if opts.SignQuota < 0 || opts.SignBurst < 0 {
		return nil, fmt.Errorf("awskmsfake: sign quota %v/s, burst %d: neither may be negative", opts.SignQuota, opts.SignBurst)
	}
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.Account == "" {
		opts.Account = DefaultAccount
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("awskmsfake: %w", err)
	}
	s := &Server{
		kms:          newKMS(opts.Region, opts.Account),
		url:          "http://" + ln.Addr().String(),
		calls:        map[string]int{},
		latency:      opts.Latency,
		throttleRate: opts.ThrottleRate,
		unavailable:  opts.Unavailable,
		wrongKeyID:   opts.WrongKeyID,
		quota:        newQuota(opts.SignQuota, opts.SignBurst),
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }() // returns http.ErrServerClosed on Close
	return s, nil
}

// URL returns the endpoint, http://127.0.0.1:PORT, for the SDK's
// BaseEndpoint.
func (s *Server) URL() string { return s.url }

// Region returns the Region of the fake's ARNs.
func (s *Server) Region() string { return s.kms.region }

// Close stops the server and closes its connections.
func (s *Server) Close() error { return s.srv.Close() }

// SetLatency delays every answer by d (requests the client gives up on end
// early).
func (s *Server) SetLatency(d time.Duration) { setLocked(s, &s.latency, d) }

// SetThrottleRate makes each request fail with ThrottlingException with
// probability p (0 to 1).
func (s *Server) SetThrottleRate(p float64) { setLocked(s, &s.throttleRate, min(max(p, 0), 1)) }

// SetUnavailable makes the next n requests fail with HTTP 503 and
// KMSInternalException.
func (s *Server) SetUnavailable(n int) { setLocked(s, &s.unavailable, n) }

// SetWrongKeyID makes Sign and GetPublicKey answer with another key's ARN
// (the signature itself is still made with the right key).
func (s *Server) SetWrongKeyID(on bool) { setLocked(s, &s.wrongKeyID, on) }

// SetSignQuota limits Sign requests to perSecond (a token bucket holding
// burst requests, at least 1), as AWS KMS's request quota for asymmetric
// cryptographic operations does: a request beyond it is answered at once
// (after the latency) with HTTP 400 ThrottlingException, without signing.
// perSecond 0 removes the quota. The bucket starts full. Other operations
// have quotas of their own at AWS and none here.
func (s *Server) SetSignQuota(perSecond float64, burst int) {
	setLocked(s, &s.quota, newQuota(perSecond, burst))
}

// newQuota is the token bucket of a sign quota; nil for none.
func newQuota(perSecond float64, burst int) *rate.Limiter {
	if perSecond <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(perSecond), max(burst, 1))
}

// Throttled returns how many Sign requests the sign quota refused.
func (s *Server) Throttled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quotaHits
}

// throttleMessage is the message AWS KMS sends with a ThrottlingException.
const throttleMessage = "You have exceeded the rate at which you may call KMS. Reduce the frequency of your calls."

// setLocked sets one of s's fault settings under s.mu, which every request
// holds while it reads them.
func setLocked[T any](s *Server, field *T, v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*field = v
}

// Calls returns how many requests for op (e.g. "Sign") arrived with a valid
// target and authorization header, including those answered with faults.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// CreateKey makes a key with KeySpec spec: SIGN_VERIFY for asymmetric
// signing specs, ENCRYPT_DECRYPT for SYMMETRIC_DEFAULT. It returns the key
// ARN.
func (s *Server) CreateKey(spec string) (string, error) {
	k, aerr := s.kms.newKey(spec, "", "")
	if aerr != nil {
		return "", wrap(aerr)
	}
	s.kms.add(k)
	return k.arn, nil
}

// CreateAlias points alias (alias/NAME) at the key keyRef names (key ID or
// ARN), creating or moving it.
func (s *Server) CreateAlias(alias, keyRef string) error {
	return wrap(s.kms.setAlias(alias, keyRef))
}

// DisableKey disables a key as the DisableKey operation does (and records
// it for Disabled).
func (s *Server) DisableKey(keyRef string) error {
	return wrap(s.kms.disable(keyRef))
}

// DeleteKey removes a key and the aliases naming it, as KMS does when the
// waiting period of ScheduleKeyDeletion ends: every later request naming
// it gets NotFoundException.
func (s *Server) DeleteKey(keyRef string) error {
	return wrap(s.kms.remove(keyRef))
}

// Disabled reports whether DisableKey (the operation or the method) was
// called for the key keyRef names: key ID, key ARN or alias.
func (s *Server) Disabled(keyRef string) bool {
	_, disabled, _ := s.kms.lookup(keyRef)
	return disabled
}

// Key describes the key keyRef names (key ID, key ARN or alias).
func (s *Server) Key(keyRef string) (KeyInfo, bool) {
	ki, _, ok := s.kms.lookup(keyRef)
	return ki, ok
}

// AliasTarget returns the ARN of the key alias (alias/NAME) points to.
func (s *Server) AliasTarget(alias string) (string, bool) {
	return s.kms.aliasTarget(alias)
}

// ServeHTTP answers one KMS request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		writeError(w, &apiError{status: http.StatusNotFound, typ: "UnknownOperationException", msg: "KMS serves POST /"})
		return
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "TrentService.")
	handler := api{s.kms}.handler(op)
	if !ok || handler == nil {
		writeError(w, errorf("UnknownOperationException", "unknown or unsupported operation %q", r.Header.Get("X-Amz-Target")))
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		writeError(w, errorf("SerializationException", "Content-Type must be application/x-amz-json-1.1"))
		return
	}
	if aerr := checkAuth(r.Header); aerr != nil {
		writeError(w, aerr)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return // the client went away
	}
	if len(body) > maxBody {
		writeError(w, validation("request body over %d bytes", maxBody))
		return
	}

	s.mu.Lock()
	s.calls[op]++
	latency := s.latency
	unavailable := s.unavailable > 0
	if unavailable {
		s.unavailable--
	}
	throttle := !unavailable && s.throttleRate > 0 && rand.Float64() < s.throttleRate
	if !unavailable && !throttle && op == "Sign" && s.quota != nil && !s.quota.Allow() {
		throttle = true
		s.quotaHits++
	}
	wrongKeyID := s.wrongKeyID
	s.mu.Unlock()

	if latency > 0 {
		if err := sleep(r.Context(), latency); err != nil {
			return
		}
	}
	switch {
	case unavailable:
		writeError(w, &apiError{status: http.StatusServiceUnavailable, typ: "KMSInternalException", msg: "injected: service unavailable"})
		return
	case throttle:
		writeError(w, errorf("ThrottlingException", throttleMessage))
		return
	}

	resp, aerr := handler(call{body: body, wrongKeyID: wrongKeyID})
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	out, err := json.Marshal(resp)
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, typ: "KMSInternalException", msg: "response encoding failed"})
		return
	}
	writeHeaders(w)
	_, _ = w.Write(out)
}

// wrap gives a test helper's error the package's prefix; nil stays nil.
func wrap(aerr *apiError) error {
	if aerr == nil {
		return nil
	}
	return fmt.Errorf("awskmsfake: %w", aerr)
}

// checkAuth requires a SigV4 Authorization header and X-Amz-Date, without
// verifying the signature (the fake knows no secrets). Messages never
// include header values, which carry the access key ID.
func checkAuth(h http.Header) *apiError {
	auth := h.Get("Authorization")
	if auth == "" {
		return errorf("MissingAuthenticationTokenException", "Missing Authentication Token")
	}
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok || !strings.Contains(rest, "Credential=") || !strings.Contains(rest, "SignedHeaders=") || !strings.Contains(rest, "Signature=") {
		return errorf("IncompleteSignatureException", "Authorization header requires AWS4-HMAC-SHA256 with Credential, SignedHeaders and Signature")
	}
	if h.Get("X-Amz-Date") == "" {
		return errorf("IncompleteSignatureException", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header")
	}
	return nil
}

func writeHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-RequestId", newUUID())
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeHeaders(w)
	w.WriteHeader(e.status)
	out, _ := json.Marshal(map[string]string{"__type": e.typ, "message": e.msg}) // strings always marshal
	_, _ = w.Write(out)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// decode unmarshals a request body.
func decode(body []byte, v any) *apiError {
	if err := json.Unmarshal(body, v); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return errorf("SerializationException", "malformed JSON")
		}
		return errorf("SerializationException", "request does not match the operation's input shape")
	}
	return nil
}
