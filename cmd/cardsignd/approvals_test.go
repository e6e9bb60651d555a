package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
)

// approvalCard is a card whose interfaces point at hosts.
func approvalCard(version string, hosts ...string) []byte {
	var ifaces []string
	for _, h := range hosts {
		ifaces = append(ifaces, fmt.Sprintf(`{"url":"https://%s/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}`, h))
	}
	return []byte(`{"name":"Orders","description":"d","supportedInterfaces":[` + strings.Join(ifaces, ",") + `],"version":"` + version +
		`","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)
}

// as is ctx carrying a bearer token.
func as(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// heldFor returns the approval id a SignCard error carries, or fails.
func heldFor(t *testing.T, err error) string {
	t.Helper()
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "APPROVAL_REQUIRED" {
			return info.GetMetadata()["approval_id"]
		}
	}
	t.Fatalf("SignCard: %v; want FAILED_PRECONDITION with an APPROVAL_REQUIRED ErrorInfo", err)
	return ""
}

// TestApprovalsReplicasOnPostgreSQL: an approval asked for on one replica
// is seen, voted on and used on the other; two votes of one approver sent
// to both replicas at once count once; the required approvals make the
// approval approved exactly once.
func TestApprovalsReplicasOnPostgreSQL(t *testing.T) {
	url := newPGDatabase(t)
	ci, ciSum := token("ci")
	alice, aliceSum := token("alice")
	bob, bobSum := token("bob")
	rs := startReplicas(t, url, 2, replicaOptions{config: fmt.Sprintf(`auth:
  tokens:
    - {name: ci, sha256: %s, roles: [signer]}
    - {name: alice, sha256: %s, roles: [approver]}
    - {name: bob, sha256: %s, roles: [approver]}
policy:
  rules:
    - name: new-host
      when: "!diff.first && size(diff.hosts_added) > 0"
      outcome: require_approval
      approvals: {count: 2}
`, ciSum, aliceSum, bobSum)})
	sign := []pb.SigningServiceClient{dialDaemon(t, rs.ds[0].grpc), dialDaemon(t, rs.ds[1].grpc)}
	desk := []pb.ApprovalServiceClient{pb.NewApprovalServiceClient(dialPlain(t, rs.ds[0].grpc)), pb.NewApprovalServiceClient(dialPlain(t, rs.ds[1].grpc))}
	ctx := t.Context()

	if _, err := sign[0].SignCard(as(ctx, ci), &pb.SignCardRequest{Card: approvalCard("1", "orders.example.com"), Register: true}); err != nil {
		t.Fatalf("first version: %v", err)
	}
	v2 := &pb.SignCardRequest{Card: approvalCard("2", "orders.example.com", "eu.orders.example.com"), Register: true}
	_, err := sign[0].SignCard(as(ctx, ci), v2)
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a new host: %v; want FAILED_PRECONDITION", err)
	}
	id := heldFor(t, err)

	// Seen on the other replica; the requester cannot sign under it yet.
	got, err := desk[1].GetApproval(as(ctx, alice), &pb.GetApprovalRequest{Id: id})
	if err != nil || got.GetApproval().GetState() != "pending" || got.GetApproval().GetRequester() != "token:ci" {
		t.Fatalf("GetApproval on replica 1: %v %v", got, err)
	}
	v2.ApprovalId = id
	if _, err := sign[1].SignCard(as(ctx, ci), v2); status.Code(err) != codes.FailedPrecondition || heldFor(t, err) != id {
		t.Fatalf("signing under a pending approval: %v", err)
	}
	if _, err := desk[1].Approve(as(ctx, alice), &pb.ApproveRequest{Id: id}); err != nil {
		t.Fatalf("alice approves on replica 1: %v", err)
	}
	// Bob's vote reaches both replicas at once: it counts once.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { _, errs[i] = desk[i].Approve(as(ctx, bob), &pb.ApproveRequest{Id: id}) })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("bob's two votes: %v, %v; want exactly one counted", errs[0], errs[1])
	}
	for _, e := range errs {
		// Whichever came second finds bob's vote, or the request approved by it.
		if e != nil && (status.Code(e) != codes.FailedPrecondition || !strings.Contains(e.Error(), "voted already") && !strings.Contains(e.Error(), "it is approved")) {
			t.Fatalf("bob's second vote: %v; want FAILED_PRECONDITION, voted already or approved", e)
		}
	}
	got, err = desk[0].GetApproval(as(ctx, alice), &pb.GetApprovalRequest{Id: id})
	if err != nil || got.GetApproval().GetState() != "approved" || got.GetApproval().GetApprovals() != 2 || len(got.GetApproval().GetVotes()) != 2 {
		t.Fatalf("GetApproval on replica 0 after the votes: %v %v", got, err)
	}
	res, err := sign[1].SignCard(as(ctx, ci), v2)
	if err != nil {
		t.Fatalf("signing under the approval on replica 1: %v", err)
	}
	if res.GetAgentVersion() != 2 {
		t.Fatalf("registered as version %d, want 2", res.GetAgentVersion())
	}
	if _, err := desk[0].GetApproval(as(ctx, bob), &pb.GetApprovalRequest{Id: "apr_" + strings.Repeat("a", 26)}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetApproval of an unknown id: %v", err)
	}
	if _, err := desk[0].GetApproval(as(ctx, bob), &pb.GetApprovalRequest{Id: "apr_\x1b[2J"}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"apr_\u001b[2J" is not an approval id`) {
		t.Fatalf("GetApproval of a hostile id: %v", err)
	}
	// The shared audit log: the request, one approval each, the signature.
	recs, err := openPG(t, url).ListAudit(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	digest := got.GetApproval().GetCanonicalSha256()
	var steps []string
	for _, r := range recs {
		// One signed record per signature (one per canonical profile).
		if step := r.Outcome + " " + r.Caller; bytes.Equal(r.CanonicalSHA256, digest) && (len(steps) == 0 || steps[len(steps)-1] != step) {
			steps = append(steps, step)
		}
	}
	want := "approval.request token:ci|approval.approve token:alice|approval.approve token:bob|signed token:ci"
	if got := strings.Join(steps, "|"); got != want {
		t.Fatalf("audit records of version 2:\n%s\nwant\n%s", got, want)
	}
}
