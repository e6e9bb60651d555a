package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/kms/apiv1/kmspb"
	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/gcpkms"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/server"
	"google.golang.org/grpc/codes"
)

// TestBadCardIsInvalidWhileKMSIsDown: the card is read before any key is
// opened, so with a cold key cache and the KMS down a malformed card or one
// with lint errors is INVALID_ARGUMENT, while a good card is UNAVAILABLE.
func TestBadCardIsInvalidWhileKMSIsDown(t *testing.T) {
	ctx := context.Background()
	fake, err := gcpkmsfake.Start(gcpkmsfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	version, err := fake.AddKey("projects/p/locations/global/keyRings/r/cryptoKeys/cards", kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := server.NewTestAuthority(t)
	if err := a.Backends().Add(gcpkms.Scheme, gcpkms.Constructor,
		backends.Config{Settings: gcpkms.Config{Endpoint: fake.Addr(), Insecure: true, Logger: discard}}); err != nil {
		t.Fatal(err)
	}
	defer a.Backends().Close()
	rec, err := a.RecordKey(ctx, "gcpkms://"+version, backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Admin().ActivateKey(ctx, rec.KID); err != nil {
		t.Fatal(err)
	}
	good := []byte(`{"name":"A","description":"d","supportedInterfaces":[{"url":"https://a.example.com/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)
	if res, err := a.Sign(ctx, server.SignRequest{Card: good}); err != nil || res.Signatures[0].KID != rec.KID {
		t.Fatalf("signing through the KMS while it is up: %v", err)
	}

	// As after a restart, with the KMS down.
	a.ForgetKeys()
	if err := fake.Update(func(o *gcpkmsfake.Options) { o.Unavailable = 1 << 30 }); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]string{"malformed": `{"name":`, "lint errors": `{"name":"A"}`} {
		_, err := a.Sign(ctx, server.SignRequest{Card: []byte(c)})
		t.Run(name, func(t *testing.T) { wantStatus(t, err, codes.InvalidArgument) })
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = a.Sign(cctx, server.SignRequest{Card: good})
	wantStatus(t, err, codes.Unavailable)
}

// TestVerifyCardV03SignedByA2APython (issue 24 #20): the daemon's VerifyCard
// verifies the v0.3 card a2a-python 1.1.0 signed, byte for byte, once the
// SDK's test key is published under the kid it signed with: it reads the
// card as a2a-python maps it (protocolVersion "0.3.0" on every interface).
func TestVerifyCardV03SignedByA2APython(t *testing.T) {
	ctx := t.Context()
	a, dir := server.NewTestAuthority(t)
	// The vectors' Ed25519 test key: seed 0x20 0x21 … 0x3f (their README).
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(0x20 + i)
	}
	der, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "keys", "a2a-python.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Admin().ImportKey(ctx, "file:"+keyFile, "EdDSA", "a2a-python-1.1.0-ed25519"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../testdata/vectors/a2a-python-1.1.0/g_v03_legacy.input-signed.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := pb.NewSigningServiceClient(serveGRPC(t, a)).VerifyCard(ctx, &pb.VerifyCardRequest{Card: data})
	if err != nil {
		t.Fatal(err)
	}
	// The ES256 signature's key is not published here: one valid signature.
	if !v.Valid || len(v.Checks) != 2 || !v.Checks[0].Valid || v.Checks[0].Kid != "a2a-python-1.1.0-ed25519" {
		t.Fatalf("VerifyCard of a2a-python's v0.3 card: %+v", v)
	}
}
