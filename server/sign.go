package server

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
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
}

// Signed is a signed card with its committed audit records, in the order of
// its signatures.
type Signed struct {
	*signer.Result
	Audit []audit.Record
}

// ErrAudit wraps a failure to commit audit records: the signature was made
// and then discarded.
var ErrAudit = errors.New("audit record not committed; the signature was discarded")

// Sign signs a card with the active key and any pending key, then commits one
// audit record per signature. It returns the signed card only once those
// records are durable.
func (a *Authority) Sign(ctx context.Context, req SignRequest) (signed *Signed, err error) {
	start := time.Now()
	principal := req.Identity.Principal
	var res *signer.Result
	defer func() {
		result := resultOf(err)
		a.metrics.signDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
		a.metrics.signRequests.WithLabelValues(result, principal).Inc()
		if res == nil {
			return
		}
		// Signatures made: returned, or discarded because their audit
		// records were not committed.
		outcome := "signed"
		if err != nil {
			outcome = "discarded"
		}
		for _, s := range res.Signatures {
			a.metrics.signatures.WithLabelValues(outcome, string(s.Alg), a.backendOf(s.KID), principal).Inc()
		}
	}()
	// A key revoked while this card was being signed: the store refused the
	// records (and so the signatures) by it. Sign again with the key list as
	// it is now, which no longer holds the revoked key.
	for attempt := 1; ; attempt++ {
		signed, res, err = a.signOnce(ctx, req, attempt > 1)
		if err == nil || !errors.Is(err, store.ErrKeyRevoked) || attempt == maxSignAttempts {
			return signed, err
		}
		if res != nil {
			for _, s := range res.Signatures {
				a.metrics.signatures.WithLabelValues("discarded", string(s.Alg), a.backendOf(s.KID), principal).Inc()
			}
		}
		a.log.Info("a signing key was revoked while a card was being signed; signing again", "request_id", req.RequestID, "attempt", attempt)
	}
}

// maxSignAttempts bounds how often Sign starts over when a key is revoked
// under it: two revocations in a row within one request are already rare.
const maxSignAttempts = 3

// signOnce signs with the signing keys as the authority sees them (re-read
// from the store when fresh is set) and commits the audit records. On a
// failed commit it returns the discarded signatures too, for metrics.
func (a *Authority) signOnce(ctx context.Context, req SignRequest, fresh bool) (*Signed, *signer.Result, error) {
	if fresh {
		if _, err := a.records(ctx, true); err != nil {
			return nil, nil, err
		}
	}
	keys, err := a.signingKeys(ctx)
	if err != nil {
		return nil, nil, err
	}
	var refused *audit.Record
	res, err := signer.Sign(ctx, req.Card, signer.Options{
		Keys:           keys,
		JKU:            a.cfg.JKU,
		Mode:           req.Mode,
		KeepSignatures: req.KeepSignatures,
		Card:           cardOptions(a.cfg, req.StripUnknown),
		Check: func(l *card.Loaded, sum [32]byte) error {
			if a.cfg.Policy == nil {
				return nil
			}
			err := a.cfg.Policy.Check(policy.Caller{Identity: req.Identity.Name, Roles: req.Identity.RoleNames()}, l.Value)
			if err != nil {
				r := a.recordFor(req, l, sum)
				r.Outcome, r.Reason = audit.OutcomeRefused, err.Error()
				refused = &r
			}
			return err
		},
	})
	if refused != nil {
		return nil, nil, a.auditRefusal(ctx, *refused, err)
	}
	if err != nil {
		return nil, nil, err
	}
	recs := make([]audit.Record, len(res.Signatures))
	for i, s := range res.Signatures {
		recs[i] = a.recordFor(req, res.Loaded, res.CanonicalSHA256)
		recs[i].KID, recs[i].Alg, recs[i].Profile, recs[i].Signature = s.KID, string(s.Alg), string(s.Profile), s.Value
	}
	committed, err := a.commit(ctx, recs)
	if err != nil {
		return nil, res, err
	}
	return &Signed{Result: res, Audit: committed}, res, nil
}

// recordFor starts the audit record of a request about card l.
func (a *Authority) recordFor(req SignRequest, l *card.Loaded, sum [32]byte) audit.Record {
	name, _ := l.Value.Get("name")
	version, _ := l.Value.Get("version")
	return audit.Record{
		Time:            a.now(),
		Caller:          req.Caller,
		RequestID:       req.RequestID,
		CardName:        name.Str,
		CardVersion:     version.Str,
		CanonicalSHA256: sum[:],
		Outcome:         audit.OutcomeSigned,
	}
}

// commit hands records to the audit log and waits until they are durable.
func (a *Authority) commit(ctx context.Context, recs []audit.Record) ([]audit.Record, error) {
	start := time.Now()
	committed, err := a.batcher.Commit(ctx, recs)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr // the caller gave up while the record waited
		}
		return nil, fmt.Errorf("%w: %w", ErrAudit, err)
	}
	a.metrics.auditCommit.Observe(time.Since(start).Seconds())
	return committed, nil
}

// RefusedError is a card the signing policy refused; the refusal is in the
// audit log as record Seq.
type RefusedError struct {
	Refusal *policy.Refusal
	Seq     int64
	// AuditErr is set when the refusal could not be recorded: the card
	// is refused all the same.
	AuditErr error
}

func (e *RefusedError) Error() string { return e.Refusal.Error() }
func (e *RefusedError) Unwrap() error { return e.Refusal }

// auditRefusal records a policy refusal. A refusal that cannot be recorded
// is still a refusal: the card is not signed either way, and the caller
// learns that the audit log failed.
func (a *Authority) auditRefusal(ctx context.Context, rec audit.Record, refusal error) error {
	var pr *policy.Refusal
	if !errors.As(refusal, &pr) {
		return refusal
	}
	committed, err := a.commit(ctx, []audit.Record{rec})
	if err != nil {
		a.log.Error("policy refusal not recorded in the audit log", "caller", rec.Caller, "request_id", rec.RequestID, "refusal", pr.Error(), "err", err)
		return &RefusedError{Refusal: pr, AuditErr: err}
	}
	return &RefusedError{Refusal: pr, Seq: committed[0].Seq}
}

// resultOf names a signing request's outcome for metrics.
func resultOf(err error) string {
	var (
		cardErr *card.Error
		lintErr *card.LintError
		refused *RefusedError
	)
	switch {
	case err == nil:
		return resultSigned
	case errors.As(err, &refused):
		return resultRefused
	case errors.As(err, &cardErr), errors.As(err, &lintErr):
		return resultInvalid
	}
	return resultError
}

// signingKeys returns the active key and the keys scheduled to follow it,
// each checked against its published public key.
func (a *Authority) signingKeys(ctx context.Context) ([]signer.Key, error) {
	views, err := a.views(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := jwks.Active(views); !ok {
		return nil, ErrNoActiveKey
	}
	var keys []signer.Key
	for _, v := range jwks.Signing(views) {
		k, err := a.open(ctx, v.KeyRecord)
		if err != nil {
			// The key is on record and due to sign: if its backend cannot
			// open it now (an HSM unplugged at start, a KMS outage), signing
			// is unavailable, not broken.
			return nil, &UnavailableError{What: "signing key " + v.KID, Err: err}
		}
		pub, err := a.storedPublic(v.KeyRecord)
		if err != nil {
			return nil, err
		}
		keys = append(keys, signer.Key{Signer: k.Signer, Alg: v.Alg, KID: v.KID, Public: pub})
	}
	return keys, nil
}

// Verify verifies a card against the published keys; signatures by revoked
// keys are reported as such.
func (a *Authority) Verify(ctx context.Context, data []byte, profile string) (*signer.Verification, error) {
	views, err := a.views(ctx)
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
	if profile != "" {
		p, err := parseProfile(profile)
		if err != nil {
			return nil, err
		}
		opts.Profile = p
	}
	return signer.Verify(ctx, data, opts)
}

// documentSigner is the JOSE identity of a published key, for documents the
// authority signs itself.
func (a *Authority) documentSigner(ctx context.Context, views []jwks.View) (*signer.Key, error) {
	v, ok := jwks.Active(views)
	if !ok {
		// With no active key (the last one revoked), the newest published
		// key still vouches for the revocation list.
		pub := jwks.Published(views)
		if len(pub) == 0 {
			return nil, ErrNoActiveKey
		}
		v = pub[len(pub)-1]
	}
	k, err := a.open(ctx, v.KeyRecord)
	if err != nil {
		return nil, err
	}
	return &signer.Key{Signer: k.Signer, Alg: v.Alg, KID: v.KID}, nil
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

// storedPublic returns the decoded public key on record for a kid. Decoding
// a JWK (base64, point validation) is done once per kid, not per signature:
// a kid is never reused for other key material, so the result cannot change.
func (a *Authority) storedPublic(rec jwks.KeyRecord) (crypto.PublicKey, error) {
	a.mu.Lock()
	pub, ok := a.publics[rec.KID]
	a.mu.Unlock()
	if ok {
		return pub, nil
	}
	pub, err := rec.Public.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("stored public key of %s: %w", rec.KID, err)
	}
	a.mu.Lock()
	a.publics[rec.KID] = pub
	a.mu.Unlock()
	return pub, nil
}
