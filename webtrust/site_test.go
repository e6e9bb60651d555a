package webtrust

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testpki"
)

// pki is a test CA the clients under test trust, for names such as
// catalog.example reached through Resolve entries.
type pki struct {
	ca    *testpki.CA
	roots *x509.CertPool
}

func newPKI(t testing.TB) *pki {
	ca := testpki.NewCA(t, "webtrust test CA")
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	return &pki{ca: ca, roots: roots}
}

// site is a real TLS server holding a certificate for its names, which
// a client reaches on port 443 through Resolve entries.
type site struct {
	*httptest.Server
	hits    atomic.Int64
	resolve []string
}

// newSite serves h over TLS for names; every request is counted.
func (p *pki) newSite(t testing.TB, h http.Handler, names ...string) *site {
	certPEM, keyPEM := p.ca.Issue(t, testpki.Leaf{CommonName: names[0], DNSNames: names, Server: true})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	s := &site{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.StartTLS()
	t.Cleanup(s.Close)
	for _, n := range names {
		s.resolve = append(s.resolve, n+":443:"+s.Listener.Addr().String())
	}
	return s
}

// clock is a settable clock for caches and verification.
type clock struct{ t atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.t.Store(t.UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.t.Load()) }
func (c *clock) advance(d time.Duration) { c.t.Add(int64(d)) }

// newTestClient is a client that trusts the test CA and reaches sites.
func (p *pki) newTestClient(t testing.TB, opts Options, sites ...*site) *Client {
	t.Helper()
	opts.RootCAs = p.roots
	for _, s := range sites {
		opts.Resolve = append(opts.Resolve, s.resolve...)
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
