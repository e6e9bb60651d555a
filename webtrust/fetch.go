package webtrust

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Kind is the kind of document fetched: each has its own size cap.
type Kind int

// The kinds of document a verifier reads.
const (
	KindCatalog  Kind = iota // an AI Catalog
	KindDID                  // a DID document
	KindArtifact             // an artifact an entry points at, an agent card
	KindKeys                 // a JWKS, a revocation document, log keys
)

func (k Kind) String() string {
	switch k {
	case KindCatalog:
		return "catalog"
	case KindDID:
		return "DID document"
	case KindArtifact:
		return "artifact"
	case KindKeys:
		return "key document"
	}
	return "document"
}

// Default caps of safe fetching.
const (
	DefaultMaxCatalog     = 4 << 20
	DefaultMaxDIDDocument = 256 << 10
	DefaultMaxArtifact    = 1 << 20
	DefaultMaxKeys        = 1 << 20
	DefaultTimeout        = 10 * time.Second
	DefaultMaxRedirects   = 3
)

// MaxSizes caps the bytes read of each kind of document; 0 is the default.
type MaxSizes struct {
	Catalog, DIDDocument, Artifact, Keys int64
}

func (m MaxSizes) of(k Kind) int64 {
	pick := func(v, def int64) int64 {
		if v > 0 {
			return v
		}
		return def
	}
	switch k {
	case KindCatalog:
		return pick(m.Catalog, DefaultMaxCatalog)
	case KindDID:
		return pick(m.DIDDocument, DefaultMaxDIDDocument)
	case KindKeys:
		return pick(m.Keys, DefaultMaxKeys)
	}
	return pick(m.Artifact, DefaultMaxArtifact)
}

// ResolveEntry maps HOST:PORT to the address dialed instead (as curl's
// --resolve, with the target's port given too). The operator chose the
// address, so it is exempt from the private-address rule; TLS still checks
// the certificate against HOST.
type ResolveEntry struct {
	Host string // lower-case host name
	Port string
	Addr string // IP:PORT dialed
}

// ParseResolve reads a --resolve entry "HOST:PORT:ADDR:TPORT": connections to
// HOST:PORT dial ADDR:TPORT (an IPv6 ADDR in brackets:
// "catalog.example:443:[::1]:8443").
func ParseResolve(s string) (ResolveEntry, error) {
	host, rest, ok1 := strings.Cut(s, ":")
	port, target, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || host == "" {
		return ResolveEntry{}, fmt.Errorf("resolve %q: want HOST:PORT:ADDR:TPORT, e.g. catalog.example:443:127.0.0.1:8443", s)
	}
	if err := checkPort(port); err != nil {
		return ResolveEntry{}, fmt.Errorf("resolve %q: PORT: %w", s, err)
	}
	addr, tport, err := net.SplitHostPort(target)
	if err != nil {
		return ResolveEntry{}, fmt.Errorf("resolve %q: ADDR:TPORT: %w", s, err)
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return ResolveEntry{}, fmt.Errorf("resolve %q: ADDR %q is not an IP address", s, addr)
	}
	if err := checkPort(tport); err != nil {
		return ResolveEntry{}, fmt.Errorf("resolve %q: TPORT: %w", s, err)
	}
	return ResolveEntry{Host: strings.ToLower(host), Port: port, Addr: net.JoinHostPort(ip.String(), tport)}, nil
}

func checkPort(p string) error {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q is not a port number (1-65535)", p)
	}
	return nil
}

// AddressError is a connection refused before it was made: the address a
// host name resolved to is one a verifier must not reach (Safe Fetching).
type AddressError struct {
	Host string // the host:port dialed
	IP   netip.Addr
	Rule string // "loopback", "private", …
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("%s resolves to %s, a %s address: refused (safe fetching reaches public addresses only; map a host to a local address explicitly with --resolve)", e.Host, e.IP, e.Rule)
}

// Ranges of IPv6 addresses that carry an IPv4 address a gateway forwards
// to: dialing one reaches that IPv4 address, so its rules apply.
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215
	sixToFour      = netip.MustParsePrefix("2002::/16")      // RFC 3056
)

// IPv4 ranges refused besides those netip names.
var refusedIPv4 = []struct {
	prefix netip.Prefix
	rule   string
}{
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT)"},
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // and 255.255.255.255, broadcast
}

// addressRule names why ip may not be dialed, or "" when it may.
func addressRule(ip netip.Addr) string {
	// An IPv4-mapped address (::ffff:a.b.c.d) is its IPv4 address.
	ip = ip.Unmap()
	if rule := embeddedRule(ip); rule != "" {
		return rule
	}
	switch {
	case isMetadata(ip):
		return "cloud-metadata"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	case ip.Is6() && ip.IsPrivate():
		return "unique-local"
	case ip.IsPrivate():
		return "private"
	}
	for _, r := range refusedIPv4 {
		if r.prefix.Contains(ip) {
			return r.rule
		}
	}
	return ""
}

// embeddedRule applies the IPv4 rules to the IPv4 address a NAT64 or 6to4
// address embeds, and names the rule with the embedding; "" when ip embeds
// none or a public one.
func embeddedRule(ip netip.Addr) string {
	if !ip.Is6() {
		return ""
	}
	b := ip.As16()
	v4 := func(p ...byte) netip.Addr { return netip.AddrFrom4([4]byte(p)) }
	var embedded []netip.Addr
	var via string
	switch {
	case nat64WellKnown.Contains(ip):
		embedded, via = []netip.Addr{v4(b[12:]...)}, "NAT64"
	case nat64Local.Contains(ip):
		// The operator picks the prefix length within the /48 (RFC 6052
		// §2.2 moves the IPv4 address with it); a /96 is the usual one.
		// Other layouts are not guessed: for a /96-form address they would
		// read zero bytes as 0.0.0.0 and refuse every address.
		embedded, via = []netip.Addr{v4(b[12:]...)}, "NAT64"
	case sixToFour.Contains(ip):
		embedded, via = []netip.Addr{v4(b[2:6]...)}, "6to4"
	}
	for _, a := range embedded {
		if rule := addressRule(a); rule != "" {
			return rule + " (embedded in a " + via + " address)"
		}
	}
	return ""
}

// isMetadata reports a cloud instance-metadata address (AWS, GCP, Azure:
// 169.254.169.254; AWS over IPv6: fd00:ec2::254; Alibaba: 100.100.100.200),
// named apart from the ranges they fall in so the refusal says what it is.
func isMetadata(ip netip.Addr) bool {
	switch ip.String() {
	case "169.254.169.254", "fd00:ec2::254", "100.100.100.200":
		return true
	}
	return false
}

// fetchConfig is what safe fetching needs of the Options.
type fetchConfig struct {
	caFile       string
	roots        *x509.CertPool
	resolve      []string
	timeout      time.Duration
	maxRedirects int
	sizes        MaxSizes
	cache        *Cache
}

// fetcher fetches documents safely: https only, public addresses only
// (checked on the socket's address in the dialer, so DNS rebinding and
// every redirect are covered), TLS 1.2+, a timeout per fetch, a redirect
// cap and a size cap per kind. Fetched documents go through the cache.
type fetcher struct {
	client  *http.Client
	timeout time.Duration
	sizes   MaxSizes
}

func newFetcher(cfg fetchConfig) (*fetcher, error) {
	roots := cfg.roots
	if roots == nil {
		var err error
		if roots, err = x509.SystemCertPool(); err != nil {
			roots = x509.NewCertPool()
		}
	}
	if cfg.caFile != "" {
		pem, err := os.ReadFile(cfg.caFile)
		if err != nil {
			return nil, fmt.Errorf("webtrust: CA file: %w", err)
		}
		roots = roots.Clone()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("webtrust: CA file %s: no PEM certificate in it", cfg.caFile)
		}
	}
	mapped := map[string]string{}
	for _, s := range cfg.resolve {
		e, err := ParseResolve(s)
		if err != nil {
			return nil, fmt.Errorf("webtrust: %w", err)
		}
		mapped[net.JoinHostPort(e.Host, e.Port)] = e.Addr
	}
	checked := &net.Dialer{Timeout: 10 * time.Second, ControlContext: checkAddress}
	direct := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		// A proxy would dial for us, past the address check.
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if to, ok := mapped[net.JoinHostPort(strings.ToLower(host), port)]; ok {
				return direct.DialContext(ctx, network, to)
			}
			return checked.DialContext(ctx, network, addr)
		},
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 0, // the per-fetch timeout bounds it
		MaxIdleConnsPerHost:   4,
		ForceAttemptHTTP2:     true,
	}
	var rt http.RoundTripper = httpsOnly{tr}
	if cfg.cache != nil {
		rt = &cachingTransport{next: rt, cache: cfg.cache}
	}
	maxRedirects := cfg.maxRedirects
	if maxRedirects == 0 {
		maxRedirects = DefaultMaxRedirects
	}
	timeout := cfg.timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	client := &http.Client{
		Transport: rt,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if maxRedirects < 0 || len(via) > maxRedirects {
				return fmt.Errorf("more than %d redirects: refused", max(maxRedirects, 0))
			}
			if req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to %s: refused (https only)", req.URL.Redacted())
			}
			return nil
		},
	}
	return &fetcher{client: client, timeout: timeout, sizes: cfg.sizes}, nil
}

// checkAddress refuses a socket address safe fetching may not reach. It
// runs on the address actually dialed, after name resolution.
func checkAddress(_ context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	if rule := addressRule(ap.Addr()); rule != "" {
		return &AddressError{Host: address, IP: ap.Addr().Unmap(), Rule: rule}
	}
	return nil
}

// httpsOnly refuses any request that is not https, whoever makes it (a
// redirect, or a caller handed the client).
type httpsOnly struct{ next http.RoundTripper }

func (h httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		return nil, fmt.Errorf("%s: refused: safe fetching is https only", req.URL.Redacted())
	}
	return h.next.RoundTrip(req)
}

// StatusError is an HTTP answer other than 200 OK.
type StatusError struct {
	URL    string
	Status string
	Code   int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: HTTP status %s", e.URL, e.Status)
}

// get fetches rawURL (https only) with the accept header and returns the
// body, at most the size cap of kind, and the response's media type.
func (f *fetcher) get(ctx context.Context, rawURL string, kind Kind, accept string) ([]byte, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", fmt.Errorf("%s URL %q: %w", kind, rawURL, err)
	}
	shown := u.Redacted()
	if u.Scheme != "https" {
		return nil, "", fmt.Errorf("%s URL %q: refused: safe fetching is https only", kind, shown)
	}
	if u.User != nil {
		return nil, "", fmt.Errorf("%s URL %q: refused: credentials in a URL", kind, shown)
	}
	limit := f.sizes.of(kind)
	ctx, cancel := context.WithTimeout(withSizeCap(ctx, limit), f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", fmt.Errorf("GET %s: %w", shown, err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (timeout %s)", err, f.timeout)
		}
		return nil, "", fmt.Errorf("GET %s: %w", shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", &StatusError{URL: shown, Status: resp.Status, Code: resp.StatusCode}
	}
	if resp.ContentLength > limit {
		return nil, "", fmt.Errorf("GET %s: %s of %d bytes, over the cap of %d", shown, kind, resp.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (timeout %s)", err, f.timeout)
		}
		return nil, "", fmt.Errorf("GET %s: %w", shown, err)
	}
	if int64(len(body)) > limit {
		return nil, "", fmt.Errorf("GET %s: %s over the cap of %d bytes", shown, kind, limit)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return body, mt, nil
}
