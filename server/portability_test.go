package server_test

import (
	"strings"
	"testing"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/server"
)

// TestSignAndVerifyReportPortability: SignCard says why it added a
// python-ascii signature and that every verifier family is covered;
// VerifyCard says the same of the signed card, and of a card signed only
// for a2a-python ≤ 1.1 that the others are not.
func TestSignAndVerifyReportPortability(t *testing.T) {
	a, _ := server.NewTestAuthority(t)
	client := pb.NewSigningServiceClient(serveGRPC(t, a))
	ctx := t.Context()
	data := testsupport.Card(t, "unicode.json")
	res, err := client.SignCard(ctx, &pb.SignCardRequest{Card: data})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Signatures) != 2 || res.Signatures[1].Profile != "python-ascii" {
		t.Fatalf("signatures %v, want spec and python-ascii", res.Signatures)
	}
	if len(res.PythonDivergences) == 0 || !strings.Contains(res.PythonDivergences[0], "non-ASCII") {
		t.Fatalf("python_divergences %v", res.PythonDivergences)
	}
	checkAll := func(what string, rows []*pb.VerifierSupport, want map[string]bool) {
		t.Helper()
		if len(rows) != 5 {
			t.Fatalf("%s: %d portability rows, want 5", what, len(rows))
		}
		for _, r := range rows {
			if r.Covered != want[r.Verifier] || (!r.Covered && r.Reason == "") {
				t.Fatalf("%s: %s covered=%v (%s), want %v", what, r.Verifier, r.Covered, r.Reason, want[r.Verifier])
			}
		}
	}
	// unicode.json has no security schemes for @a2a-js/sdk's resolver to
	// lose (a2a-js#663): that path computes the sdk bytes.
	all := map[string]bool{"spec": true, "@a2a-js/sdk ≥1.3": true, "a2a-python ≥1.2": true, "a2a-python ≤1.1": true, "@a2a-js/sdk resolver": true}
	checkAll("SignCard", res.Portability, all)
	v, err := client.VerifyCard(ctx, &pb.VerifyCardRequest{Card: res.SignedCard})
	if err != nil || !v.Valid {
		t.Fatalf("VerifyCard: %v %v", v, err)
	}
	checkAll("VerifyCard", v.Portability, all)

	only, err := client.SignCard(ctx, &pb.SignCardRequest{Card: data, Profile: pb.Profile_PROFILE_PYTHON_ASCII})
	if err != nil {
		t.Fatal(err)
	}
	v, err = client.VerifyCard(ctx, &pb.VerifyCardRequest{Card: only.SignedCard})
	if err != nil || !v.Valid {
		t.Fatalf("VerifyCard: %v %v", v, err)
	}
	checkAll("VerifyCard of a python-ascii-only card", v.Portability, map[string]bool{"a2a-python ≤1.1": true})
}
