package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
)

// exitHeld is sign's exit code for a card a signing policy rule holds for
// approval (without --wait): nothing is signed yet.
const exitHeld = 4

// approvalRequiredReason is the ErrorInfo reason cardsignd sends with a
// card held for approval (grpcapi.ApprovalRequiredReason).
const approvalRequiredReason = "APPROVAL_REQUIRED"

func approvalsCmd() command {
	c := command{
		name:    "approvals",
		long:    approvalsLong,
		summary: "List, show, approve and deny the signatures that a signing policy rule holds for approval.",
		usage:   "list [--state pending|approved|denied|expired] [--requester ID] [--json] | show ID [--json] | approve ID [--sha256 HEX] [--reason TEXT] | deny ID --reason TEXT   (all take --server ADDR)",
		example: "  cardsign approvals list --server cardsign.internal:7700 --tls --token-file alice.token\n" +
			"  apr_4kq…  pending  1 of 2  rule new-host  card \"payments\" 1.4.0  by oidc:https://token.actions.githubusercontent.com#repo:org/payments:ref:refs/heads/main  expires 2026-11-29T10:02:11Z\n" +
			"  cardsign approvals show apr_4kq… --server cardsign.internal:7700 --tls --token-file alice.token   # the diff against the previous card, and the card\n" +
			"  cardsign approvals approve apr_4kq… --sha256 9f2c… --reason \"new EU host, ticket SEC-142\" --server cardsign.internal:7700 --tls --token-file alice.token",
	}
	c.subcommands = true
	c.subs = []subcommand{
		{"list", "approvals, newest first: id, state, approvals given and needed, rule, card, requester, expiry"},
		{"show", "one approval: its votes, what the card changes against the agent's previous card, and the card"},
		{"approve", "approve (role approver, never the requester, in the rule's group); --sha256 pins the card you reviewed"},
		{"deny", "deny with --reason: the request is closed for good"},
	}
	c.daemon = &daemonFlags{timeout: 30 * time.Second, timeoutUsage: "deadline of each call"}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		o := &approvalsOptions{}
		fs.StringVar(&o.state, "state", "", "list: only approvals in this state (pending, approved, denied, expired)")
		fs.StringVar(&o.requester, "requester", "", "list: only this requester's (an identity such as token:ci)")
		fs.BoolVar(&o.asJSON, "json", false, "list, show: JSON (one object per line for list)")
		fs.StringVar(&o.reason, "reason", "", "approve, deny: why, recorded in the audit log (required for deny)")
		fs.StringVar(&o.sha256, "sha256", "", "approve: the canonical SHA-256 (hex) of the card you reviewed, as show prints it: the vote is refused if the request holds other bytes")
		return o.run
	}
	return c
}

// approvalsOptions are the flags of the approvals subcommands.
type approvalsOptions struct {
	state, requester, reason, sha256 string
	asJSON                           bool
}

func (o *approvalsOptions) run(ctx context.Context, in *call) int {
	sub, pos := in.sub, in.pos
	var digest []byte
	switch {
	case sub != "list" && sub != "show" && sub != "approve" && sub != "deny":
		return in.usageError("unknown subcommand %q", sub)
	case sub == "list" && len(pos) > 0:
		return in.usageError("unexpected argument %q", pos[0])
	case sub != "list" && len(pos) != 1:
		return in.usageError("%s wants one approval id, got %d arguments", sub, len(pos))
	case sub != "list" && (o.state != "" || o.requester != ""):
		return in.usageError("--state and --requester are for list")
	case sub != "list" && sub != "show" && o.asJSON:
		return in.usageError("--json is for list and show")
	case sub == "deny" && strings.TrimSpace(o.reason) == "":
		return in.usageError("deny needs --reason TEXT: the requester and the audit log read it")
	case (sub == "list" || sub == "show") && o.reason != "":
		return in.usageError("--reason is for approve and deny")
	case sub != "approve" && o.sha256 != "":
		return in.usageError("--sha256 is for approve")
	case o.sha256 != "":
		var err error
		if digest, err = hex.DecodeString(o.sha256); err != nil || len(digest) != 32 {
			return in.usageError("--sha256 wants the 64 hex digits show prints, got %q", o.sha256)
		}
	}
	cl, code, ok := in.session(ctx)
	if !ok {
		return code
	}
	defer cl.close()
	api := cl.approvals
	fail := func(err error) int {
		fmt.Fprintf(in.stderr, "cardsign approvals %s: %s\n", sub, describe(err))
		return exitFail
	}
	switch sub {
	case "list":
		res, err := api.ListApprovals(cl.ctx, &pb.ListApprovalsRequest{State: o.state, Requester: o.requester})
		if err != nil {
			return fail(err)
		}
		for _, a := range res.GetApprovals() {
			printApproval(in.stdout, a, o.asJSON)
		}
		return exitOK
	case "show":
		res, err := api.GetApproval(cl.ctx, &pb.GetApprovalRequest{Id: pos[0]})
		if err != nil {
			return fail(err)
		}
		if o.asJSON {
			printApproval(in.stdout, res.GetApproval(), true)
			return exitOK
		}
		showApproval(in.stdout, res.GetApproval(), isTerminal(in.stdout))
		return exitOK
	case "approve":
		res, err := api.Approve(cl.ctx, &pb.ApproveRequest{Id: pos[0], Reason: o.reason, CanonicalSha256: digest})
		if err != nil {
			return fail(err)
		}
		reportVote(in.stderr, "approved", res.GetApproval(), res.GetAuditSeq())
		return exitOK
	}
	res, err := api.Deny(cl.ctx, &pb.DenyRequest{Id: pos[0], Reason: o.reason})
	if err != nil {
		return fail(err)
	}
	reportVote(in.stderr, "denied", res.GetApproval(), res.GetAuditSeq())
	return exitOK
}

// reportVote says what a vote did.
func reportVote(w io.Writer, did string, a *pb.Approval, seq int64) {
	fmt.Fprintf(w, "cardsign approvals: %s %s (audit record %d): now %s, %d of %d approvals\n", did, escapeValue(a.GetId()), seq, a.GetState(), a.GetApprovals(), a.GetRequired())
	if a.GetState() == "approved" {
		fmt.Fprintf(w, "cardsign approvals: %s may now be signed by its requester (cardsign sign --approval %s, or a waiting sign --wait)\n", escapeValue(a.GetId()), escapeValue(a.GetId()))
	}
}

// approvalJSON is an approval as list --json and show --json print it.
type approvalJSON struct {
	ID              string          `json:"id"`
	State           string          `json:"state"`
	Requester       string          `json:"requester"`
	Rule            string          `json:"rule"`
	Group           string          `json:"group,omitempty"`
	Required        int32           `json:"required"`
	Approvals       int32           `json:"approvals"`
	CardName        string          `json:"card_name"`
	CardVersion     string          `json:"card_version,omitempty"`
	AgentID         string          `json:"agent_id,omitempty"`
	CanonicalSHA256 string          `json:"canonical_sha256"`
	CreatedAt       string          `json:"created_at"`
	ExpiresAt       string          `json:"expires_at"`
	AuditSeq        int64           `json:"audit_seq"`
	Votes           []voteJSON      `json:"votes"`
	Diff            json.RawMessage `json:"diff,omitempty"`
}

type voteJSON struct {
	Approver string `json:"approver"`
	Approve  bool   `json:"approve"`
	Time     string `json:"time"`
	Reason   string `json:"reason,omitempty"`
	AuditSeq int64  `json:"audit_seq"`
}

func printApproval(w io.Writer, a *pb.Approval, asJSON bool) {
	if asJSON {
		j := approvalJSON{ID: a.GetId(), State: a.GetState(), Requester: a.GetRequester(), Rule: a.GetRule(), Group: a.GetGroup(),
			Required: a.GetRequired(), Approvals: a.GetApprovals(), CardName: a.GetCardName(), CardVersion: a.GetCardVersion(), AgentID: a.GetAgentId(),
			CanonicalSHA256: hex.EncodeToString(a.GetCanonicalSha256()), CreatedAt: rfc3339(a.GetCreatedAt().AsTime()), ExpiresAt: rfc3339(a.GetExpiresAt().AsTime()),
			AuditSeq: a.GetAuditSeq(), Votes: []voteJSON{}}
		if json.Valid([]byte(a.GetDiffJson())) {
			j.Diff = json.RawMessage(a.GetDiffJson())
		}
		for _, v := range a.GetVotes() {
			j.Votes = append(j.Votes, voteJSON{Approver: v.GetApprover(), Approve: v.GetApprove(), Time: rfc3339(v.GetTime().AsTime()), Reason: v.GetReason(), AuditSeq: v.GetAuditSeq()})
		}
		b, _ := json.Marshal(j) // strings and numbers only
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	fmt.Fprintf(w, "%s  %s  %d of %d  rule %s  card %s %s  by %s  expires %s\n", escapeValue(a.GetId()), a.GetState(), a.GetApprovals(), a.GetRequired(),
		escapeValue(a.GetRule()), escapeValue(a.GetCardName()), escapeValue(a.GetCardVersion()), escapeValue(a.GetRequester()), rfc3339(a.GetExpiresAt().AsTime()))
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// showApproval prints one approval for a reviewer: who asked, under which
// rule, the votes, what the card changes, and the card.
func showApproval(w io.Writer, a *pb.Approval, terminal bool) {
	fmt.Fprintf(w, "approval   %s (%s, %d of %d approvals)\n", escapeValue(a.GetId()), a.GetState(), a.GetApprovals(), a.GetRequired())
	fmt.Fprintf(w, "rule       %s", escapeValue(a.GetRule()))
	if g := a.GetGroup(); g != "" {
		fmt.Fprintf(w, " (approvers from group %s)", escapeValue(g))
	}
	fmt.Fprintf(w, "\nrequester  %s (request %s, audit record %d)\n", escapeValue(a.GetRequester()), escapeValue(a.GetRequestId()), a.GetAuditSeq())
	fmt.Fprintf(w, "card       %s %s", escapeValue(a.GetCardName()), escapeValue(a.GetCardVersion()))
	if id := a.GetAgentId(); id != "" {
		fmt.Fprintf(w, " (agent %s)", escapeValue(id))
	}
	fmt.Fprintf(w, "\nsha256     %s   (approve with --sha256 this, to pin what you reviewed)\n", hex.EncodeToString(a.GetCanonicalSha256()))
	fmt.Fprintf(w, "created    %s, expires %s\n", rfc3339(a.GetCreatedAt().AsTime()), rfc3339(a.GetExpiresAt().AsTime()))
	for _, v := range a.GetVotes() {
		verb := "approved"
		if !v.GetApprove() {
			verb = "denied"
		}
		fmt.Fprintf(w, "vote       %s %s at %s (audit record %d)", escapeValue(v.GetApprover()), verb, rfc3339(v.GetTime().AsTime()), v.GetAuditSeq())
		if r := v.GetReason(); r != "" {
			fmt.Fprintf(w, ": %s", escapeText(r))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "\nchanges against the agent's previous registered card:")
	for _, l := range a.GetDiff() {
		fmt.Fprintf(w, "  %s\n", escapeText(l))
	}
	if len(a.GetDiff()) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	fmt.Fprintln(w, "\nthe card as the requester sent it:")
	showDocument(w, a.GetCard(), terminal)
}

// heldApproval returns the approval id of a SignCard error that says the
// card is held for approval, or "".
func heldApproval(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == approvalRequiredReason {
			return info.GetMetadata()["approval_id"]
		}
	}
	return ""
}

// waitPoll is how often sign --wait asks about its approval.
const waitPoll = 3 * time.Second

// awaitApproval polls approval id until it is approved (ok), or denied,
// expired or the wait is over (not ok, having said why). A wait outlives
// identity tokens and replicas: a refused credential is obtained again (a
// pipeline's identity token is short-lived; dial reads or requests it
// anew), and an unreachable daemon is asked again at the next poll. It
// returns the client to sign with, which the caller closes when it is not
// cl.
func awaitApproval(ctx context.Context, in *call, cl *client, id string, limit time.Duration) (*client, bool) {
	e, name := in.env, in.c.name
	deadline := time.Now().Add(limit)
	last := int32(-1)
	orig := cl
	refreshed := false // a fresh credential was tried since the last answer
	for {
		cctx, cancel := cl.ctx(ctx)
		res, err := cl.approvals.GetApproval(cctx, &pb.GetApprovalRequest{Id: id})
		cancel()
		switch status.Code(err) {
		case codes.OK:
			refreshed = false
		case codes.Unauthenticated:
			if refreshed {
				// A fresh credential was refused too: revoked, not expired.
				fmt.Fprintf(e.stderr, "cardsign %s: waiting for approval %s: %s\n", name, escapeValue(id), describe(err))
				return cl, false
			}
			refreshed = true
			fresh, derr := dial(in.env, in.conn, in.timeout)
			if derr != nil {
				fmt.Fprintf(e.stderr, "cardsign %s: waiting for approval %s: the credential was refused, and a fresh one cannot be had: %v\n", name, escapeValue(id), derr)
				return cl, false
			}
			fmt.Fprintf(e.stderr, "cardsign %s: waiting for approval %s: the credential was refused (an identity token expires); using a fresh one\n", name, escapeValue(id))
			if cl != orig {
				cl.close()
			}
			cl = fresh
			res = nil
		case codes.Canceled:
			fmt.Fprintf(e.stderr, "cardsign %s: stopped waiting for approval %s; sign again with --approval %s once it is approved\n", name, escapeValue(id), escapeValue(id))
			return cl, false
		case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
			fmt.Fprintf(e.stderr, "cardsign %s: waiting for approval %s: %s; asking again\n", name, escapeValue(id), describe(err))
			res = nil
		default:
			fmt.Fprintf(e.stderr, "cardsign %s: waiting for approval %s: %s\n", name, escapeValue(id), describe(err))
			return cl, false
		}
		if a := res.GetApproval(); a != nil {
			if a.GetApprovals() != last {
				last = a.GetApprovals()
				fmt.Fprintf(e.stderr, "cardsign %s: approval %s: %s, %d of %d approvals (expires %s)\n", name, escapeValue(id), a.GetState(), a.GetApprovals(), a.GetRequired(), rfc3339(a.GetExpiresAt().AsTime()))
			}
			switch a.GetState() {
			case "approved":
				return cl, true
			case "denied", "expired":
				fmt.Fprintf(e.stderr, "cardsign %s: approval %s is %s%s; nothing was signed\n", name, escapeValue(id), a.GetState(), lastReason(a))
				return cl, false
			}
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(e.stderr, "cardsign %s: gave up waiting for approval %s after %s; sign again with --approval %s once it is approved\n", name, escapeValue(id), limit, escapeValue(id))
			return cl, false
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(e.stderr, "cardsign %s: stopped waiting for approval %s; sign again with --approval %s once it is approved\n", name, escapeValue(id), escapeValue(id))
			return cl, false
		case <-time.After(waitPoll):
		}
	}
}

func lastReason(a *pb.Approval) string {
	v := a.GetVotes()
	if len(v) == 0 || v[len(v)-1].GetApprove() {
		return ""
	}
	last := v[len(v)-1]
	return fmt.Sprintf(" by %s: %s", escapeValue(last.GetApprover()), escapeText(last.GetReason()))
}
