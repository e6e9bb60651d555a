package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
)

// TestCheckConfigCatalogKeys: --check-config and the start refuse a catalog
// no key can sign ES256, saying which key to add, and the refused start
// writes nothing; with an ES256 key the check passes without a word more,
// and the daemon says where the catalog is and serves did.json listing the
// key.
func TestCheckConfigCatalogKeys(t *testing.T) {
	work := t.TempDir()
	config := func(name, data, yaml string) string {
		path := filepath.Join(work, name)
		writeFile(t, path, fmt.Sprintf("data_dir: %q\ngrpc_addr: 127.0.0.1:0\nhttp_addr: 127.0.0.1:0\n%s", data, yaml))
		return path
	}
	const catalog = "catalog:\n  domain: example.com\n"

	// A store whose only key is RS256.
	rsaData := filepath.Join(work, "rsa")
	d := startDaemon(t, rsaData, "--config", config("rsa.yaml", rsaData, "keys:\n  default_alg: RS256\n"))
	_, body := httpGet(t, d.jwksURL())
	rsaKID := kids(t, body)[0]
	d.stop()
	// A fresh store whose first key would be RS256.
	freshData := filepath.Join(work, "fresh")
	for _, tc := range []struct {
		name, data, yaml string
		want             []string
	}{
		{"RS256 key on record", rsaData, "keys:\n  default_alg: RS256\n" + catalog,
			[]string{"catalog.domain", rsaKID, "(RS256, active)", "cardsign keys rotate --alg ES256", "keys.default_alg: ES256"}},
		{"RS256 first key", freshData, "keys:\n  default_alg: RS256\n" + catalog,
			[]string{"keys.default_alg: is RS256", "cannot sign the catalog", "set keys.default_alg: ES256"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.data, tc.yaml)
			before := snapshot(t, tc.data)
			for _, args := range [][]string{{"--check-config", cfg}, {"--config", cfg}} {
				r := runDaemonOnce(t, args...)
				if r.Code != 1 {
					t.Errorf("%v: exit %d, want 1\n%s", args, r.Code, r.Stderr)
				}
				for _, w := range append(tc.want, cfg+":") {
					if !strings.Contains(r.Stderr, w) {
						t.Errorf("%v does not say %q:\n%s", args, w, r.Stderr)
					}
				}
			}
			sameTree(t, tc.name, before, snapshot(t, tc.data))
		})
	}
	if _, err := os.Stat(freshData); !os.IsNotExist(err) {
		t.Fatalf("the refused start made %s (%v)", freshData, err)
	}

	// The embedded default's ES256 key: a clean pass, then did.json.
	esData := filepath.Join(work, "es")
	cfg := config("es.yaml", esData, catalog)
	if r := runDaemonOnce(t, "--check-config", cfg); r.Code != 0 || !regexp.MustCompile(`^cardsignd \S+ \(.*\)\n`+regexp.QuoteMeta(cfg)+`: ok\n$`).MatchString(r.Stderr) {
		t.Fatalf("--check-config with a catalog and an ES256 default: exit %d\n%s", r.Code, r.Stderr)
	}
	d = startDaemon(t, esData, "--config", cfg)
	defer d.stop()
	didURL := "http://" + d.http + "/.well-known/did.json"
	// The harness may see the ready line before the log buffer has it.
	testsupport.WaitFor(t, "the start saying where the catalog is", 5*time.Second, func() bool {
		log := d.log.String()
		return strings.Contains(log, "AI Catalog on") && strings.Contains(log, "did=did:web:example.com") && strings.Contains(log, didURL)
	})
	_, body = httpGet(t, d.jwksURL())
	kid := kids(t, body)[0]
	resp, body := httpGet(t, didURL)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/did+ld+json" || !strings.Contains(string(body), `"did:web:example.com#`+kid+`"`) {
		t.Fatalf("did.json: %d %q %s; want the key %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, kid)
	}
}
