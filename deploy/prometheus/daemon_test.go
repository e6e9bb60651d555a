package prometheus

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// binary is the environment variable's path, or the command built from the
// repository root into dir as scripts/test builds its static binaries
// (CGO_ENABLED=0, -tags nopkcs11).
func binary(t *testing.T, env, cmd, dir string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	out := filepath.Join(dir, filepath.Base(cmd))
	build := exec.Command("go", "build", "-C", "../..", "-tags", "nopkcs11", "-o", out, cmd)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s from the repository root (set %s to use another binary): %v\n%s", cmd, env, err, b)
	}
	return out
}

// writeServingCert writes a self-signed P-256 certificate for 127.0.0.1
// and its key, and returns a pool that trusts it.
func writeServingCert(t *testing.T, certFile, keyFile string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cardsignd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// readyLine is cardsignd's start-up line with its listeners' addresses.
var readyLine = regexp.MustCompile(`msg="cardsignd ready" grpc=(\S+) http=(\S+)`)

// exported starts a real cardsignd with what the rules and the dashboard
// need switched on (TLS, token authentication, a KMS backend whose own
// counters are exported, a rate limit of one call), signs a card through
// it, is refused one over the rate limit, and scrapes /metrics as
// Prometheus does, with the auditor's token. It returns the metric
// families by name.
func exported(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	dir := t.TempDir()
	cardsignd := binary(t, "CARDSIGND_BIN", "./cmd/cardsignd", dir)
	cardsign := binary(t, "CARDSIGN_BIN", "./cmd/cardsign", dir)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	pool := writeServingCert(t, certFile, keyFile)
	const scrapeToken, signToken = "prometheus-scrape-token", "pipeline-sign-token"
	hash := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	signTokenFile := filepath.Join(dir, "sign.token")
	if err := os.WriteFile(signTokenFile, []byte(signToken), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`data_dir: %s
grpc_addr: 127.0.0.1:0
http_addr: 127.0.0.1:0
tls:
  cert_file: %s
  key_file: %s
auth:
  tokens:
    - name: prometheus
      sha256: %q
      roles: [auditor]
    - name: pipeline
      sha256: %q
      roles: [signer]
# A KMS backend exports its own counters (cardsign_backend_*) from the
# start; nothing is asked of it, so no KMS needs to answer.
awskms:
  region: us-east-1
  endpoint: http://127.0.0.1:9
limits:
  rate: 0.001
  burst: 1
# An event sink exports its series (cardsign_events_*) from the start.
events:
  sinks:
    - {name: siem, type: file, path: %s}
# A log witness exports its series (cardsign_witness_*) from the start;
# nothing answers at this address, so its requests fail.
log:
  witnesses:
    - url: http://127.0.0.1:9
      key: witness.example.net+ec9e6f45+BLC6mPvVsfByaKa3MC9/YJ6Q3TRfnXdW5kDTwu/+W7H+
`, data, certFile, keyFile, hash(scrapeToken), hash(signToken), filepath.Join(dir, "events.jsonl"))
	configFile := filepath.Join(dir, "cardsignd.yaml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, cardsignd, "--config", configFile)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addrs := make(chan []string, 1)
	var logged strings.Builder
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if logged.Len() < 1<<16 {
				logged.WriteString(sc.Text() + "\n")
			}
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- m[1:]
			}
		}
	}()
	var grpcAddr, httpAddr string
	select {
	case a := <-addrs:
		grpcAddr, httpAddr = a[0], a[1]
	case <-logDone:
		t.Fatalf("cardsignd exited before it was ready:\n%s", logged.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("cardsignd not ready after 60s")
	}

	sign := func() (string, error) {
		c := exec.CommandContext(ctx, cardsign, "sign", "--server", grpcAddr, "--ca-file", certFile, "--token-file", signTokenFile, "../../testdata/cards/unicode.json")
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if out, err := sign(); err != nil {
		t.Fatalf("cardsign sign: %v\n%s", err, out)
	}
	if out, err := sign(); err == nil || !strings.Contains(out, "ResourceExhausted") {
		t.Fatalf("a second cardsign sign within a rate of one: want ResourceExhausted, got %v\n%s", err, out)
	}

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+httpAddr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+scrapeToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics with the auditor's token: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// seriesNames are the names of the series a scrape of these families
// stores: a histogram's family name is stored only as NAME_bucket,
// NAME_sum and NAME_count, a summary's as NAME, NAME_sum and NAME_count.
func seriesNames(families map[string]*dto.MetricFamily) map[string]bool {
	names := map[string]bool{}
	for name, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
	}
	return names
}

// synthesized are the series Prometheus itself adds to every scrape.
var synthesized = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling", "scrape_series_added"}

// TestAgainstCardsignd checks the rules, the dashboard and
// docs/monitoring.md against the metrics of a real cardsignd.
func TestAgainstCardsignd(t *testing.T) {
	families := exported(t)
	names := seriesNames(families)
	for _, s := range synthesized {
		names[s] = true
	}
	rules := loadRules(t)

	t.Run("expressions name exported metrics", func(t *testing.T) {
		p := newParser()
		for _, e := range append(ruleExpressions(rules), dashboardExpressions(t)...) {
			got, err := metricNames(p, e.expr)
			if err != nil {
				t.Errorf("%s: %v", e.where, err)
				continue
			}
			for _, n := range got {
				if !names[n] {
					t.Errorf("%s: %s is not a series cardsignd exports (expression %q)", e.where, n, e.expr)
				}
			}
		}
	})
	t.Run("promtool test series name exported metrics", func(t *testing.T) {
		p := newParser()
		for _, s := range unitTestSeries(t) {
			lbls, _, err := p.ParseSeriesDesc(s)
			if err != nil {
				t.Errorf("%s: series %q: %v", unitTestsFile, s, err)
				continue
			}
			if name := lbls.Get(model.MetricNameLabel); !names[name] {
				t.Errorf("%s: series %q: %s is not a series cardsignd exports", unitTestsFile, s, name)
			}
		}
	})
	t.Run("docs/monitoring.md", func(t *testing.T) {
		checkMonitoringDoc(t, families, rules)
	})
}
