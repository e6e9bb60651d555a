package webtrust

import (
	"bytes"
	"errors"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

func TestSafeFetching(t *testing.T) {
	p := newPKI(t)
	big := bytes.Repeat([]byte("x"), DefaultMaxArtifact+1)
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) })
	mux.HandleFunc("/to-http", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://catalog.example/ok", http.StatusFound)
	})
	mux.HandleFunc("/to-private", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://10.1.2.3/ok", http.StatusFound)
	})
	mux.HandleFunc("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/to-other", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://mirror.example/ok", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { w.Write(big) })
	mux.HandleFunc("/big-chunked", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < len(big); i += 64 << 10 {
			w.Write(big[i:min(i+64<<10, len(big))])
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	mux.HandleFunc("/missing", http.NotFound)
	s := p.newSite(t, mux, "catalog.example", "mirror.example")
	c := p.newTestClient(t, Options{Timeout: 300 * time.Millisecond}, s)

	for _, tc := range []struct {
		name, url string
		want      string // "" = fetched
		rule      string // the AddressError's rule, when one
	}{
		{"ok", "https://catalog.example/ok", "", ""},
		{"redirect within https", "https://catalog.example/to-other", "", ""},
		{"http URL", "http://catalog.example/ok", "https only", ""},
		{"redirect to http", "https://catalog.example/to-http", "https only", ""},
		{"redirect to a private address", "https://catalog.example/to-private", "10.1.2.3:443 resolves to 10.1.2.3, a private address", "private"},
		{"redirect to cloud metadata", "https://catalog.example/to-metadata", "cloud-metadata", "cloud-metadata"},
		{"too many redirects", "https://catalog.example/loop", "more than 3 redirects", ""},
		{"oversize (Content-Length)", "https://catalog.example/big", "over the cap", ""},
		{"oversize (chunked)", "https://catalog.example/big-chunked", "over the cap of 1048576 bytes", ""},
		{"slow server", "https://catalog.example/slow", "timeout 300ms", ""},
		{"404", "https://catalog.example/missing", "HTTP status 404", ""},
		{"loopback without a Resolve entry", "https://" + s.Listener.Addr().String() + "/ok", "a loopback address", "loopback"},
		{"localhost without a Resolve entry", "https://localhost:" + portOf(s) + "/ok", "a loopback address", "loopback"},
		{"credentials in the URL", "https://user:pw@catalog.example/ok", "credentials", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _, err := c.fetch.get(t.Context(), tc.url, KindArtifact, "")
			if tc.want == "" {
				if err != nil || string(body) != "hello" {
					t.Fatalf("got %q, %v; want hello", body, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "pw@") {
				t.Errorf("error shows the URL's password: %v", err)
			}
			var ae *AddressError
			if errors.As(err, &ae) != (tc.rule != "") || (ae != nil && ae.Rule != tc.rule) {
				t.Errorf("AddressError %+v, want rule %q", ae, tc.rule)
			}
		})
	}
}

func portOf(s *site) string {
	ap := netip.MustParseAddrPort(s.Listener.Addr().String())
	return ap.String()[strings.LastIndexByte(ap.String(), ':')+1:]
}

func TestFetchSizeCapsPerKind(t *testing.T) {
	p := newPKI(t)
	doc := bytes.Repeat([]byte("d"), 2000)
	s := p.newSite(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(doc) }), "catalog.example")
	c := p.newTestClient(t, Options{MaxSizes: MaxSizes{DIDDocument: 1000, Catalog: 4000}}, s)
	if _, _, err := c.fetch.get(t.Context(), "https://catalog.example/did", KindDID, ""); err == nil || !strings.Contains(err.Error(), "DID document of 2000 bytes, over the cap of 1000") {
		t.Errorf("DID document over its cap: %v", err)
	}
	if b, _, err := c.fetch.get(t.Context(), "https://catalog.example/cat", KindCatalog, ""); err != nil || len(b) != 2000 {
		t.Errorf("catalog under its cap: %d bytes, %v", len(b), err)
	}
}

func TestAddressRule(t *testing.T) {
	for _, tc := range []struct{ ip, rule string }{
		{"127.0.0.1", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.0.0.1", "private"},
		{"172.16.5.4", "private"},
		{"192.168.1.1", "private"},
		{"169.254.169.254", "cloud-metadata"},
		{"fd00:ec2::254", "cloud-metadata"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"fc00::1", "unique-local"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"239.1.2.3", "multicast"},
		{"224.0.0.1", "link-local"},
		{"ff0e::1", "multicast"},
		{"100.64.0.1", "shared (carrier-grade NAT)"},
		{"::ffff:10.1.2.3", "private"},
		{"::ffff:169.254.169.254", "cloud-metadata"},
		{"100.100.100.200", "cloud-metadata"},
		{"0.1.2.3", "this-network"},
		{"192.0.0.8", "IETF protocol assignment"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.254", "benchmarking"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "reserved"},
		{"198.20.0.1", ""},
		{"192.0.1.1", ""},
		// NAT64 and 6to4 addresses reach the IPv4 address they embed.
		{"64:ff9b::7f00:1", "loopback (embedded in a NAT64 address)"},
		{"64:ff9b::a9fe:a9fe", "cloud-metadata (embedded in a NAT64 address)"},
		{"64:ff9b::10.0.0.1", "private (embedded in a NAT64 address)"},
		{"64:ff9b::198.18.0.1", "benchmarking (embedded in a NAT64 address)"},
		{"64:ff9b::93.184.216.34", ""},
		{"64:ff9b:1::192.168.0.1", "private (embedded in a NAT64 address)"},
		{"64:ff9b:1:2::127.0.0.1", "loopback (embedded in a NAT64 address)"},
		{"64:ff9b:1::93.184.216.34", ""},
		{"2002:7f00:1::1", "loopback (embedded in a 6to4 address)"},
		{"2002:a9fe:a9fe::", "cloud-metadata (embedded in a 6to4 address)"},
		{"2002:c0a8:101:1::1", "private (embedded in a 6to4 address)"},
		{"2002:5db8:d822::1", ""},
		{"93.184.216.34", ""},
		{"2606:4700::1111", ""},
	} {
		if got := addressRule(netip.MustParseAddr(tc.ip)); got != tc.rule {
			t.Errorf("%s: %q, want %q", tc.ip, got, tc.rule)
		}
	}
}

func TestParseResolve(t *testing.T) {
	for _, tc := range []struct{ in, addr, err string }{
		{"catalog.example:443:127.0.0.1:40123", "127.0.0.1:40123", ""},
		{"Catalog.Example:443:[::1]:8443", "[::1]:8443", ""},
		{"catalog.example:443:127.0.0.1", "", "ADDR:TPORT"},
		{"catalog.example:443", "", "want HOST:PORT:ADDR:TPORT"},
		{"catalog.example:x:127.0.0.1:1", "", "PORT"},
		{"catalog.example:443:host.example:1", "", "not an IP address"},
		{"catalog.example:443:127.0.0.1:0", "", "TPORT"},
	} {
		e, err := ParseResolve(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || e.Addr != tc.addr || e.Host != strings.ToLower(tc.in[:strings.IndexByte(tc.in, ':')]) || e.Port != "443" {
			t.Errorf("%q: %+v, %v", tc.in, e, err)
		}
	}
}

func TestCAFile(t *testing.T) {
	p := newPKI(t)
	s := p.newSite(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) }), "catalog.example")
	// Without the test CA the certificate is unknown.
	c, err := New(Options{Resolve: s.resolve})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.fetch.get(t.Context(), "https://catalog.example/", KindArtifact, ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("unknown CA: %v", err)
	}
	file := t.TempDir() + "/ca.pem"
	if err := os.WriteFile(file, p.ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = New(Options{Resolve: s.resolve, CAFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if b, _, err := c.fetch.get(t.Context(), "https://catalog.example/", KindArtifact, ""); err != nil || string(b) != "hello" {
		t.Fatalf("with --ca-file: %q %v", b, err)
	}
	if _, err := New(Options{CAFile: t.TempDir() + "/none.pem"}); err == nil {
		t.Error("a missing CA file is accepted")
	}
}
