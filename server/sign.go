package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/approval"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
)

// SignRequest is one card to sign, with who asks.
type SignRequest struct {
	Card           []byte
	StripUnknown   bool
	Mode           signer.Mode
	KeepSignatures bool
	// Caller is the identity recorded in the audit log (for an anonymous
	// caller, with its address); Identity is what the signing policy and
	// the metrics see.
	Caller    string
	Identity  access.Identity
	RequestID string
	// Registration, when set, keeps the signed card in the registry as its
	// agent's newest version.
	Registration *Registration
	// ApprovalID names the approval the card is signed under, when a
	// signing policy rule requires one (approval.RequiredError).
	ApprovalID string
	// resign marks the registry's own re-signature of a registered card:
	// the card was allowed when its caller registered it, and the signing
	// policy, which names callers, does not apply to the registry.
	resign bool
	// salt, set by Sign for a private agent's registration, seals the
	// caller, card name and hosts of its log entries (SealRecord).
	salt []byte
}

// Signed is a signed card with its committed audit records, in the order of
// its signatures, and its registry entry when it was registered.
type Signed struct {
	*signer.Result
	Audit []audit.Record
	Agent *store.AgentCard
}

// Sign signs a card with the active key and any pending key, then commits one
// audit record per signature. It returns the signed card only once those
// records are durable. The card is read and checked before any key is
// opened: a malformed card is refused whatever the backends' state.
func (a *Authority) Sign(ctx context.Context, req SignRequest) (signed *Signed, err error) {
	start := time.Now()
	principal := req.Identity.Principal
	var discarded *signer.Result // signatures made, then not returned
	defer func() {
		a.readiness.failed(err) // the store unreachable: not ready at once
		result := resultOf(err)
		a.metrics.signed(result, time.Since(start))
		a.metrics.signRequest(result, principal)
		if signed != nil {
			a.metrics.countSignatures("signed", signed.Result, principal, a.keys.backendOf)
		}
		a.metrics.countSignatures("discarded", discarded, principal, a.keys.backendOf)
	}()

	// Announced before the work, so that audit transactions starting
	// meanwhile wait for this card's records and commit them together.
	expected := a.batcher.Expect()
	defer expected.Done()

	popts := signer.PrepareOptions{Card: cardOptions(a.cfg, req.StripUnknown), Mode: req.Mode, KeepSignatures: req.KeepSignatures}
	if req.KeepSignatures {
		// Our own revoked keys' signatures are not kept (DESIGN §11): not
		// at registration, nor when the registry signs the card again.
		if popts.DropKept, _, err = a.registry.RevokedKIDs(ctx); err != nil {
			return nil, err
		}
	}
	prepared, err := signer.Prepare(req.Card, popts)
	if err != nil {
		return nil, err
	}
	hosts := transparency.CardHosts(card.InterfaceHosts(prepared.Loaded.Value))
	if n := len(hosts); n > transparency.MaxHosts {
		// The log entry lists a card's hosts for monitors to match: a host
		// it could not list would be signed for unseen.
		return nil, &InvalidArgumentError{Field: "supportedInterfaces", Reason: fmt.Sprintf(
			"the card's interfaces name %d hosts; a card may name at most %d (the transparency log lists every one, so that their owners' monitors see it): split it into several cards",
			n, transparency.MaxHosts)}
	}
	id := ""
	if req.Registration != nil {
		if req.Registration, req.salt, err = a.registry.Prepare(ctx, req.Registration, prepared.Loaded.Value, req.Caller); err != nil {
			return nil, err
		}
		id = req.Registration.AgentID
	}
	if err := checkPolicy(a.cfg.Policy, req, prepared, id); err != nil {
		// A refusal is recorded in the audit log before it is returned.
		rec := recordFor(a.now(), req, prepared, hosts)
		rec.Outcome, rec.Reason = audit.OutcomeRefused, err.Error()
		return nil, a.auditRefusal(ctx, rec, err)
	}
	if err := gateSign(ctx, a, req, prepared, id, hosts); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		keys, err := a.keys.signing(ctx, a.now())
		if err != nil {
			return nil, err
		}
		if !req.resign {
			a.registry.Pace().Pipeline(len(keys)) // pipeline signs go first (registry.Pace)
		}
		res, err := prepared.SignWith(ctx, keys, signer.SignOptions{JKU: a.cfg.JKU, Lifetime: a.cfg.Lifetime, Now: a.now(), DeferCard: a.tlog != nil})
		if err != nil {
			return nil, err
		}
		committed, err := a.commit(ctx, expected, auditRecords(a.now(), req, res, hosts))
		if err == nil && a.tlog != nil {
			if err := attachProofs(ctx, a.tlog, a.witnesses, req.resign, res, committed); err != nil {
				discarded = res
				return nil, err
			}
		}
		if err == nil {
			signed := &Signed{Result: res, Audit: committed}
			if req.Registration != nil {
				// The signature is audited: store it in the registry even
				// if the caller gives up now, so the registry matches the
				// log (and a re-signing pass cut short does not sign this
				// card again).
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), registerTimeout)
				opts := registry.Options{StripUnknown: req.StripUnknown, Profile: string(req.Mode), KeepSignatures: req.KeepSignatures}
				ac, err := a.registry.Register(rctx, req.Registration, res, opts, req.Caller, committed[0].Seq)
				cancel()
				if err != nil {
					// Audited but not returned: the caller retries, and a
					// retry is one more audited signature.
					discarded = res
					return nil, &registry.NotRegisteredError{AuditSeq: committed[0].Seq, Err: err}
				}
				signed.Agent = &ac
				a.catalog.changed()
			}
			return signed, nil
		}
		// A key revoked while this card was being signed: the store refused
		// the records (and so the signatures) by it. Sign again with the key
		// list as it is now, which no longer holds the revoked key.
		if !errors.Is(err, store.ErrKeyRevoked) || attempt == maxSignAttempts {
			discarded = res
			return nil, err
		}
		a.metrics.countSignatures("discarded", res, principal, a.keys.backendOf)
		a.log.Info("a signing key was revoked while a card was being signed; signing again", "request_id", req.RequestID, "attempt", attempt)
		if _, err := a.keys.records(ctx, true); err != nil {
			return nil, err
		}
	}
}

// registerTimeout bounds the registry write after a card's audit records are
// committed, whatever the caller's deadline.
const registerTimeout = 10 * time.Second

// maxSignAttempts bounds how often Sign starts over when a key is revoked
// under it: two revocations in a row within one request are already rare.
const maxSignAttempts = 3

// checkPolicy applies the signing policy (nil: none) to a prepared card,
// and to the agent id it is registered under when it is (id not empty).
func checkPolicy(pol *policy.Policy, req SignRequest, p *signer.Prepared, id string) error {
	if pol == nil || req.resign {
		return nil
	}
	caller := approval.Caller(req.Identity)
	err := pol.Check(caller, p.Loaded.Value)
	if err == nil && id != "" {
		derived, _ := registry.DeriveAgentID(p.Loaded.Value)
		err = pol.CheckAgent(caller, p.Loaded.Value, id, derived)
	}
	return err
}

// auditRecords are the records of a signed card, one per signature.
func auditRecords(now time.Time, req SignRequest, res *signer.Result, hosts []string) []audit.Record {
	recs := make([]audit.Record, len(res.Signatures))
	base := recordFor(now, req, res.Prepared, hosts)
	for i, s := range res.Signatures {
		recs[i] = base
		recs[i].KID, recs[i].Alg, recs[i].Profile, recs[i].Signature = s.KID, string(s.Alg), string(s.Profile), s.Value
	}
	return recs
}

// recordFor starts the audit record of a request about a prepared card.
// hosts are the card's (transparency.CardHosts), for its log entry.
func recordFor(now time.Time, req SignRequest, p *signer.Prepared, hosts []string) audit.Record {
	name, _ := p.Loaded.Value.Get("name")
	version, _ := p.Loaded.Value.Get("version")
	rec := audit.Record{
		Time:            now,
		Caller:          req.Caller,
		RequestID:       req.RequestID,
		CardName:        name.Str,
		CardVersion:     version.Str,
		CanonicalSHA256: p.CanonicalSHA256[:],
		Outcome:         audit.OutcomeSigned,
		Provenance:      audit.EncodeProvenance(req.Identity.Provenance),
		Hosts:           hosts,
	}
	if req.salt != nil {
		transparency.SealRecord(&rec, req.salt)
	}
	return rec
}

// attachProofs puts the transparency log's inclusion proof of each
// signature in its unprotected header. The signatures are audited and
// logged already; a proof that cannot be made (the store cannot be read)
// fails the request, which the caller retries: a card is never returned
// without its proofs.
func attachProofs(ctx context.Context, cp *transparency.Checkpointer, w *witnessing, resign bool, res *signer.Result, committed []audit.Record) error {
	timeout := proofTimeout
	prove := cp.Proofs
	switch {
	case w != nil && resign:
		prove = w.resignProofs
	case w != nil:
		// Witnessed as log.witness_wait says.
		timeout += w.wait.Timeout
		prove = w.proofs
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := setProofs(pctx, prove, res, committed); err != nil {
		if wq := (*WitnessQuorumError)(nil); errors.As(err, &wq) {
			return err
		}
		return &UnavailableError{What: "transparency log proof", Err: fmt.Errorf("audit record %d is committed: %w", committed[0].Seq, err)}
	}
	return nil
}

// setProofs puts each signature's inclusion proof in its unprotected
// header; committed are the signatures' audit records, in order.
func setProofs(ctx context.Context, prove func(context.Context, []audit.Record) ([]transparency.Proof, error), res *signer.Result, committed []audit.Record) error {
	if len(committed) != len(res.Signatures) {
		return fmt.Errorf("transparency log: %d audit records for %d signatures", len(committed), len(res.Signatures))
	}
	proofs, err := prove(ctx, committed)
	if err != nil {
		return err
	}
	headers := make([]strictjson.Value, len(proofs))
	for i, p := range proofs {
		headers[i] = strictjson.ObjectValue(strictjson.Member{Key: transparency.HeaderMember, Val: strictjson.StringValue(p.Marshal())})
	}
	return res.SetHeaders(headers)
}

// proofTimeout bounds making a card's inclusion proofs, whatever the
// caller's deadline: the reads are few and small.
const proofTimeout = 10 * time.Second

// commit hands records to the audit log and waits until they are durable;
// expected (nil when not announced) is their announcement, which it ends.
func (a *Authority) commit(ctx context.Context, expected *audit.Expected, recs []audit.Record) ([]audit.Record, error) {
	start := time.Now()
	var committed []audit.Record
	var err error
	if expected != nil {
		committed, err = expected.Commit(ctx, recs)
	} else {
		committed, err = a.batcher.Commit(ctx, recs)
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr // the caller gave up while the record waited
		}
		return nil, fmt.Errorf("%w: %w", ErrAudit, err)
	}
	a.metrics.auditCommit.Observe(time.Since(start).Seconds())
	return committed, nil
}

// auditRefusal records a policy refusal. A refusal that cannot be recorded
// is still a refusal: the card is not signed either way, and the caller
// learns that the audit log failed.
func (a *Authority) auditRefusal(ctx context.Context, rec audit.Record, refusal error) error {
	var pr *policy.Refusal
	if !errors.As(refusal, &pr) {
		return refusal
	}
	committed, err := a.commit(ctx, nil, []audit.Record{rec})
	if err != nil {
		a.log.Error("policy refusal not recorded in the audit log", "caller", rec.Caller, "request_id", rec.RequestID, "refusal", pr.Error(), "err", err)
		return &RefusedError{Refusal: pr, AuditErr: err}
	}
	return &RefusedError{Refusal: pr, Seq: committed[0].Seq}
}

// resultOf names a signing request's outcome for metrics. errors.AsType,
// not errors.As: a target variable whose address is taken would be
// allocated on every request, successes included.
func resultOf(err error) string {
	if err == nil {
		return resultSigned
	}
	if _, ok := errors.AsType[*RefusedError](err); ok {
		return resultRefused
	}
	if _, ok := errors.AsType[*approval.RequiredError](err); ok {
		return resultHeld
	}
	if _, ok := errors.AsType[*strictjson.Error](err); ok {
		return resultInvalid
	}
	if _, ok := errors.AsType[*card.LintError](err); ok {
		return resultInvalid
	}
	return resultError
}

// Verify verifies a card against the published keys; signatures by revoked
// keys are reported as such.
func (a *Authority) Verify(ctx context.Context, data []byte, profile string) (*signer.Verification, error) {
	views, err := a.keys.views(ctx, a.now())
	if err != nil {
		return nil, err
	}
	var set jwks.Set
	byKID := map[string]jwks.View{}
	for _, v := range views {
		byKID[v.KID] = v
	}
	for _, v := range jwks.Published(views) {
		set.Keys = append(set.Keys, v.Public)
	}
	opts := signer.VerifyOptions{Trusted: set, Limits: a.cfg.Limits, Revoked: func(kid string) (string, bool) {
		v, ok := byKID[kid]
		if !ok || v.State != jwks.StateRevoked {
			return "", false
		}
		return jwks.Revocation{KID: kid, RevokedAt: *v.RevokedAt, Reason: v.RevokeReason}.String(), true
	}}
	revoked, err := a.registry.RevokedCards(ctx)
	if err != nil {
		return nil, &UnavailableError{What: "revoked cards", Err: err}
	}
	opts.RevokedCard = jwks.CardLookup(registry.CardRevocations(revoked))
	if a.cfg.Log != nil {
		// A proof this log vouches for is checked; a card signed before the
		// log existed, without proofs, still verifies.
		opts.LogKeys = a.cfg.Log.Verifiers()
	}
	if profile != "" {
		p, err := parseProfile(profile)
		if err != nil {
			return nil, err
		}
		opts.Profile = p
	}
	return signer.Verify(ctx, data, opts)
}

func cardOptions(cfg Config, strip bool) card.Options {
	return card.Options{Limits: cfg.Limits, StripUnknown: strip}
}

func parseProfile(s string) (card.Profile, error) {
	p, err := card.ParseProfile(s)
	if err != nil {
		return "", &InvalidArgumentError{Field: "profile", Reason: err.Error()}
	}
	return p, nil
}
