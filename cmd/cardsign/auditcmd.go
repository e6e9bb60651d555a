package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/tlogclient"
	"github.com/cardsign/cardsign/webtrust"
)

func auditCmd() command {
	c := command{
		name:    "audit",
		long:    auditLong,
		summary: "List cardsignd's audit records, or verify the hash chain that links them against a published head.",
		usage:   "list [--after SEQ] [--limit N] [--json] | verify [--jwks FILE|URL [--revocations FILE|URL] | --head SEQ:HASH] [--log URL --log-key KEY [--witness KEY ... [--witness-quorum K]]]   (both take --server ADDR)",
		example: "  cardsign audit list --after 100 --limit 20 --server 127.0.0.1:7700\n" +
			"  cardsign audit verify --jwks http://127.0.0.1:7701/.well-known/jwks.json\n" +
			"  audit chain intact: 7 records, head 5be1…\n" +
			"  checked against the published head record 7 (hash 5be1…) from http://127.0.0.1:7701/.well-known/cardsign-revocations.json (…): the log holds it\n" +
			"  cardsign audit verify --jwks jwks.json --revocations saved-revocations.json\n" +
			"  cardsign audit verify --head 7:5be1…\n" +
			"  cardsign audit verify --jwks http://127.0.0.1:7701/.well-known/jwks.json --log http://127.0.0.1:7701/log/ --log-key http://127.0.0.1:7701/.well-known/cardsign-log-key\n" +
			"  transparency log consistent with the audit records: 7 leaves, root 36nc…",
	}
	c.subcommands = true
	c.subs = []subcommand{
		{"list", "print one record per line with every field, its outcome and an identity token's provenance"},
		{"verify", "walk the whole hash chain, check it against a published head (--jwks, --revocations or --head) and the key records, and with --log the transparency log"},
	}
	c.daemon = &daemonFlags{timeout: 60 * time.Second, timeoutUsage: "deadline of each call"}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		o := &auditOptions{}
		fs.Int64Var(&o.after, "after", 0, "list: records with a sequence number above this")
		fs.IntVar(&o.limit, "limit", 0, "list: at most this many records (default all)")
		fs.BoolVar(&o.asJSON, "json", false, "list: one JSON object per line")
		fs.StringVar(&o.hs.jwks, "jwks", "", "verify: trusted JWKS (file or http(s) URL) to check the signed revocation document, whose audit_head the log must hold; default: no head, and a truncated tail goes unnoticed")
		fs.StringVar(&o.hs.revocations, "revocations", "", "verify: the signed revocation document (file or URL), a fresh one or a copy kept from before; default: "+jwks.RevocationsPath+" on the --jwks URL's host")
		fs.StringVar(&o.hs.head, "head", "", "verify: a head to check against, SEQ:HASH (hash in hex), instead of a revocation document")
		fs.StringVar(&o.logURL, "log", "", "verify: the transparency log's URL prefix (cardsignd: "+transparency.PathPrefix+"); every record is then checked against its log entry, and the tree rebuilt from the entries against the log's signed checkpoint")
		fs.Var(&o.witnesses, "witness", "verify, with --log: a witness's verifier key NAME+HASH+BASE64, a file of such keys, or an http(s) URL serving them (repeatable): the log's checkpoint must carry --witness-quorum of their cosignatures, and the report names them")
		fs.IntVar(&o.quorum, "witness-quorum", 0, "verify, with --witness: how many of the witnesses must have cosigned (default: all named)")
		fs.StringVar(&o.logKey, "log-key", "", "verify, with --log: the log's verifier key(s): ORIGIN+HASH+BASE64, a file of such keys, or an http(s) URL serving them ("+transparency.KeyPath+")")
		return o.run
	}
	return c
}

// auditOptions are the flags of audit list and audit verify.
type auditOptions struct {
	after          int64
	limit          int
	asJSON         bool
	hs             headSource
	logURL, logKey string
	witnesses      stringsFlag
	quorum         int
}

// run checks the arguments and runs audit list or audit verify.
func (o *auditOptions) run(ctx context.Context, in *call) int {
	sub, pos, hs := in.sub, in.pos, o.hs
	if sub != "list" && sub != "verify" {
		return in.usageError("unknown subcommand %q", sub)
	}
	if len(pos) > 0 {
		return in.usageError("unexpected argument %q", pos[0])
	}
	if sub == "list" && (hs.jwks != "" || hs.revocations != "" || hs.head != "" || o.logURL != "" || o.logKey != "") {
		return in.usageError("--jwks, --revocations, --head, --log and --log-key are for audit verify")
	}
	if (o.logURL == "") != (o.logKey == "") {
		return in.usageError("--log and --log-key go together: the log is checked only against keys you name")
	}
	if (len(o.witnesses) > 0 || o.quorum != 0) && (o.logURL == "" || len(o.witnesses) == 0) {
		return in.usageError("--witness goes with --log and --log-key (and --witness-quorum with --witness): witnesses vouch for the log's checkpoints")
	}
	if sub == "verify" {
		return o.verify(ctx, in)
	}
	cl, code, ok := in.dial()
	if !ok {
		return code
	}
	defer cl.close()
	// Lines go out page by page as they arrive: nothing but the
	// page being printed is held.
	out := bufio.NewWriterSize(in.stdout, 64<<10)
	for r, err := range auditRecords(ctx, cl, o.after, o.limit) {
		if err != nil {
			out.Flush()
			fmt.Fprintf(in.stderr, "cardsign audit %s: %s\n", sub, describe(err))
			return exitFail
		}
		printRecord(out, r, o.asJSON)
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(in.stderr, "cardsign audit %s: %v\n", sub, err)
		return exitFail
	}
	return exitOK
}

// loadHead reads the published head to check against; noHead says why
// there is none.
func (o *auditOptions) loadHead(ctx context.Context, in *call) (published *publishedHead, noHead string, code int, ok bool) {
	hc, err := fetchClient(in.conn.caFile, in.timeout, noDowngrade)
	if err != nil {
		return nil, "", in.usageError("%s", escapeText(err.Error())), false
	}
	hctx, cancel := context.WithTimeout(ctx, in.timeout)
	published, err = o.hs.load(hctx, hc, time.Now())
	cancel()
	var up *usageProblem
	switch {
	case errors.As(err, &up):
		return nil, "", in.usageError("%s", up.msg), false
	case errors.Is(err, errNoHeadSource):
		noHead = "give --jwks URL to check against the audit head in cardsignd's signed revocation document, or --head SEQ:HASH"
		if err != errNoHeadSource { // wrapped: it says why
			noHead = err.Error()
		}
	case err != nil:
		fmt.Fprintf(in.stderr, "cardsign audit verify: published head: %s\n", escapeText(err.Error()))
		return nil, "", exitUsage, false
	}
	return published, noHead, 0, true
}

// openLog reads the log's checkpoint (nil without --log), for the records
// to be checked against.
func (o *auditOptions) openLog(ctx context.Context, in *call) (lc *logCheck, code int, ok bool) {
	if o.logURL == "" {
		return nil, 0, true
	}
	hc, err := fetchClient(in.conn.caFile, in.timeout, noDowngrade)
	if err != nil {
		return nil, in.usageError("%s", escapeText(err.Error())), false
	}
	hctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	keys, err := webtrust.LoadLogKeys(hctx, o.logKey, hc)
	if err != nil {
		return nil, in.usageError("--log-key: %s", escapeText(err.Error())), false
	}
	tc := &tlogclient.Client{URL: o.logURL, HTTP: hc, Keys: keys}
	cp, err := tc.Checkpoint(hctx)
	if err != nil {
		fmt.Fprintf(in.stderr, "cardsign audit verify: transparency log: %s\n", escapeText(err.Error()))
		return nil, exitFail, false
	}
	if len(o.witnesses) > 0 {
		wp, err := webtrust.LoadWitnessPolicy(hctx, o.witnesses, o.quorum, hc)
		if err != nil {
			return nil, in.usageError("--witness: %s", escapeText(err.Error())), false
		}
		vouched, werr := witnessCheck(wp, cp.Note)
		fmt.Fprintf(in.stdout, "transparency log checkpoint of %d leaves: %s\n", cp.Size, witnessLine(wp, vouched, werr))
		if werr != nil {
			return nil, exitNotWitnessed, false
		}
	}
	return &logCheck{AuditChecker: transparency.NewAuditChecker(tc, cp, in.timeout), url: o.logURL}, 0, true
}

// verify walks the whole log from seq 1, checked record by record as the
// pages arrive, against the published head, the key records and the
// transparency log, and reports.
func (o *auditOptions) verify(ctx context.Context, in *call) int {
	// The head is read before the log: records appended meanwhile only
	// extend the log past it, while a head read after the walk could be
	// past the records seen and look like a truncation.
	published, noHead, code, ok := o.loadHead(ctx, in)
	if !ok {
		return code
	}
	// The log's checkpoint too is read before the records, for the
	// same reason: records appended meanwhile are past it, not missing.
	lc, code, ok := o.openLog(ctx, in)
	if !ok {
		return code
	}
	cl, code, ok := in.dial()
	if !ok {
		return code
	}
	defer cl.close()
	// The verifier keeps only the previous hash and, for the published
	// head, the hash of the record at its seq.
	var head *audit.Head
	if published != nil {
		head = &published.head
	}
	v := audit.NewChainVerifier(audit.Genesis(), head)
	var trail store.KeyTrail // the key administration records, to check the keys against
	if code, ok := walkAudit(ctx, in, cl, v, &trail, lc); !ok {
		return code
	}
	if err := v.Finish(); err != nil {
		fmt.Fprintf(in.stdout, "%s\nhead published by %s\nthe log was edited outside cardsignd: restore the database from a backup and find out who could write to it\n", escapeText(err.Error()), escapeText(published.from))
		return exitFail
	}
	var keysReport bytes.Buffer // printed after the chain's line
	var revocations *jwks.Revocations
	if published != nil {
		revocations = published.doc
	}
	keysOK, err := checkKeyTrail(ctx, &keysReport, cl, v, &trail, revocations)
	if err != nil {
		fmt.Fprintf(in.stderr, "cardsign audit %s: %s\n", in.sub, escapeText(err.Error()))
		return exitFail
	}
	if lc != nil {
		if err := lc.Finish(v.Count()); err != nil {
			return reportLogCheck(in.env, err)
		}
	}
	reportAudit(in.stdout, v, keysReport.Bytes(), lc, published, noHead)
	if !keysOK {
		return exitFail
	}
	return exitOK
}

// walkAudit feeds every record to the chain verifier, the key trail and
// the log checker; ok is false when one of them refused a record (and it
// was reported).
func walkAudit(ctx context.Context, in *call, cl *client, v *audit.ChainVerifier, trail *store.KeyTrail, lc *logCheck) (code int, ok bool) {
	for r, err := range auditRecords(ctx, cl, 0, 0) {
		if err != nil {
			fmt.Fprintf(in.stderr, "cardsign audit %s: %s\n", in.sub, describe(err))
			return exitFail, false
		}
		if err := v.Add(r); err != nil {
			var ce *audit.ChainError
			if errors.As(err, &ce) {
				fmt.Fprintf(in.stdout, "audit chain BROKEN at record %d: %s\n", ce.Seq, escapeText(ce.Reason))
			} else {
				fmt.Fprintf(in.stdout, "audit chain BROKEN: %s\n", escapeText(err.Error()))
			}
			return exitFail, false
		}
		if err := trail.Add(r); err != nil {
			fmt.Fprintf(in.stdout, "audit chain BROKEN: %v\n", err)
			return exitFail, false
		}
		if lc != nil {
			if err := lc.Add(ctx, r); err != nil {
				return reportLogCheck(in.env, err), false
			}
		}
	}
	return 0, true
}

// reportAudit prints the verdict of a verified walk: the chain, the keys,
// the log, and what the head did or could not check.
func reportAudit(w io.Writer, v *audit.ChainVerifier, keysReport []byte, lc *logCheck, published *publishedHead, noHead string) {
	_, lastHash := v.Last()
	fmt.Fprintf(w, "audit chain intact: %d records, head %s\n", v.Count(), hex.EncodeToString(lastHash))
	w.Write(keysReport)
	if lc != nil {
		cp := lc.Checkpoint()
		fmt.Fprintf(w, "transparency log consistent with the audit records: %d leaves, root %s (checkpoint of %s from %s)\n",
			cp.Size, cp.Root, escapeText(cp.Origin), lc.url)
		if v.Count() > cp.Size {
			fmt.Fprintf(w, "note: records %d to %d came after the log's checkpoint and are not checked against the log yet\n", cp.Size+1, v.Count())
		}
	}
	if noHead != "" {
		fmt.Fprintf(w, "note: no published head to check against: truncation of the tail cannot be detected (%s)\n", escapeText(noHead))
	}
	if published == nil {
		return
	}
	for _, n := range published.note {
		fmt.Fprintf(w, "note: %s\n", escapeText(n))
	}
	if published.head.Seq == 0 {
		// Every log extends the empty one: a head of record 0 (a
		// document signed before the first record) checks nothing,
		// and saying "the log holds it" would pass off no check as
		// one.
		fmt.Fprintf(w, "note: nothing to check against: the published head from %s is record 0, the empty log (signed before the first record); truncation of the tail cannot be detected: check against a later document or --head SEQ:HASH\n",
			escapeText(published.from))
	} else {
		fmt.Fprintf(w, "checked against the published head record %d (hash %s) from %s: the log holds it\n",
			published.head.Seq, hex.EncodeToString(published.head.Hash), escapeText(published.from))
	}
}

// auditPageSize is the page size audit list and verify ask for: the
// server's default, well under gRPC's 4 MiB message limit (records are a few
// hundred bytes).
const auditPageSize = 1000

// auditRecords yields the records with a sequence number above after, at
// most limit of them (0: all), fetching them page by page with
// ListAuditRecords (after_sequence, page_size) as the loop consumes them:
// it holds one page at a time, whatever the size of the log. A failed call,
// or a server whose next page would not move forward, ends it with an error.
func auditRecords(ctx context.Context, cl *client, after int64, limit int) iter.Seq2[audit.Record, error] {
	return func(yield func(audit.Record, error) bool) {
		count, next := 0, after
		for {
			page := int32(auditPageSize)
			if limit > 0 && limit-count < int(page) {
				page = int32(limit - count)
			}
			cctx, cancel := cl.ctx(ctx)
			res, err := cl.audit.ListAuditRecords(cctx, &pb.ListAuditRecordsRequest{AfterSequence: next, PageSize: page})
			cancel()
			if err != nil {
				yield(audit.Record{}, err)
				return
			}
			for _, r := range res.GetRecords() {
				if !yield(recordOf(r), nil) {
					return
				}
				count++
			}
			n := res.GetNextAfterSequence()
			switch {
			case n == 0 || (limit > 0 && count >= limit):
				return
			case n <= next || len(res.GetRecords()) == 0:
				yield(audit.Record{}, fmt.Errorf("the server's next page (after sequence %d) does not move past sequence %d", n, next))
				return
			}
			next = n
		}
	}
}

func recordOf(r *pb.AuditRecord) audit.Record {
	return audit.Record{
		Seq: r.GetSequence(), Time: r.GetTime().AsTime().UTC(), Caller: r.GetCaller(), RequestID: r.GetRequestId(),
		CardName: r.GetCardName(), CardVersion: r.GetCardVersion(), CanonicalSHA256: r.GetCanonicalSha256(),
		KID: r.GetKid(), Alg: r.GetAlg(), Profile: r.GetProfile(), Signature: r.GetSignature(),
		Outcome: r.GetOutcome(), Reason: r.GetReason(), Provenance: audit.EncodeProvenance(r.GetProvenance()), Detail: r.GetDetail(),
		PrevHash: r.GetPrevHash(), Hash: r.GetHash(),
	}
}

// printRecord prints every field of a record, the signature included, and its
// outcome: "signed" (also for a record without one, from an older server),
// "refused", or an administrative record's kind ("key.revoke", ...). Fields empty by definition are left out: a signed record's
// reason; a refused record's kid, alg, profile and signature (in the text
// form only). Anything a record does carry is printed.
func printRecord(w io.Writer, r audit.Record, asJSON bool) {
	outcome := r.Outcome
	if outcome == "" {
		outcome = audit.OutcomeSigned
	}
	showReason := r.Refused() || r.Reason != ""
	if asJSON {
		m := map[string]any{
			"sequence": r.Seq, "time": r.Time.Format(time.RFC3339Nano), "outcome": outcome, "caller": r.Caller, "request_id": r.RequestID,
			"card_name": r.CardName, "card_version": r.CardVersion, "canonical_sha256": hex.EncodeToString(r.CanonicalSHA256),
			"kid": r.KID, "alg": r.Alg, "profile": r.Profile, "signature": r.Signature,
			"prev_hash": hex.EncodeToString(r.PrevHash), "hash": hex.EncodeToString(r.Hash),
		}
		if showReason {
			m["reason"] = r.Reason
		}
		if p, err := audit.DecodeProvenance(r.Provenance); err == nil && p != nil {
			m["provenance"] = p
		}
		if r.Detail != "" && json.Valid([]byte(r.Detail)) {
			m["detail"] = json.RawMessage(r.Detail)
		}
		b, _ := json.Marshal(m)
		fmt.Fprintf(w, "%s\n", escapeJSON(b))
		return
	}
	// Every field but the numbers and hashes is the caller's or the
	// card's (an OIDC subject may hold a newline and an escape sequence)
	// or the daemon's: escaped, so that no record can forge a line.
	var line strings.Builder
	fmt.Fprintf(&line, "%d %s outcome=%s", r.Seq, r.Time.Format(time.RFC3339Nano), escapeValue(outcome))
	if showReason {
		fmt.Fprintf(&line, " reason=%q", r.Reason)
	}
	fmt.Fprintf(&line, " caller=%s request=%s card=%q version=%q sha256=%s",
		escapeValue(r.Caller), escapeValue(r.RequestID), r.CardName, r.CardVersion, hex.EncodeToString(r.CanonicalSHA256))
	if r.Provenance != "" {
		// The JSON text as hashed, escaped like everything a caller can
		// put on a terminal (a workflow name with spaces or controls).
		fmt.Fprintf(&line, " provenance=%s", escapeText(r.Provenance))
	}
	if r.Detail != "" {
		// An administrative record's subject: a key's state after the
		// action, or the agent acted on (JSON, escaped like provenance).
		fmt.Fprintf(&line, " detail=%s", escapeText(r.Detail))
	}
	if !r.Refused() || r.KID != "" || r.Alg != "" || r.Profile != "" || r.Signature != "" {
		fmt.Fprintf(&line, " kid=%s alg=%s profile=%s signature=%s", escapeValue(r.KID), escapeValue(r.Alg), escapeValue(r.Profile), escapeValue(r.Signature))
	}
	fmt.Fprintf(&line, " prev=%s hash=%s\n", hex.EncodeToString(r.PrevHash), hex.EncodeToString(r.Hash))
	fmt.Fprint(w, line.String())
}

// reportLogCheck prints a mismatch (exit 1, as a broken chain) or a
// failure to check (exit 1 too, on stderr).
func reportLogCheck(e env, err error) int {
	var m *transparency.MismatchError
	switch {
	case errors.As(err, &m) && m.Seq > 0:
		fmt.Fprintf(e.stdout, "transparency log MISMATCH at record %d: %s\n", m.Seq, escapeText(m.Msg))
	case errors.As(err, &m):
		fmt.Fprintf(e.stdout, "transparency log MISMATCH: %s\n", escapeText(m.Msg))
	default:
		fmt.Fprintf(e.stderr, "cardsign audit verify: transparency log: %s\n", escapeText(err.Error()))
	}
	return exitFail
}

// logCheck is the audit-vs-log checker and the log URL it reads, for the
// report.
type logCheck struct {
	*transparency.AuditChecker
	url string
}
