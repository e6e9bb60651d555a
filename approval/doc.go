// Package approval is the second pair of eyes: the signatures a signing
// policy rule holds (outcome require_approval) until approvers approve the
// card's exact canonical bytes, and the votes on them.
//
// A Desk runs the policy's condition rules over a card the permission
// rules allowed (Gate): it refuses it (a *policy.Refusal, which the caller
// audits), holds it (a *RequiredError naming the approval, stored with
// its audit record), or lets it be signed, now or under an approval that
// is approved for these bytes, this requester and this agent. It lists,
// reads and records votes (Vote) with the rules of who may: the approver
// role, the rule's group, never the requester, once each. State lives in
// the store (store.Approvals), so every replica sees every step; each step
// is an audit record committed with it, which the log hears of through
// Config.Committed.
package approval
