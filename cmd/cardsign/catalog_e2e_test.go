package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/strictjson"
)

// daemonSite fetches what cardsignd serves for https://DOMAIN/... (a web
// server would route those paths to it) from its loopback HTTP listener:
// the DID document and the card URLs.
type daemonSite struct{ addr, domain string }

func (s daemonSite) get(ctx context.Context, url string) ([]byte, error) {
	path, ok := strings.CutPrefix(url, "https://"+s.domain)
	if !ok {
		return nil, fmt.Errorf("not on %s: %q", s.domain, url)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func (s daemonSite) ResolveDID(ctx context.Context, did string) ([]byte, error) {
	if did != aicatalog.DID(s.domain) {
		return nil, fmt.Errorf("no DID document for %q", did)
	}
	return s.get(ctx, "https://"+s.domain+aicatalog.DIDPath)
}

func (s daemonSite) FetchArtifact(ctx context.Context, url string) ([]byte, error) {
	return s.get(ctx, url)
}

// TestCatalogDaemon: cardsignd with a catalog section publishes, by its
// duty, the catalog of its public agents registered through the CLI; the
// catalog verifies (did:web from the daemon's did.json, every digest
// against the card URL's bytes); a card revoked with agents revoke leaves
// it within a duty round.
func TestCatalogDaemon(t *testing.T) {
	const domain = "agents.example.com"
	dir, d, srv := registryDaemon(t, "limits:\n  rate: 0\ncatalog:\n  domain: "+domain+"\n")
	for _, reg := range []struct{ agent, card, vis string }{
		{"alpha", "security.json", "public"}, {"beta", "spec-sample-stripped.json", "public"}, {"hidden", "unicode.json", "private"},
	} {
		mustRun(t, dir, srv("sign", "--register", "--agent", reg.agent, "--visibility", reg.vis, filepath.Join(repoRoot, "testdata/cards", reg.card))...)
	}
	site := daemonSite{addr: d.http, domain: domain}
	// ids fetches the catalog and returns its entries' identifiers once it
	// verifies (nil while it is being made or does not verify yet).
	ids := func() []string {
		resp, err := http.Get("http://" + d.http + aicatalog.WellKnownPath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != aicatalog.MediaType {
			return nil
		}
		rep, err := aicatalog.VerifyCatalog(t.Context(), body, aicatalog.Options{Resolver: site, Fetcher: site})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Logf("catalog does not verify (yet): %+v %+v", rep.Catalog, rep.Entries)
			return nil
		}
		doc, err := strictjson.Parse(body, strictjson.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		entries, _ := doc.Get("entries")
		var out []string
		for _, e := range entries.Arr {
			id, _ := e.Get("identifier")
			out = append(out, id.Str)
		}
		return out
	}
	want := []string{"urn:air:" + domain + ":a2a:alpha", "urn:air:" + domain + ":a2a:beta"}
	testsupport.WaitFor(t, "the catalog of the two public agents", 20*time.Second, func() bool { return slices.Equal(ids(), want) })

	mustRun(t, dir, srv("agents", "revoke", "alpha", "--reason", "leaked with a staging URL")...)
	testsupport.WaitFor(t, "alpha to leave the catalog", 20*time.Second, func() bool { return slices.Equal(ids(), want[1:]) })
}
