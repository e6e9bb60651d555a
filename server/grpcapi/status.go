package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cardsign/cardsign/approval"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
)

// Status maps an error to the gRPC status a client can act on. Card and
// lint errors carry their JSON paths in a google.rpc.BadRequest detail;
// internal errors are logged and reported without internals.
func Status(log *slog.Logger, requestID string, err error) error {
	if err == nil {
		return nil
	}
	// Messages quote what the caller sent (a kid, a path, a card's key):
	// bounded here, whatever the branch, so no status outgrows a client's
	// header limit.
	st := status.Convert(statusOf(log, requestID, err))
	if len(st.Message()) <= maxStatusMessage {
		return st.Err()
	}
	p := st.Proto()
	p.Message = truncateText(p.Message, maxStatusMessage)
	return status.ErrorProto(p)
}

// statusOf maps err to its gRPC status; Status bounds its size.
func statusOf(log *slog.Logger, requestID string, err error) error {
	var (
		cardErr *strictjson.Error
		lintErr *card.LintError
		argErr  *server.InvalidArgumentError
		preErr  *server.PreconditionError
		nfErr   *server.NotFoundError
		unErr   *server.UnavailableError
		refused *server.RefusedError
		changed *server.KeyChangedError
		keyUn   *server.KeyUnavailableError
		bePre   *backends.PreconditionError
		regErr  *registry.RegistrationError
		notReg  *registry.NotRegisteredError
		revFull *registry.RevocationsFullError
	)
	var quota *registry.QuotaError
	var witnessed *server.WitnessQuorumError
	var held *approval.RequiredError
	var forbidden *approval.ForbiddenError
	var unusable *approval.UnusableError
	var invalid *approval.InvalidError
	var apUn *approval.UnavailableError
	switch {
	case errors.As(err, &held):
		return approvalRequired(held)
	case errors.As(err, &forbidden):
		return status.Error(codes.PermissionDenied, forbidden.Error())
	case errors.As(err, &unusable):
		return status.Error(codes.FailedPrecondition, unusable.Error())
	case errors.As(err, &invalid):
		return withBadRequest(codes.InvalidArgument, invalid.Error(), &errdetails.BadRequest_FieldViolation{Field: invalid.Field, Description: invalid.Reason})
	case errors.As(err, &apUn):
		log.Warn("approvals unavailable", "request_id", requestID, "err", apUn.Err)
		return status.Error(codes.Unavailable, "approvals unavailable; retry later (request "+requestID+")")
	case errors.As(err, &witnessed):
		log.Warn("signature not returned: the log's witnesses did not cosign in time", "request_id", requestID, "audit_seq", witnessed.Seq)
		return status.Error(codes.Unavailable, witnessed.Error())
	case errors.As(err, &quota):
		return status.Error(codes.ResourceExhausted, quota.Error())
	case errors.As(err, &regErr):
		return withBadRequest(codes.InvalidArgument, regErr.Error(),
			&errdetails.BadRequest_FieldViolation{Field: "agent_id", Description: regErr.Reason})
	case errors.As(err, &notReg):
		log.Error("signed card not registered", "request_id", requestID, "audit_seq", notReg.AuditSeq, "err", notReg.Err)
		return status.Error(codes.Unavailable, fmt.Sprintf("the card was signed (audit record %d) but the registry could not store it; retry (request %s)", notReg.AuditSeq, requestID))
	case errors.As(err, &refused):
		// The one refusal that explains itself: the caller is allowed to
		// sign, this card is not, and the rule says how to fix it.
		where := fmt.Sprintf("audit record %d", refused.Seq)
		if refused.AuditErr != nil {
			where = "the refusal could not be written to the audit log; request " + requestID
		}
		return withBadRequest(codes.PermissionDenied, fmt.Sprintf("%s (%s)", refused.Error(), where),
			&errdetails.BadRequest_FieldViolation{Field: refused.Refusal.Path, Description: refused.Refusal.Reason + " [policy rule " + refusedRule(refused.Refusal.Rule) + "]"})
	case errors.As(err, &cardErr):
		return withBadRequest(codes.InvalidArgument, "invalid card: "+cardErr.Error(),
			&errdetails.BadRequest_FieldViolation{Field: cardErr.Path, Description: cardErr.Reason + " [" + cardErr.Rule + "]"})
	case errors.As(err, &lintErr):
		return withBadRequest(codes.InvalidArgument, lintErr.Error(), lintViolations(lintErr.Findings)...)
	case errors.As(err, &argErr):
		return withBadRequest(codes.InvalidArgument, argErr.Error(),
			&errdetails.BadRequest_FieldViolation{Field: argErr.Field, Description: argErr.Reason})
	case errors.As(err, &changed):
		// Before the unavailable cases: the key will not come back by
		// itself, and the message names the key and what to do.
		return status.Error(codes.FailedPrecondition, changed.Error())
	case errors.As(err, &keyUn):
		// Before the provider's own verdicts (not found, disabled): the key
		// could not even be opened on this replica, and another may hold it.
		log.Warn("signing key cannot be opened", "request_id", requestID, "kid", keyUn.KID, "err", keyUn.Err)
		return status.Error(codes.Unavailable, keyUn.Error()+"; another replica may sign: retry; on this one, restore access to the key (see /readyz and the log)")
	case errors.Is(err, backends.ErrKeyDisabled):
		// A key disabled (or pending deletion, destroyed) at its KMS or HSM:
		// no retry helps until an operator acts. The error names the kid
		// (the key ring and the signer wrap backend errors with it) and the
		// provider's key.
		log.Warn("signing key disabled at its provider", "request_id", requestID, "err", err)
		return status.Error(codes.FailedPrecondition, "key disabled at its provider: "+err.Error()+
			"; enable it at the provider, or rotate to a new key and revoke this one")
	case errors.Is(err, backends.ErrKeyNotFound):
		log.Warn("signing key not found at its provider", "request_id", requestID, "err", err)
		return status.Error(codes.NotFound, "key not found at its provider: "+err.Error()+
			"; restore it there, or rotate to a new key and revoke this one")
	case errors.As(err, &bePre):
		// The backend says what failed, where and how to fix it; admin
		// calls (create, rotate) get it, the log too.
		log.Warn("key backend precondition failed", "request_id", requestID, "err", err)
		return status.Error(codes.FailedPrecondition, bePre.Error())
	case errors.As(err, &preErr), errors.As(err, &revFull), errors.Is(err, server.ErrNoActiveKey):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.As(err, &nfErr), errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, store.ErrUnavailable):
		log.Warn("store unavailable", "request_id", requestID, "err", err)
		return status.Error(codes.Unavailable, "store unavailable; retry later (request "+requestID+")")
	case errors.Is(err, backends.ErrUnavailable):
		log.Warn("key backend unavailable", "request_id", requestID, "err", err)
		return status.Error(codes.Unavailable, "key backend unavailable; retry later (request "+requestID+")")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "request deadline exceeded")
	case errors.Is(err, store.ErrKeyRevoked):
		return status.Error(codes.Aborted, "a signing key was revoked while this card was being signed; the signature was discarded: retry (request "+requestID+")")
	case errors.Is(err, server.ErrAudit):
		log.Error("audit commit failed; signature discarded", "request_id", requestID, "err", err)
		return status.Error(codes.Unavailable, "audit log unavailable: the signature was discarded; retry later (request "+requestID+")")
	case errors.As(err, &unErr):
		log.Warn("dependency unavailable", "request_id", requestID, "what", unErr.What, "err", unErr.Err)
		return status.Error(codes.Unavailable, unErr.What+" unavailable; retry later (request "+requestID+")")
	}
	// Anything else, including a status some dependency made, is reported
	// without its text: it may name internal resources.
	log.Error("request failed", "request_id", requestID, "err", err)
	return status.Error(codes.Internal, "internal error (request "+requestID+"; see the server log)")
}

func refusedRule(r string) string {
	if r == "" {
		return "(none applies)"
	}
	return r
}

func withBadRequest(code codes.Code, msg string, vs ...*errdetails.BadRequest_FieldViolation) error {
	st := status.New(code, truncateText(msg, maxStatusMessage))
	vs = boundViolations(vs)
	if len(vs) == 0 {
		return st.Err()
	}
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: vs}); err == nil {
		return d.Err()
	}
	return st.Err()
}

// An error's status travels in trailers (the message twice: once in
// grpc-message, once inside the base64 details), and gRPC clients cap their
// header list (8 KiB in grpc-java, 16 KiB in several proxies): a status larger
// than that fails the call with a protocol error that names nothing, and can
// fail other calls on the same connection. These bounds keep every status
// under 8 KiB of headers, whatever the card held.
const (
	maxStatusMessage = 1 << 10 // bytes of the message
	maxViolationText = 256     // bytes of each violation's field and of its description
	maxDetailBytes   = 3 << 10 // bytes of all violations together
)

// lintViolations turns lint errors into field violations.
func lintViolations(fs []card.Finding) []*errdetails.BadRequest_FieldViolation {
	var vs []*errdetails.BadRequest_FieldViolation
	for _, f := range fs {
		if f.Severity != card.SeverityError {
			continue
		}
		d := f.Message + " [" + f.Rule + "]"
		if f.Fix != "" {
			d += "; fix: " + f.Fix
		}
		vs = append(vs, &errdetails.BadRequest_FieldViolation{Field: f.Path, Description: d})
	}
	return vs
}

// boundViolations shortens each violation and keeps as many as fit in
// maxDetailBytes, then one that counts the rest.
func boundViolations(vs []*errdetails.BadRequest_FieldViolation) []*errdetails.BadRequest_FieldViolation {
	var out []*errdetails.BadRequest_FieldViolation
	size := 0
	for i, v := range vs {
		field, desc := truncateText(v.Field, maxViolationText), truncateText(v.Description, maxViolationText)
		if size+len(field)+len(desc) > maxDetailBytes {
			out = append(out, &errdetails.BadRequest_FieldViolation{Field: "$",
				Description: fmt.Sprintf("%d more problems not listed here [%s]; fix: run `cardsign lint` on the card to see them", len(vs)-i, card.RuleTooManyFindings)})
			break
		}
		size += len(field) + len(desc)
		out = append(out, &errdetails.BadRequest_FieldViolation{Field: field, Description: desc})
	}
	return out
}

// truncateText cuts s to at most n bytes on a UTF-8 boundary, marking the cut.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
