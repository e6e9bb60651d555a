package server_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/grpc/codes"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/gcpkms"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/server"
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
