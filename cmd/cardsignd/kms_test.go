package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cloud.google.com/go/kms/apiv1/kmspb"

	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
)

// kmsLifecycle drives a daemon whose keys live in a cloud KMS fake: the
// first key and a rotation are created at the provider, cards signed during
// prepublication carry two signatures, and revoking the retired key with
// on_revoke: disable disables it at the provider (disabled reports that).
func kmsLifecycle(t *testing.T, env []string, config string, disabled func(uri string) bool) {
	t.Helper()
	work := t.TempDir()
	cfgFile := filepath.Join(work, "cardsignd.yaml")
	writeFile(t, cfgFile, config)
	d := startDaemonEnv(t, env, filepath.Join(work, "data"), "--config", cfgFile)
	srv := d.grpc

	keys := func() [][]string {
		var out [][]string
		for _, line := range strings.Split(strings.TrimSpace(mustCLI(t, work, "keys", "list", "--server", srv).Stdout), "\n")[1:] {
			out = append(out, strings.Fields(line))
		}
		return out
	}
	first := keys()
	if len(first) != 1 || first[0][2] != "active" {
		t.Fatalf("first key: %v", first)
	}
	firstKID, firstURI := first[0][0], first[0][len(first[0])-1]

	rot := strings.Fields(strings.Split(mustCLI(t, work, "keys", "rotate", "--prepublish", "1h", "--server", srv).Stdout, "\n")[1])
	secondKID := rot[0]
	out := filepath.Join(work, "card.json")
	writeFile(t, out, mustCLI(t, work, "sign", "--server", srv, cardFile("security.json")).Stdout)
	if k := sigKIDs(t, readFile(t, out)); len(k) != 2 || k[0] != firstKID || k[1] != secondKID {
		t.Fatalf("during prepublication: signatures by %v, want [%s %s]", k, firstKID, secondKID)
	}
	mustCLI(t, work, "verify", "--all", "--jwks", d.jwksURL(), out)
	if _, m := httpGet(t, "http://"+d.http+"/metrics"); !strings.Contains(string(m), "cardsign_backend_attempts_total{backend=") || strings.Contains(string(m), "attempts_total{backend=\"gcpkms\"} 0\n") || strings.Contains(string(m), "attempts_total{backend=\"awskms\"} 0\n") {
		t.Fatalf("/metrics does not count backend requests:\n%s", m)
	}
	_, body := httpGet(t, d.jwksURL())
	writeFile(t, filepath.Join(work, "jwks.json"), string(body))
	verifyJS(t, filepath.Join(work, "jwks.json"), out)

	mustCLI(t, work, "keys", "activate", "--", secondKID, "--server", srv)
	if disabled(firstURI) {
		t.Fatal("the key is disabled at the provider before it was revoked")
	}
	mustCLI(t, work, "keys", "revoke", "--", firstKID, "--reason", "superseded: rotation drill", "--server", srv)
	if !disabled(firstURI) {
		t.Fatalf("on_revoke: disable did not disable %s at the provider\n%s", firstURI, d.log.String())
	}
	r := cli(t, work, nil, "verify", "--jwks", d.jwksURL(), "--profile", "spec", filepath.Join(work, "card.json"))
	if r.Code != 0 {
		t.Fatalf("the card still carries the new key's signature: exit %d\n%s", r.Code, r.Stdout)
	}
	d.stop()
}

func awsEnv() []string {
	return append(os.Environ(),
		"AWS_ACCESS_KEY_ID=AKIDCARDSIGNTEST", "AWS_SECRET_ACCESS_KEY=cardsign-test-secret",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
}

func TestDaemonAWSKMS(t *testing.T) {
	fake, err := awskmsfake.Start(awskmsfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	kmsLifecycle(t, awsEnv(), "keys:\n  backend: awskms\n  on_revoke: disable\nawskms:\n  endpoint: "+fake.URL()+
		"\n  region: us-east-1\n  key_spec: ECC_NIST_P256\n  alias: alias/cardsign\n  rate_limit: 5000\n",
		func(uri string) bool { return fake.Disabled(strings.TrimPrefix(uri, "awskms:///")) })
}

func TestDaemonGCPKMS(t *testing.T) {
	fake, err := gcpkmsfake.Start(gcpkmsfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	const cryptoKey = "projects/cardsign-test/locations/global/keyRings/cardsign/cryptoKeys/agent-cards"
	if _, err := fake.AddKey(cryptoKey, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256); err != nil {
		t.Fatal(err)
	}
	kmsLifecycle(t, os.Environ(), "keys:\n  backend: gcpkms\n  on_revoke: disable\ngcpkms:\n  endpoint: "+fake.Addr()+
		"\n  insecure: true\n  crypto_key: "+cryptoKey+"\n  rate_limit: 5000\n",
		func(uri string) bool { return fake.Disabled(strings.TrimPrefix(uri, "gcpkms://")) })
}
