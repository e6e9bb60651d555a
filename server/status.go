package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/store"
)

// toStatus maps an error to the gRPC status a client can act on. Card and
// lint errors carry their JSON paths in a google.rpc.BadRequest detail;
// internal errors are logged and reported without internals.
func toStatus(log *slog.Logger, requestID string, err error) error {
	if err == nil {
		return nil
	}
	var (
		cardErr *card.Error
		lintErr *card.LintError
		argErr  *InvalidArgumentError
		preErr  *PreconditionError
		nfErr   *NotFoundError
		unErr   *UnavailableError
		refused *RefusedError
	)
	switch {
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
		var vs []*errdetails.BadRequest_FieldViolation
		for _, f := range lintErr.Findings {
			if f.Severity == card.SeverityError {
				d := f.Message + " [" + f.Rule + "]"
				if f.Fix != "" {
					d += "; fix: " + f.Fix
				}
				vs = append(vs, &errdetails.BadRequest_FieldViolation{Field: f.Path, Description: d})
			}
		}
		return withBadRequest(codes.InvalidArgument, lintErr.Error(), vs...)
	case errors.As(err, &argErr):
		return withBadRequest(codes.InvalidArgument, argErr.Error(),
			&errdetails.BadRequest_FieldViolation{Field: argErr.Field, Description: argErr.Reason})
	case errors.As(err, &preErr), errors.Is(err, ErrNoActiveKey):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.As(err, &nfErr), errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, backends.ErrUnavailable):
		log.Warn("key backend unavailable", "request_id", requestID, "err", err)
		return status.Error(codes.Unavailable, "key backend unavailable; retry later (request "+requestID+")")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "request deadline exceeded")
	case errors.Is(err, store.ErrKeyRevoked):
		return status.Error(codes.Aborted, "a signing key was revoked while this card was being signed; the signature was discarded: retry (request "+requestID+")")
	case errors.Is(err, ErrAudit):
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
	st := status.New(code, msg)
	if len(vs) == 0 {
		return st.Err()
	}
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: vs}); err == nil {
		return d.Err()
	}
	return st.Err()
}
