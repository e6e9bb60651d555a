package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/grpc/codes"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/gcpkms"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/policy"
)

func TestPolicyRefusalIsAudited(t *testing.T) {
	ctx := context.Background()
	a, _ := newAuthority(t)
	pol, probs := policy.Compile(policy.Config{Rules: []policy.Rule{{
		Name: "team-a", Identities: []string{"token:team-a"}, CardNames: []string{"*"}, Hosts: []string{"*.team-a.example.com"},
	}}})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	a.cfg.Policy = pol
	card := []byte(`{"name":"A","description":"d","supportedInterfaces":[{"url":"https://evil.example.net/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)
	id := access.Identity{Name: "token:team-a", Method: access.MethodToken, Roles: []access.Role{access.RoleSigner}}
	_, err := a.Sign(ctx, SignRequest{Card: card, Caller: id.Name, Identity: id, RequestID: "r1"})
	var refused *RefusedError
	// Record 1 is the first key's creation.
	if !errors.As(err, &refused) || refused.Refusal.Rule != "team-a" || refused.Seq != 2 {
		t.Fatalf("want a refusal by team-a audited as record 2, got %v", err)
	}
	recs, err := a.store.ListAudit(ctx, 1, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("audit: %v %v", recs, err)
	}
	r := recs[0]
	if r.Outcome != audit.OutcomeRefused || r.Caller != "token:team-a" || r.RequestID != "r1" || r.CardName != "A" || r.KID != "" || len(r.CanonicalSHA256) != 32 || r.Reason != refused.Error() {
		t.Fatalf("refused record: %+v", r)
	}
	// The same card for a host the rule allows is signed and chained after.
	ok := []byte(strings.Replace(string(card), "evil.example.net", "api.team-a.example.com", 1))
	res, err := a.Sign(ctx, SignRequest{Card: ok, Caller: id.Name, Identity: id})
	if err != nil || res.Audit[0].Seq != 3 {
		t.Fatalf("allowed card: %v", err)
	}
}

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
	a, _ := newAuthority(t)
	if err := a.cfg.Backends.Add(gcpkms.Scheme, gcpkms.Constructor,
		backends.Config{Settings: gcpkms.Config{Endpoint: fake.Addr(), Insecure: true, Logger: discard}}); err != nil {
		t.Fatal(err)
	}
	defer a.cfg.Backends.Close()
	rec, err := a.record(ctx, "gcpkms://"+version, backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.store.CreateKey(ctx, rec, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ActivateKey(ctx, rec.KID); err != nil {
		t.Fatal(err)
	}
	good := []byte(`{"name":"A","description":"d","supportedInterfaces":[{"url":"https://a.example.com/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)
	if res, err := a.Sign(ctx, SignRequest{Card: good}); err != nil || res.Signatures[0].KID != rec.KID {
		t.Fatalf("signing through the KMS while it is up: %v", err)
	}

	// As after a restart, with the KMS down.
	a.keys.forget()
	if err := fake.Update(func(o *gcpkmsfake.Options) { o.Unavailable = 1 << 30 }); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]string{"malformed": `{"name":`, "lint errors": `{"name":"A"}`} {
		_, err := a.Sign(ctx, SignRequest{Card: []byte(c)})
		t.Run(name, func(t *testing.T) { wantStatus(t, err, codes.InvalidArgument) })
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = a.Sign(cctx, SignRequest{Card: good})
	wantStatus(t, err, codes.Unavailable)
}
