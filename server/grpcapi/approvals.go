package grpcapi

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/approval"
	"github.com/cardsign/cardsign/carddiff"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/store"
)

// ApprovalRequiredReason is the google.rpc.ErrorInfo reason of a SignCard
// answered FAILED_PRECONDITION because a signing policy rule holds the card
// for approval; its metadata carry approval_id, rule, required, approvals,
// group, expires_at and audit_seq.
const ApprovalRequiredReason = "APPROVAL_REQUIRED"

// ErrorDomain is the google.rpc.ErrorInfo domain of cardsignd's errors.
const ErrorDomain = "cardsign.dev"

// approvalService is the second pair of eyes (approval.Desk).
type approvalService struct {
	pb.UnimplementedApprovalServiceServer
	*services
	desk *approval.Desk
}

var _ pb.ApprovalServiceServer = approvalService{}

// maxApprovalsPage bounds one ListApprovals answer.
const maxApprovalsPage = 1000

func (s approvalService) ListApprovals(ctx context.Context, req *pb.ListApprovalsRequest) (*pb.ListApprovalsResponse, error) {
	switch req.GetState() {
	case "", store.ApprovalPending, store.ApprovalApproved, store.ApprovalDenied, store.ApprovalExpired:
	default:
		return nil, s.fail(ctx, &server.InvalidArgumentError{Field: "state", Reason: fmt.Sprintf("%q: want pending, approved, denied, expired or empty", req.GetState())})
	}
	limit := int(req.GetLimit())
	if limit < 0 || limit > maxApprovalsPage {
		return nil, s.fail(ctx, &server.InvalidArgumentError{Field: "limit", Reason: fmt.Sprintf("%d: want 0 (100) to %d", limit, maxApprovalsPage)})
	}
	list, err := s.desk.List(ctx, identity(ctx), store.ApprovalFilter{State: req.GetState(), Requester: req.GetRequester(), Before: req.GetBefore(), Limit: limit})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &pb.ListApprovalsResponse{}
	for _, a := range list {
		out.Approvals = append(out.Approvals, s.approvalPB(a, false))
	}
	return out, nil
}

func (s approvalService) GetApproval(ctx context.Context, req *pb.GetApprovalRequest) (*pb.GetApprovalResponse, error) {
	a, err := s.desk.Get(ctx, identity(ctx), req.GetId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &pb.GetApprovalResponse{Approval: s.approvalPB(a, true)}, nil
}

func (s approvalService) Approve(ctx context.Context, req *pb.ApproveRequest) (*pb.ApproveResponse, error) {
	var digest []byte
	if len(req.GetCanonicalSha256()) > 0 {
		digest = req.GetCanonicalSha256()
	}
	a, rec, err := s.desk.Vote(ctx, voter(ctx), req.GetId(), true, req.GetReason(), digest)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &pb.ApproveResponse{Approval: s.approvalPB(a, false), AuditSeq: rec.Seq}, nil
}

func (s approvalService) Deny(ctx context.Context, req *pb.DenyRequest) (*pb.DenyResponse, error) {
	a, rec, err := s.desk.Vote(ctx, voter(ctx), req.GetId(), false, req.GetReason(), nil)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &pb.DenyResponse{Approval: s.approvalPB(a, false), AuditSeq: rec.Seq}, nil
}

// voter is the caller as a vote's audit record names it.
func voter(ctx context.Context) approval.Voter {
	return approval.Voter{Identity: identity(ctx), Caller: caller(ctx), RequestID: requestID(ctx)}
}

// approvalPB converts an approval for the wire, with the card when
// withCard.
func (s approvalService) approvalPB(a store.Approval, withCard bool) *pb.Approval {
	out := &pb.Approval{
		Id: a.ID, State: s.desk.State(a), Requester: a.Requester, RequestId: a.RequestID, Rule: a.Rule, Group: a.Group,
		Required: int32(a.Required), Approvals: int32(a.Approvals()), CanonicalSha256: a.CanonicalSHA256,
		CardName: a.CardName, CardVersion: a.CardVersion, AgentId: a.AgentID,
		CreatedAt: timestamppb.New(a.CreatedAt), ExpiresAt: timestamppb.New(a.ExpiresAt),
		DiffJson: a.Diff, AuditSeq: a.Seq,
	}
	if d, err := carddiff.Parse([]byte(a.Diff)); err == nil {
		out.Diff = d.Lines()
	}
	if withCard {
		out.Card = a.Request
	}
	for _, v := range a.Votes {
		out.Votes = append(out.Votes, &pb.ApprovalVote{Approver: v.Approver, Time: timestamppb.New(v.Time), Approve: v.Approve, Reason: v.Reason, AuditSeq: v.Seq})
	}
	return out
}

// approvalRequired is the status of a card held for approval: what to
// wait for, in the message and, for clients, in an ErrorInfo.
func approvalRequired(e *approval.RequiredError) error {
	a := e.Approval
	st := status.New(codes.FailedPrecondition, e.Error())
	d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ApprovalRequiredReason, Domain: ErrorDomain, Metadata: map[string]string{
		"approval_id": a.ID, "rule": a.Rule, "group": a.Group,
		"required": strconv.Itoa(a.Required), "approvals": strconv.Itoa(a.Approvals()),
		"expires_at": a.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z07:00"), "audit_seq": strconv.FormatInt(a.Seq, 10),
	}})
	if err != nil {
		return st.Err()
	}
	return d.Err()
}
