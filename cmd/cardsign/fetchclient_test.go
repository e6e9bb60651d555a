package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testpki"
)

// TestFetchesTrustTheCAFile: against a real cardsignd serving HTTPS with a
// certificate of a CA that only the CA file holds, every command that
// fetches over https (verify --jwks/--log-key and its revocation document,
// audit verify --jwks/--log/--log-key, log checkpoint and monitor) verifies
// with --ca-file or $CARDSIGN_CA_FILE, and fails on the certificate
// without either.
func TestFetchesTrustTheCAFile(t *testing.T) {
	clearConnEnv(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "fetch test root")
	certPEM, keyPEM := ca.Issue(t, testpki.ServerLeaf())
	certFile, keyFile := testpki.WriteFiles(t, dir, "server", certPEM, keyPEM)
	caFile := filepath.Join(dir, "ca.pem")
	writeFile(t, caFile, ca.CertPEM)
	d := runDaemon(t, daemonBin, filepath.Join(dir, "data"),
		"limits:\n  rate: 0\ntls:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+"\n")
	signed := filepath.Join(dir, "signed.json")
	r := mustRun(t, dir, "sign", "--server", d.grpc, "--ca-file", caFile, filepath.Join(repoRoot, "testdata/cards/security.json"))
	writeFile(t, signed, []byte(r.Stdout))

	base := "https://" + d.http
	jwksURL, logKey, logURL := base+"/.well-known/jwks.json", base+"/.well-known/cardsign-log-key", base+"/log/"
	commands := []struct {
		name string
		args []string
	}{
		{"verify", []string{"verify", "--jwks", jwksURL, "--log-key", logKey, signed}},
		{"audit verify", []string{"audit", "verify", "--server", d.grpc, "--jwks", jwksURL, "--log", logURL, "--log-key", logKey}},
		{"log checkpoint", []string{"log", "checkpoint", "--url", logURL, "--log-key", logKey}},
		{"log monitor", []string{"log", "monitor", "--url", logURL, "--log-key", logKey, "--state", filepath.Join(dir, "monitor-state.json")}},
	}
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			if r := cardsign(t, dir, nil, append(c.args, "--ca-file", caFile)...); r.Code != exitOK {
				t.Errorf("with --ca-file: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			t.Setenv(caFileEnv, caFile)
			if r := cardsign(t, dir, nil, c.args...); r.Code != exitOK {
				t.Errorf("with $%s: exit %d\n%s%s", caFileEnv, r.Code, r.Stdout, r.Stderr)
			}
			t.Setenv(caFileEnv, "")
			if c.name == "audit verify" {
				return // without a CA file, its gRPC call is refused first: that is client_test's
			}
			if r := cardsign(t, dir, nil, c.args...); r.Code == exitOK || !strings.Contains(r.Stderr, "certificate") {
				t.Errorf("without a CA file: exit %d, want a certificate error\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
		})
	}
}

// TestFetchCAFileRefused: a CA file that cannot serve is a usage error that
// names where it came from, the path and why, before anything is fetched.
func TestFetchCAFileRefused(t *testing.T) {
	clearConnEnv(t)
	dir := t.TempDir()
	noCert := filepath.Join(dir, "no-cert.pem")
	writeFile(t, noCert, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	missing := filepath.Join(dir, "missing.pem")
	// Nothing listens here: a fetch would fail differently.
	const url = "https://127.0.0.1:1/.well-known/jwks.json"
	card := filepath.Join(repoRoot, "testdata/cards/security.json")
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want string
	}{
		{"verify, missing file", "", []string{"verify", "--jwks", url, "--ca-file", missing, card}, "--ca-file: open " + missing},
		{"verify, no certificate", "", []string{"verify", "--jwks", url, "--ca-file", noCert, card}, "--ca-file " + noCert + " holds no PEM certificate"},
		{"verify, a directory from the environment", dir, []string{"verify", "--jwks", url, card}, "$" + caFileEnv + ": " + dir + " is not a regular file (it is a directory)"},
		{"log checkpoint", "", []string{"log", "checkpoint", "--url", "https://127.0.0.1:1/log/", "--log-key", "https://127.0.0.1:1/key", "--ca-file", noCert}, "holds no PEM certificate"},
		{"log monitor, from the environment", noCert, []string{"log", "monitor", "--url", "https://127.0.0.1:1/log/", "--log-key", "https://127.0.0.1:1/key", "--state", filepath.Join(dir, "s")},
			"$" + caFileEnv + " " + noCert + " holds no PEM certificate"},
		{"log key create takes none", "", []string{"log", "key", "create", "--origin", "example.com/log", "--ca-file", noCert, filepath.Join(dir, "k.pem")}, "--ca-file is not a flag of log key create"},
		{"catalog verify", "", []string{"catalog", "verify", "--ca-file", missing, "https://127.0.0.1:1/.well-known/ai-catalog.json"}, "--ca-file: open " + missing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(caFileEnv, tc.env)
			r := runCLI(t, tc.args...)
			if r.Code != exitUsage || !strings.Contains(r.Stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d saying %q", r.Code, r.Stderr, exitUsage, tc.want)
			}
		})
	}
}
