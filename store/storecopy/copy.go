// Package storecopy copies one store into another through the store
// interfaces only (every key record as it is, the whole audit log in order,
// the stored documents and their counters, the card registry, the
// witnesses' cosignatures of the log's checkpoints) and verifies
// the copy: the destination's audit chain and head against the source's,
// both transparency logs' roots, and the key records against the source's
// and the audit trail. It is how a deployment moves from the embedded
// SQLite store to PostgreSQL (cardsignd store copy).
package storecopy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

const (
	// DefaultBatch is how many audit records one destination
	// transaction appends when Options.Batch is 0.
	DefaultBatch = 500
	// copyProgressEvery: a progress line on stderr every this many
	// audit records.
	copyProgressEvery = 10000
	// copyHolder holds the destination's duties lease while the copy
	// stores a document, fencing out any replica's writes.
	copyHolder = "store-copy"
	// dutiesLease is the lease the daemon's cluster duties run under
	// (server's dutiesLease).
	dutiesLease = "duties"
)

// Marker is the document a copy keeps at the destination: InProgress from
// before the first record is written until the copy is verified, then
// Complete. cardsignd refuses to start on a database whose copy is in
// progress: a part-copy lacks the revoked keys and the end of the audit log.
const (
	Marker     = "store-copy"
	InProgress = "in progress"
	Complete   = "complete"
)

// copiedDocuments are the stored documents a copy carries over: the signed
// revocation document (server's revocationsDoc), so its sequence never goes
// back for the verifiers that saw it.
var copiedDocuments = []string{"revocations"}

// Options say how to copy.
type Options struct {
	// AllowNonEmpty resumes an interrupted copy: the destination's keys and
	// audit log must be a part of the source's. Without it a destination
	// holding a key or an audit record is refused with ErrNotEmpty.
	AllowNonEmpty bool
	// Batch is how many audit records one destination transaction appends
	// (0: DefaultBatch).
	Batch int
	// SourceName and DestName name the stores in messages; DestName must
	// not hold a password.
	SourceName, DestName string
	// Out receives progress lines, notes and the outcome (nil: discarded).
	Out io.Writer
	// StopAfter, when above 0, stops the copy after the unrevoked key
	// records and that many audit records, leaving the destination marked
	// InProgress as an interrupted copy does: how tests make a part-copy
	// to resume.
	StopAfter int64
}

// Report is what a copy wrote.
type Report struct {
	Keys         int   // key records created at the destination
	AuditRecords int64 // audit records appended to the destination
}

// Copy copies src into dst and verifies the copy (see the package comment).
// The source must be idle: a daemon running on it holds the duties lease,
// and Copy refuses it. The returned Report counts what was written, also
// when the copy fails part-way.
func Copy(ctx context.Context, src, dst store.Store, opts Options) (Report, error) {
	c := &copier{src: src, dst: dst, out: opts.Out, batch: opts.Batch, srcName: opts.SourceName, dstName: opts.DestName}
	if c.out == nil {
		c.out = io.Discard
	}
	if c.batch <= 0 {
		c.batch = DefaultBatch
	}
	err := c.run(ctx, opts.AllowNonEmpty, opts.StopAfter)
	return Report{Keys: c.keysCopied, AuditRecords: c.recordsCopied}, err
}

// copier is one Copy's state.
type copier struct {
	src, dst         store.Store
	out              io.Writer // progress and the outcome
	batch            int
	srcName, dstName string // for messages; dstName without its password

	start         time.Time
	keysCopied    int
	recordsCopied int64
}

// ErrNotEmpty: the destination holds records and Options.AllowNonEmpty was
// not set.
var ErrNotEmpty = errors.New("the destination is not empty")

// run copies and verifies. The order keeps the store's rules: key records
// that are not revoked first, then the audit log (a store refuses to append
// a record by a key it knows as revoked, whatever the record's time, and
// every record by a revoked key precedes its revocation), then the revoked
// key records as they are, then later changes to any record (a resumed copy
// of a source that changed), then the documents. From before the first
// write until the copy is verified, the destination is marked as a copy in
// progress (Marker), which cardsignd refuses to start on. stopAfter > 0
// stops after that many audit records (Options.StopAfter).
func (c *copier) run(ctx context.Context, allowNonEmpty bool, stopAfter int64) error {
	c.start = time.Now()
	if err := c.sourceIdle(ctx); err != nil {
		return err
	}
	srcKeys, err := c.src.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if len(srcKeys) == 0 {
		return fmt.Errorf("the source %s has no key records: is it the data directory of a cardsignd that ran?", c.srcName)
	}
	// Before anything is written: key records sit outside the audit chain,
	// and one edited behind cardsignd's back (a revocation erased) must not
	// be copied as verified.
	if err := c.checkSourceKeys(ctx, srcKeys); err != nil {
		return err
	}
	dstKeys, err := c.dst.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	dstSeq, dstHash, err := c.dst.AuditHead(ctx)
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	if len(dstKeys) > 0 || dstSeq > 0 {
		if !allowNonEmpty {
			return fmt.Errorf("%w: %s holds %s and %s; store copy writes to an empty database only "+
				"(to resume a copy that was interrupted, run it again with --allow-non-empty)",
				ErrNotEmpty, c.dstName, count(int64(len(dstKeys)), "key record"), count(dstSeq, "audit record"))
		}
		if err := c.checkPart(ctx, srcKeys, dstKeys, dstSeq, dstHash); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "store copy: resuming: the destination holds %d of the source's %s and its audit log up to record %d\n",
			len(dstKeys), count(int64(len(srcKeys)), "key record"), dstSeq)
	}
	if err := c.mark(ctx, InProgress); err != nil {
		return err
	}
	have := map[string]bool{}
	for _, k := range dstKeys {
		have[k.KID] = true
	}
	if err := c.copyKeys(ctx, srcKeys, have, false); err != nil {
		return err
	}
	if err := c.copyAudit(ctx, dstSeq, dstHash, stopAfter); err != nil {
		return err
	}
	if stopAfter > 0 {
		return nil
	}
	if err := c.copyKeys(ctx, srcKeys, have, true); err != nil {
		return err
	}
	if err := c.syncKeys(ctx); err != nil {
		return err
	}
	docs, err := c.copyDocuments(ctx)
	if err != nil {
		return err
	}
	if err := c.copyAgents(ctx); err != nil {
		return err
	}
	if err := c.copyCosignatures(ctx); err != nil {
		return err
	}
	if err := c.copyApprovals(ctx); err != nil {
		return err
	}
	took := time.Since(c.start)
	fmt.Fprintf(c.out, "store copy: copied %s and %s from %s to %s in %s (%s)\n",
		count(int64(c.keysCopied), "key record"), count(c.recordsCopied, "audit record"), c.srcName, c.dstName, took.Round(time.Millisecond), rate(c.recordsCopied, took))
	if err := c.verify(ctx, docs); err != nil {
		return err
	}
	return c.mark(ctx, Complete)
}

// maxCopiedCosignatures bounds the cosignatures a copy reads at once: the
// witness collector prunes them to the sizes still served (a few per
// witness), so a source beyond this was never pruned and its oldest are
// not worth the memory.
const maxCopiedCosignatures = 100000

// copyCosignatures copies the witnesses' cosignatures, so the destination
// serves the same witnessed checkpoint at once instead of waiting for the
// witnesses to be asked again (and, in witness_wait mode require, refusing
// to sign meanwhile). They are copied as they are: the witnessed view
// verifies each against the configured witness keys when it reads it.
func (c *copier) copyCosignatures(ctx context.Context) error {
	cs, err := c.src.Cosignatures(ctx, 0, maxCopiedCosignatures+1)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if len(cs) == 0 {
		return nil
	}
	if len(cs) > maxCopiedCosignatures {
		cs = cs[:maxCopiedCosignatures]
		fmt.Fprintf(c.out, "store copy: note: the source holds more than %d witness cosignatures; copying the newest %d (sizes %d and up): "+
			"the older ones are of checkpoints no longer served\n", maxCopiedCosignatures, maxCopiedCosignatures, cs[len(cs)-1].Size)
	}
	if err := c.dst.PutCosignatures(ctx, cs); err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	got, err := c.dst.Cosignatures(ctx, cs[len(cs)-1].Size, maxCopiedCosignatures+1)
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	have := make(map[transparency.Cosignature]bool, len(got))
	for _, g := range got {
		have[g] = true
	}
	witnesses := map[string]bool{}
	for _, want := range cs {
		if !have[want] {
			return fmt.Errorf("destination: the cosignature of size %d by witness %q differs from the source's", want.Size, want.Witness)
		}
		witnesses[want.Witness] = true
	}
	by := "1 witness"
	if len(witnesses) != 1 {
		by = fmt.Sprintf("%d witnesses", len(witnesses))
	}
	fmt.Fprintf(c.out, "store copy: copied %s by %s (newest size %d)\n", count(int64(len(cs)), "witness cosignature"), by, cs[0].Size)
	return nil
}

// copyApprovals copies the signatures held for approval, with their votes
// and states, page by page, each checked after: a request pending on the
// source can be approved and used on the destination.
func (c *copier) copyApprovals(ctx context.Context) error {
	imp, ok := c.dst.(store.ApprovalImporter)
	if !ok {
		return fmt.Errorf("destination %s cannot take approvals as they are", c.dstName)
	}
	n := 0
	for before := ""; ; {
		page, err := c.src.ListApprovals(ctx, store.ApprovalFilter{Before: before, Limit: 500})
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if len(page) == 0 {
			break
		}
		for _, listed := range page {
			a, err := c.src.Approval(ctx, listed.ID) // with its card
			if err != nil {
				return fmt.Errorf("source: %w", err)
			}
			if err := imp.ImportApproval(ctx, a); err != nil {
				return fmt.Errorf("destination: %w", err)
			}
			got, err := c.dst.Approval(ctx, a.ID)
			if err != nil {
				return fmt.Errorf("destination: %w", err)
			}
			if !sameApproval(got, a) {
				return fmt.Errorf("destination: approval %s differs from the source's", a.ID)
			}
			n++
		}
		before = page[len(page)-1].ID
	}
	if n > 0 {
		fmt.Fprintf(c.out, "store copy: copied %s\n", count(int64(n), "approval"))
	}
	return nil
}

// sameApproval compares what the approvals gate reads of an approval
// (times to the microsecond PostgreSQL keeps).
func sameApproval(got, want store.Approval) bool {
	same := got.ID == want.ID && got.State == want.State && got.Seq == want.Seq && got.Requester == want.Requester &&
		got.AgentID == want.AgentID && got.Rule == want.Rule && got.Group == want.Group && got.Required == want.Required &&
		got.Diff == want.Diff && got.ExpiresAt.Truncate(time.Microsecond).Equal(want.ExpiresAt.Truncate(time.Microsecond)) &&
		bytes.Equal(got.CanonicalSHA256, want.CanonicalSHA256) && bytes.Equal(got.Request, want.Request) && len(got.Votes) == len(want.Votes)
	for i := 0; same && i < len(got.Votes); i++ {
		g, w := got.Votes[i], want.Votes[i]
		same = g.Approver == w.Approver && g.Approve == w.Approve && g.Seq == w.Seq && g.Reason == w.Reason
	}
	return same
}

// copyAgents copies the card registry: every kept version of every agent,
// with its version number, oldest first, checked byte for byte after.
func (c *copier) copyAgents(ctx context.Context) error {
	imp, ok := c.dst.(store.AgentImporter)
	if !ok {
		return fmt.Errorf("destination %s cannot take agent cards as they are", c.dstName)
	}
	agents, versions := 0, 0
	for after := ""; ; {
		page, err := c.src.ListAgents(ctx, after, 500)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if len(page) == 0 {
			break
		}
		for _, a := range page {
			hist, err := c.src.AgentHistory(ctx, a.ID)
			if err != nil {
				return fmt.Errorf("source: %w", err)
			}
			for i := len(hist) - 1; i >= 0; i-- {
				if err := imp.ImportAgentCard(ctx, hist[i]); err != nil {
					return fmt.Errorf("destination: %w", err)
				}
				got, err := c.dst.AgentCard(ctx, hist[i].ID, hist[i].Version)
				if err != nil {
					return fmt.Errorf("destination: %w", err)
				}
				if !bytes.Equal(got.Signed, hist[i].Signed) || !bytes.Equal(got.Input, hist[i].Input) || got.Visibility != hist[i].Visibility {
					return fmt.Errorf("destination: agent %s version %d differs from the source's", got.ID, got.Version)
				}
				versions++
			}
			agents++
			after = a.ID
		}
	}
	revoked, err := c.src.RevokedCards(ctx)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	for _, r := range revoked {
		if err := imp.ImportCardRevocation(ctx, r); err != nil {
			return fmt.Errorf("destination: %w", err)
		}
	}
	if got, err := c.dst.RevokedCards(ctx); err != nil || len(got) != len(revoked) {
		return fmt.Errorf("destination: %d revoked cards after the copy, the source has %d (%v)", len(got), len(revoked), err)
	}
	if agents > 0 || len(revoked) > 0 {
		fmt.Fprintf(c.out, "store copy: copied the registry: %s, %s, %s\n", count(int64(agents), "agent"), count(int64(versions), "card version"),
			count(int64(len(revoked)), "revoked card"))
	}
	return nil
}

// mark records the copy's state at the destination (Marker).
func (c *copier) mark(ctx context.Context, state string) error {
	seq := int64(1)
	prev, err := c.dst.Document(ctx, Marker)
	switch {
	case err == nil:
		seq = prev.Seq + 1
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("destination: %w", err)
	}
	return c.underLease(ctx, func(l store.Lease) error {
		if err := c.dst.PutDocument(ctx, l, store.Document{Name: Marker, Seq: seq, Body: []byte(state)}); err != nil {
			return fmt.Errorf("destination: marking the copy %s: %w", state, err)
		}
		return nil
	})
}

// underLease runs fn holding the destination's duties lease, which fences
// PutDocument: a cardsignd running on the destination holds it, and the
// copy refuses to go on beside it.
func (c *copier) underLease(ctx context.Context, fn func(store.Lease) error) error {
	lease, err := c.dst.AcquireLease(ctx, dutiesLease, copyHolder, 30*time.Second)
	if errors.Is(err, store.ErrLeaseHeld) {
		return fmt.Errorf("destination: %s holds the duties lease: a cardsignd is running on the destination; stop it, then run the copy again with --allow-non-empty", lease.Holder)
	}
	if err != nil {
		return fmt.Errorf("destination: duties lease: %w", err)
	}
	err = fn(lease)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if rerr := c.dst.ReleaseLease(rctx, lease); rerr != nil {
		fmt.Fprintf(c.out, "store copy: warning: could not release the destination's duties lease (it expires in 30s): %v\n", rerr)
	}
	return err
}

// sourceIdle refuses a source a cardsignd is running on: a running daemon
// holds the duties lease (renewing it every few seconds) and goes on
// appending records the copy would miss. Taking the lease for a moment and
// giving it back tells.
func (c *copier) sourceIdle(ctx context.Context) error {
	l, err := c.src.AcquireLease(ctx, dutiesLease, copyHolder, time.Second)
	if errors.Is(err, store.ErrLeaseHeld) {
		return fmt.Errorf("a cardsignd (%s) is running on the source %s: it holds the duties lease until %s; stop it before copying "+
			"(a cardsignd that was killed holds it until then: run the copy again after that)", l.Holder, c.srcName, l.Expires.Format(time.RFC3339))
	}
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if err := c.src.ReleaseLease(ctx, l); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	return nil
}

// checkPart accepts a non-empty destination only when it is a part of the
// source: each of its keys is the source's (same kid and immutable fields),
// and its audit log ends at a record of the source's, with the same hash.
func (c *copier) checkPart(ctx context.Context, srcKeys, dstKeys []jwks.KeyRecord, dstSeq int64, dstHash []byte) error {
	src := map[string]jwks.KeyRecord{}
	for _, k := range srcKeys {
		src[k.KID] = k
	}
	notPart := func(format string, args ...any) error {
		return fmt.Errorf("the destination %s is not a part-copy of %s, refusing to mix two histories: %s", c.dstName, c.srcName, fmt.Sprintf(format, args...))
	}
	for _, d := range dstKeys {
		s, ok := src[d.KID]
		switch {
		case !ok:
			return notPart("its key %s is not in the source (did a cardsignd start on it and make a key of its own?)", d.KID)
		case s.URI != d.URI || s.Alg != d.Alg || s.Public != d.Public || !s.CreatedAt.Equal(d.CreatedAt):
			return notPart("its key %s differs from the source's (uri, alg, public key or creation time)", d.KID)
		case d.RevokedAt != nil && s.RevokedAt == nil:
			return notPart("its key %s is revoked, the source's is not", d.KID)
		}
	}
	if dstSeq == 0 {
		return nil
	}
	recs, err := c.src.ListAudit(ctx, dstSeq-1, 1)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if len(recs) == 0 || recs[0].Seq != dstSeq || !bytes.Equal(recs[0].Hash, dstHash) {
		return notPart("its audit log ends at %s, which is not a record of the source's audit log", audit.Head{Seq: dstSeq, Hash: dstHash})
	}
	return nil
}

// copyKeys creates the source's key records the destination lacks, as they
// are: those not revoked (revoked false), or the revoked ones.
func (c *copier) copyKeys(ctx context.Context, srcKeys []jwks.KeyRecord, have map[string]bool, revoked bool) error {
	for _, k := range srcKeys {
		if have[k.KID] || (k.RevokedAt != nil) != revoked {
			continue
		}
		if err := c.dst.CreateKey(ctx, k, nil); err != nil {
			return fmt.Errorf("destination: key %s: %w", k.KID, err)
		}
		have[k.KID] = true
		c.keysCopied++
	}
	return nil
}

// copyAudit appends the source's audit records after seq (whose hash is
// prev) to the destination, batch by batch, until the source has no more or
// limit records were copied (0: no limit). Each source batch is verified
// before it is appended and each appended record must come back with the
// source's seq and hash: the destination chains from the same head, so the
// hashes are identical, or the source is broken.
func (c *copier) copyAudit(ctx context.Context, seq int64, prev []byte, limit int64) error {
	var copied int64
	next := int64(copyProgressEvery)
	for limit == 0 || copied < limit {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted after audit record %d (%v): run the copy again with --allow-non-empty to resume", seq, err)
		}
		n := c.batch
		if limit > 0 {
			n = int(min(int64(n), limit-copied))
		}
		recs, err := c.src.ListAudit(ctx, seq, n)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if len(recs) == 0 {
			break
		}
		if recs[0].Seq != seq+1 {
			return fmt.Errorf("the source's audit log has no record %d (the next is %d): records were deleted; run cardsign audit verify against it", seq+1, recs[0].Seq)
		}
		if err := audit.VerifyChain(prev, recs); err != nil {
			return fmt.Errorf("the source's audit log does not verify (%v); nothing after record %d was copied", err, seq)
		}
		out, err := c.dst.AppendAudit(ctx, recs)
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("interrupted at audit record %d (%v): run the copy again with --allow-non-empty to resume", recs[0].Seq, ctx.Err())
		}
		if err != nil {
			return fmt.Errorf("destination: audit records %d to %d: %w", recs[0].Seq, recs[len(recs)-1].Seq, err)
		}
		for i, r := range out {
			if r.Seq != recs[i].Seq || !bytes.Equal(r.Hash, recs[i].Hash) {
				return fmt.Errorf("destination: audit record %d was stored as %s, want %s: the destination's log is not the source's",
					recs[i].Seq, audit.Head{Seq: r.Seq, Hash: r.Hash}, audit.Head{Seq: recs[i].Seq, Hash: recs[i].Hash})
			}
		}
		last := out[len(out)-1]
		seq, prev = last.Seq, last.Hash
		copied += int64(len(out))
		c.recordsCopied += int64(len(out))
		if c.recordsCopied >= next {
			fmt.Fprintf(c.out, "store copy: %d audit records copied (up to record %d, %s)\n", c.recordsCopied, seq, rate(c.recordsCopied, time.Since(c.start)))
			next += copyProgressEvery
		}
	}
	return nil
}

// syncKeys brings the destination's key records to the source's where a
// mutable field differs (a part-copy of a source that changed since: a key
// activated, retired or revoked). The store refuses what a key's history
// forbids (undoing a revocation).
func (c *copier) syncKeys(ctx context.Context) error {
	srcKeys, err := c.src.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	src := map[string]jwks.KeyRecord{}
	for _, k := range srcKeys {
		src[k.KID] = k
	}
	err = c.dst.UpdateKeys(ctx, func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) {
		var changed []jwks.KeyRecord
		for _, r := range recs {
			if s, ok := src[r.KID]; ok && !sameKey(s, r) {
				changed = append(changed, s)
			}
		}
		return changed, nil
	})
	if err != nil {
		return fmt.Errorf("destination: updating key records to the source's: %w", err)
	}
	return nil
}

// copyDocuments stores the source's documents at the destination under the
// duties lease (PutDocument is fenced by it), unless the destination has
// the same or a later one. It returns the source's documents' sequences.
func (c *copier) copyDocuments(ctx context.Context) (map[string]int64, error) {
	seqs := map[string]int64{}
	for _, name := range copiedDocuments {
		// The document's counter first: a source last run by a cardsignd
		// that kept no stored document still numbered the ones it served,
		// and the destination must go on above them.
		counter, err := c.copyCounter(ctx, name)
		if err != nil {
			return nil, err
		}
		seqs[name] = counter
		doc, err := c.src.Document(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
		seqs[name] = max(counter, doc.Seq)
		have, err := c.dst.Document(ctx, name)
		switch {
		case err == nil && have.Seq >= doc.Seq:
			continue // copied before (or re-signed there since)
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("destination: %w", err)
		}
		err = c.underLease(ctx, func(l store.Lease) error {
			if err := c.dst.PutDocument(ctx, l, store.Document{Name: doc.Name, Seq: doc.Seq, Body: doc.Body, Meta: doc.Meta}); err != nil {
				return fmt.Errorf("destination: document %s: %w", name, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return seqs, nil
}

// copyCounter raises the destination's counter name to the source's and
// returns the source's value.
func (c *copier) copyCounter(ctx context.Context, name string) (int64, error) {
	src, ok := c.src.(store.Counters)
	dst, ok2 := c.dst.(store.Counters)
	if !ok || !ok2 {
		return 0, fmt.Errorf("the stores cannot copy their %s counter (%T, %T)", name, c.src, c.dst)
	}
	v, err := src.Counter(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	if err := dst.RaiseCounter(ctx, name, v); err != nil {
		return 0, fmt.Errorf("destination: %w", err)
	}
	return v, nil
}

// verify checks the copy: the destination's whole audit chain, its head
// against the source's (read again now), the key records field by field,
// and the documents' sequences.
func (c *copier) verify(ctx context.Context, docs map[string]int64) error {
	var n, seq int64
	prev := audit.Genesis()
	var trail store.KeyTrail
	for recs, err := range auditPages(ctx, c.dst) {
		if err != nil {
			return fmt.Errorf("verify: destination: %w", err)
		}
		if recs[0].Seq != seq+1 {
			return fmt.Errorf("verify: the destination's audit log has no record %d", seq+1)
		}
		if err := audit.VerifyChain(prev, recs); err != nil {
			return fmt.Errorf("verify: the destination's audit log: %w", err)
		}
		for _, r := range recs {
			if err := trail.Add(r); err != nil {
				return fmt.Errorf("verify: the destination's %w", err)
			}
		}
		n += int64(len(recs))
		last := recs[len(recs)-1]
		seq, prev = last.Seq, last.Hash
	}
	srcSeq, srcHash, err := c.src.AuditHead(ctx)
	if err != nil {
		return fmt.Errorf("verify: source: %w", err)
	}
	dstSeq, dstHash, err := c.dst.AuditHead(ctx)
	if err != nil {
		return fmt.Errorf("verify: destination: %w", err)
	}
	srcHead, dstHead := audit.Head{Seq: srcSeq, Hash: srcHash}, audit.Head{Seq: dstSeq, Hash: dstHash}
	switch {
	case dstSeq != seq || !bytes.Equal(dstHash, prev):
		return fmt.Errorf("verify: the destination's audit head %s is not its last record %s", dstHead, audit.Head{Seq: seq, Hash: prev})
	case srcSeq > dstSeq:
		return fmt.Errorf("verify: the source's audit head is %s but the copy ends at %s: records were appended to the source during the copy "+
			"(stop cardsignd, then run the copy again with --allow-non-empty), or the source's last records were deleted (run cardsign audit verify against it)",
			srcHead, dstHead)
	case srcSeq != dstSeq || !bytes.Equal(srcHash, dstHash):
		return fmt.Errorf("verify: the source's audit head %s differs from the destination's %s", srcHead, dstHead)
	}
	// The destination made each record's transparency-log entry anew, from
	// the record and the hosts the source's ListAudit read from its entry:
	// the two trees must be one, or proofs the source handed out would not
	// verify against the destination's checkpoints.
	srcRoot, err := transparency.TreeRoot(ctx, c.src, srcSeq)
	if err != nil {
		return fmt.Errorf("verify: source: %w", err)
	}
	dstRoot, err := transparency.TreeRoot(ctx, c.dst, dstSeq)
	if err != nil {
		return fmt.Errorf("verify: destination: %w", err)
	}
	if srcRoot != dstRoot {
		return fmt.Errorf("verify: the destination's transparency log (%d leaves, root %s) is not the source's (root %s): its entries differ; "+
			"do not start cardsignd on it: copy again into an empty database", dstSeq, dstRoot, srcRoot)
	}
	srcKeys, err := c.src.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("verify: source: %w", err)
	}
	dstKeys, err := c.dst.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("verify: destination: %w", err)
	}
	if kid, ok := sameKeys(srcKeys, dstKeys); !ok {
		return fmt.Errorf("verify: the key records differ (first at %s): a cardsignd changed a key during the copy? stop it and run the copy again with --allow-non-empty", kid)
	}
	if problems, _ := trail.Check(dstKeys, store.CheckAll); len(problems) > 0 {
		return fmt.Errorf("verify: the destination's %s", keyTrailProblems(problems))
	}
	var docNote string
	for _, name := range copiedDocuments {
		want, ok := docs[name]
		if !ok {
			continue
		}
		var have int64
		switch d, err := c.dst.Document(ctx, name); {
		case err == nil:
			have = d.Seq
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("verify: destination: document %s: %w", name, err)
		}
		if dst, ok := c.dst.(store.Counters); ok {
			v, err := dst.Counter(ctx, name)
			if err != nil {
				return fmt.Errorf("verify: destination: %w", err)
			}
			have = max(have, v)
		}
		if have < want {
			return fmt.Errorf("verify: the destination's %s sequence is %d, the source's %d", documentLabel(name), have, want)
		}
		docNote += fmt.Sprintf(", %s sequence %d", documentLabel(name), have)
	}
	fmt.Fprintf(c.out, "store copy: verified %s: audit chain intact (%s, head %s), audit head equals the source's, key records equal the source's (%d) and agree with the audit trail%s\n",
		c.dstName, count(n, "record"), dstHead, len(dstKeys), docNote)
	return nil
}

// sameKeys reports whether a and b hold the same records (ListKeys order),
// or the first kid that differs.
func sameKeys(a, b []jwks.KeyRecord) (string, bool) {
	for i := range max(len(a), len(b)) {
		switch {
		case i >= len(a):
			return b[i].KID, false
		case i >= len(b):
			return a[i].KID, false
		case !sameKey(a[i], b[i]):
			return a[i].KID, false
		}
	}
	return "", true
}

// sameKey compares every field, times by instant.
func sameKey(a, b jwks.KeyRecord) bool {
	eqp := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	return a.KID == b.KID && a.URI == b.URI && a.Alg == b.Alg && a.Public == b.Public &&
		a.CreatedAt.Equal(b.CreatedAt) && a.PublishAt.Equal(b.PublishAt) &&
		eqp(a.ActivateAt, b.ActivateAt) && eqp(a.RetireAt, b.RetireAt) && eqp(a.ExpireAt, b.ExpireAt) &&
		eqp(a.RevokedAt, b.RevokedAt) && a.RevokeReason == b.RevokeReason
}

// count renders n things: "1 key record", "2 key records".
func count(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// documentLabel names a stored document for people.
func documentLabel(name string) string {
	if name == "revocations" {
		return "revocation document"
	}
	return "document " + name
}

// rate renders records per second.
func rate(n int64, d time.Duration) string {
	if d <= 0 {
		return fmt.Sprintf("%d records", n)
	}
	return fmt.Sprintf("%.0f records/s", float64(n)/d.Seconds())
}

// checkSourceKeys reads the source's audit log for its key administration
// records and checks the source's key records against them
// (store.KeyTrail): a key record edited, added or deleted outside cardsignd
// (a revocation erased from the keys table) refuses the copy.
func (c *copier) checkSourceKeys(ctx context.Context, srcKeys []jwks.KeyRecord) error {
	var trail store.KeyTrail
	for recs, err := range auditPages(ctx, c.src) {
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		for _, r := range recs {
			if err := trail.Add(r); err != nil {
				return fmt.Errorf("the source's %w", err)
			}
		}
	}
	problems, legacy := trail.Check(srcKeys, store.CheckAll)
	// The signed revocation document covers the keys the trail does not
	// (legacy keys on an upgraded store): every kid it lists must still be
	// revoked in the key records.
	revProblems, err := c.checkSourceRevocations(ctx, srcKeys)
	if err != nil {
		return err
	}
	problems = append(problems, revProblems...)
	if len(problems) > 0 {
		return fmt.Errorf("the source %s: %s; nothing was copied", c.srcName, keyTrailProblems(problems))
	}
	if len(legacy) > 0 {
		fmt.Fprintf(c.out, "store copy: note: %s predate the audit of key administration and are checked against the signed revocation document only: %v\n",
			count(int64(len(legacy)), "key record"), legacy)
	}
	return nil
}

// auditPages reads log's whole audit log, oldest first, in pages of 1000
// records; a read error is the last thing it yields.
func auditPages(ctx context.Context, log store.AuditLog) iter.Seq2[[]audit.Record, error] {
	return func(yield func([]audit.Record, error) bool) {
		for seq := int64(0); ; {
			recs, err := log.ListAudit(ctx, seq, 1000)
			if err != nil {
				yield(nil, err)
				return
			}
			if len(recs) == 0 || !yield(recs, nil) {
				return
			}
			seq = recs[len(recs)-1].Seq
		}
	}
}

// checkSourceRevocations checks the source's key records against its
// stored signed revocation document (store.CheckRevocations), and notes a
// document behind the revocation counter (store.RevocationsBehind).
func (c *copier) checkSourceRevocations(ctx context.Context, srcKeys []jwks.KeyRecord) ([]*store.KeyTrailError, error) {
	var counter, stored int64
	if ctr, ok := c.src.(store.Counters); ok {
		var err error
		if counter, err = ctr.Counter(ctx, store.RevocationsDocument); err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
	}
	var problems []*store.KeyTrailError
	switch doc, err := c.src.Document(ctx, store.RevocationsDocument); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("source: %w", err)
	default:
		if problems, err = store.CheckRevocations(doc, srcKeys); err != nil {
			return nil, fmt.Errorf("the source %s: %w; nothing was copied. The database was edited outside cardsignd: "+
				"restore it from a backup and find out who could write to it", c.srcName, err)
		}
		stored = doc.Seq
	}
	if note := store.RevocationsBehind(stored, counter); note != "" {
		fmt.Fprintf(c.out, "store copy: note: %s\n", note)
	}
	return problems, nil
}

// keyTrailProblems says what disagrees and what to do.
func keyTrailProblems(problems []*store.KeyTrailError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s disagree with the audit log's key administration records: ", count(int64(len(problems)), "key record"))
	for i, p := range problems {
		if i > 0 {
			b.WriteString("; ")
		}
		if i == 5 {
			fmt.Fprintf(&b, "and %d more", len(problems)-i)
			break
		}
		fmt.Fprintf(&b, "key %q: %s", p.KID, p.Reason)
		if p.Seq > 0 {
			fmt.Fprintf(&b, " (audit record %d)", p.Seq)
		}
	}
	b.WriteString(". The keys table was edited outside cardsignd (a revocation erased would publish a revoked key again): " +
		"restore the database from a backup and find out who could write to it")
	return b.String()
}
