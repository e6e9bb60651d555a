package server_test

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/server"
)

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
