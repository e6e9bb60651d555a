package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/grpc/codes"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
)

// activeKMSKey starts a daemon with config and returns it with the kid and
// URI of its active key, after one card signed with it (so the daemon
// holds the key open, as it does in service).
func activeKMSKey(t *testing.T, env []string, config string) (d *daemon, kid, uri string) {
	t.Helper()
	work := t.TempDir()
	cfgFile := filepath.Join(work, "cardsignd.yaml")
	writeFile(t, cfgFile, config)
	d = startDaemonEnv(t, env, filepath.Join(work, "data"), "--config", cfgFile)
	lines := strings.Split(strings.TrimSpace(mustCLI(t, work, "keys", "list", "--server", d.grpc).Stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("keys list: %q", lines)
	}
	f := strings.Fields(lines[1])
	kid, uri = f[0], f[len(f)-1]
	mustCLI(t, work, "sign", "--server", d.grpc, cardFile("security.json"))
	return d, kid, uri
}

// signStatus signs a card through the daemon's gRPC API and checks the
// status: code, and a message naming the kid and saying what to do.
func signStatus(t *testing.T, d *daemon, code codes.Code, substrs ...string) {
	t.Helper()
	card, err := os.ReadFile(cardFile("security.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = dialDaemon(t, d.grpc).SignCard(context.Background(), &pb.SignCardRequest{Card: card})
	wantCode(t, err, code, substrs...)
}

// TestDaemonAWSKMSKeyDisabledOrDeleted: a key disabled at AWS KMS behind
// the daemon's back makes signing FAILED_PRECONDITION naming the key (it
// was INTERNAL), and once the key is deleted, NOT_FOUND naming it.
func TestDaemonAWSKMSKeyDisabledOrDeleted(t *testing.T) {
	fake, err := awskmsfake.Start(awskmsfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	d, kid, uri := activeKMSKey(t, awsEnv(), "keys:\n  backend: awskms\nawskms:\n  endpoint: "+fake.URL()+
		"\n  region: us-east-1\n  key_spec: ECC_NIST_P256\n  rate_limit: 5000\n")
	arn := strings.TrimPrefix(uri, "awskms:///")

	if err := fake.DisableKey(arn); err != nil {
		t.Fatal(err)
	}
	signStatus(t, d, codes.FailedPrecondition, kid, "disabled at its provider", "enable it at the provider, or rotate")
	if err := fake.DeleteKey(arn); err != nil {
		t.Fatal(err)
	}
	signStatus(t, d, codes.NotFound, kid, "not found at its provider", "rotate to a new key and revoke")
	d.stop()
}

// TestDaemonGCPKMSKeyDisabled: a key version disabled at Cloud KMS behind
// the daemon's back makes signing FAILED_PRECONDITION naming the key.
func TestDaemonGCPKMSKeyDisabled(t *testing.T) {
	fake, err := gcpkmsfake.Start(gcpkmsfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	const cryptoKey = "projects/cardsign-test/locations/global/keyRings/cardsign/cryptoKeys/disabled-behind"
	if _, err := fake.AddKey(cryptoKey, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256); err != nil {
		t.Fatal(err)
	}
	d, kid, uri := activeKMSKey(t, os.Environ(), "keys:\n  backend: gcpkms\ngcpkms:\n  endpoint: "+fake.Addr()+
		"\n  insecure: true\n  crypto_key: "+cryptoKey+"\n  rate_limit: 5000\n")

	if err := fake.SetState(strings.TrimPrefix(uri, "gcpkms://"), kmspb.CryptoKeyVersion_DISABLED); err != nil {
		t.Fatal(err)
	}
	signStatus(t, d, codes.FailedPrecondition, kid, "disabled at its provider", "enable it at the provider, or rotate")
	d.stop()
}
