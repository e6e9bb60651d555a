package server

import (
	"io"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/buildinfo"
)

// scrape returns a registry's /metrics page in the text format, as
// Prometheus reads it.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d\n%s", rec.Code, rec.Body)
	}
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

var leLabel = regexp.MustCompile(`le="([^"]*)"`)

// significantDigits counts the digits of a decimal's mantissa without its
// leading and trailing zeros: 0.0025 has 2, 0.0025000000000000005 has 17.
func significantDigits(v string) int {
	v, _, _ = strings.Cut(strings.ToLower(v), "e")
	digits := strings.Trim(strings.NewReplacer(".", "", "-", "", "+", "").Replace(v), "0")
	return len(digits)
}

func TestSignificantDigits(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"0.0025", 2}, {"10", 1}, {"2.5", 2}, {"0.0025000000000000005", 17}, {"1e-05", 1}, {"0.12345678", 8},
	} {
		if got := significantDigits(tc.in); got != tc.want {
			t.Errorf("significantDigits(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestMetricsBucketsClean: every histogram bucket's le label is a short
// decimal that a dashboard or recording rule can write by hand.
func TestMetricsBucketsClean(t *testing.T) {
	m := NewMetrics()
	// Observe once in each histogram with variable labels, so that their
	// buckets are exported too.
	m.backendSign.WithLabelValues("file", "ES256").Observe(0.003)
	m.auditCommit.Observe(0.003)
	page := scrape(t, m)
	les := leLabel.FindAllStringSubmatch(page, -1)
	if len(les) < 3*len(latencyBuckets()) {
		t.Fatalf("want the buckets of three histograms at least, got %d le labels:\n%s", len(les), page)
	}
	for _, le := range les {
		if le[1] == "+Inf" {
			continue
		}
		if n := significantDigits(le[1]); n > 6 {
			t.Errorf("le=%q has %d significant digits, want at most 6", le[1], n)
		}
	}
	buckets := latencyBuckets()
	for i := 1; i < len(buckets); i++ {
		if buckets[i] <= buckets[i-1] {
			t.Errorf("latencyBuckets not increasing at %d: %v", i, buckets)
		}
	}
}

// TestMetricsPresetAtZero: the series alert rules read exist at 0 in a
// fresh registry, before any event, and cardsign_build_info names this build.
func TestMetricsPresetAtZero(t *testing.T) {
	page := scrape(t, NewMetrics())
	want := []string{
		`cardsign_ready 0`,
		`cardsign_registry_stale_cards 0`,
		`cardsign_catalog_signer 0`,
		`cardsign_registry_resigns_total{result="failed"} 0`,
		`cardsign_registry_resigns_total{result="resigned"} 0`,
		`cardsign_readiness_checks_total{result="failed"} 0`,
		`cardsign_readiness_checks_total{result="ok"} 0`,
		`cardsign_catalog_signatures_total{kind="manifest"} 0`,
		`cardsign_catalog_signatures_total{kind="snapshot"} 0`,
		`cardsign_auth_failures_total{method="token",reason="unknown"} 0`,
		`cardsign_auth_failures_total{method="cert",reason="unknown"} 0`,
		`cardsign_auth_failures_total{method="none",reason="unknown"} 0`,
		`cardsign_audit_commit_duration_seconds_count 0`,
	}
	for _, r := range []string{"signed", "refused", "invalid", "error"} {
		want = append(want,
			`cardsign_sign_duration_seconds_count{result="`+r+`"} 0`,
			`cardsign_sign_duration_seconds_bucket{result="`+r+`",le="0.0025"} 0`)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(page, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("fresh scrape lacks %q", w)
		}
	}
	in := buildinfo.Read()
	info := regexp.MustCompile(`(?m)^cardsign_build_info\{(.*)\} 1$`).FindStringSubmatch(page)
	if info == nil {
		t.Fatalf("no cardsign_build_info 1 in the scrape:\n%s", page)
	}
	for _, l := range []string{`version="` + in.Version + `"`, `goversion="` + in.GoVersion + `"`, `platform="` + in.Platform + `"`, `revision="`} {
		if !strings.Contains(info[1], l) {
			t.Errorf("cardsign_build_info{%s}: want %s", info[1], l)
		}
	}
}

// TestMetricsDutiesLeaseHeld: cardsign_duties_lease_held is 1 on the
// replica holding the duties lease and 0 on the others, and follows a
// handover.
func TestMetricsDutiesLeaseHeld(t *testing.T) {
	ctx := t.Context()
	a, dir := newAuthority(t)
	b := replicaOf(t, dir, "b", 0)
	held := func(x *Authority) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^cardsign_duties_lease_held (\S+)$`).FindStringSubmatch(scrape(t, x.metrics))
		if m == nil {
			t.Fatal("no cardsign_duties_lease_held in the scrape")
		}
		return m[1]
	}
	if got := held(b); got != "0" {
		t.Fatalf("before any duty round: %s, want 0", got)
	}
	for _, step := range []struct {
		name         string
		run          func() error
		wantA, wantB string
	}{
		{"a takes the lease", func() error { return a.dutyRound(ctx) }, "1", "0"},
		{"b finds it held", func() error { return b.dutyRound(ctx) }, "1", "0"},
		// A release outside a round shows at a's next round (a gave the
		// lease up inside a round, when it cannot sign, shows at once).
		{"a releases it, b takes it", func() error { a.duties.release(ctx); return b.dutyRound(ctx) }, "1", "1"},
		{"a finds it held by b", func() error { return a.dutyRound(ctx) }, "0", "1"},
	} {
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if ga, gb := held(a), held(b); ga != step.wantA || gb != step.wantB {
			t.Errorf("%s: a %s, b %s; want a %s, b %s", step.name, ga, gb, step.wantA, step.wantB)
		}
	}
}

// TestMetricsCachedSeries: the series resolved once per label values count
// in the exported series of their labels, each its own.
func TestMetricsCachedSeries(t *testing.T) {
	m := NewMetrics()
	for range 3 {
		m.RPC("/cardsign.v1.SigningService/SignCard", "OK")
		m.signRequest(resultSigned, "token:ci")
	}
	m.RPC("/cardsign.v1.SigningService/SignCard", "InvalidArgument")
	m.signRequest(resultInvalid, "token:ci")
	m.signRequest(resultSigned, "token:other")
	m.signed(resultSigned, 300*time.Microsecond)
	m.signed(resultSigned, 2*time.Second)
	page := scrape(t, m)
	for _, want := range []string{
		`cardsign_grpc_requests_total{code="OK",method="/cardsign.v1.SigningService/SignCard"} 3`,
		`cardsign_grpc_requests_total{code="InvalidArgument",method="/cardsign.v1.SigningService/SignCard"} 1`,
		`cardsign_sign_requests_total{caller="token:ci",result="signed"} 3`,
		`cardsign_sign_requests_total{caller="token:ci",result="invalid"} 1`,
		`cardsign_sign_requests_total{caller="token:other",result="signed"} 1`,
		`cardsign_sign_duration_seconds_count{result="signed"} 2`,
		`cardsign_sign_duration_seconds_bucket{result="signed",le="0.0005"} 1`,
	} {
		if !strings.Contains(page, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
