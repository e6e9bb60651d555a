package approval

import (
	"fmt"
	"time"

	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
)

// RequiredError is a card a signing policy rule holds until approvers
// approve it: the approval to wait for.
type RequiredError struct {
	Approval store.Approval
	Message  string // the rule's message
}

func (e *RequiredError) Error() string {
	a := e.Approval
	msg := fmt.Sprintf("signing policy: rule %q requires %d approval(s)", a.Rule, a.Required)
	if a.Group != "" {
		msg += fmt.Sprintf(" from group %q", a.Group)
	}
	if e.Message != "" {
		msg += ": " + strictjson.QuoteForMessage(e.Message)
	}
	return fmt.Sprintf("%s; approval %s holds %d of %d, expires %s (audit record %d): approvers run `cardsign approvals approve %s`; then sign again with --approval %s, or wait with --wait",
		msg, a.ID, a.Approvals(), a.Required, a.ExpiresAt.UTC().Format(time.RFC3339), a.Seq, a.ID, a.ID)
}

// ForbiddenError is a caller who may not do what it asked: an approver
// outside the rule's group, a caller without the approver role, the
// requester voting on its own request, a signer reading another's.
type ForbiddenError struct{ Reason string }

func (e *ForbiddenError) Error() string { return e.Reason }

// UnusableError is an approval that cannot be used or voted on as asked:
// denied, expired, closed, for other bytes, another agent or another
// requester, or voted on by this approver already.
type UnusableError struct{ Reason string }

func (e *UnusableError) Error() string { return e.Reason }

// InvalidError is an argument no approval can have (an id, a reason, a
// card the store cannot hold), naming the field.
type InvalidError struct{ Field, Reason string }

func (e *InvalidError) Error() string { return e.Field + ": " + e.Reason }

// UnavailableError is the store failing under a request: nothing was
// decided, and the caller may retry.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return "approvals unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

func unavailable(err error) error { return &UnavailableError{Err: err} }
