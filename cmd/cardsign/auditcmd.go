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
	"net/http"
	"strings"
	"time"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/tlogclient"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"
)

func auditCmd() command {
	c := command{
		name:    "audit",
		summary: "List cardsignd's audit records, or verify the hash chain that links them against a published head.",
		usage:   "list [--after SEQ] [--limit N] [--json] | verify [--jwks FILE|URL [--revocations FILE|URL] | --head SEQ:HASH] [--log URL --log-key KEY]   (both take --server ADDR)",
		example: "  cardsign audit list --after 100 --limit 20 --server 127.0.0.1:7700\n" +
			"  cardsign audit verify --jwks http://127.0.0.1:7701/.well-known/jwks.json\n" +
			"  audit chain intact: 7 records, head 5be1…\n" +
			"  checked against the published head record 7 (hash 5be1…) from http://127.0.0.1:7701/.well-known/cardsign-revocations.json (…): the log holds it\n" +
			"  cardsign audit verify --jwks jwks.json --revocations saved-revocations.json\n" +
			"  cardsign audit verify --head 7:5be1…\n" +
			"  cardsign audit verify --jwks http://127.0.0.1:7701/.well-known/jwks.json --log http://127.0.0.1:7701/log/ --log-key http://127.0.0.1:7701/.well-known/cardsign-log-key\n" +
			"  transparency log consistent with the audit records: 7 leaves, root 36nc…",
	}
	c.run = func(ctx context.Context, e env, args []string) int {
		if code, done := c.subcommandHelp(e, args); done {
			return code
		}
		sub := args[0]
		fs := flag.NewFlagSet(c.name+" "+sub, flag.ContinueOnError)
		conn := addConnFlags(fs)
		timeout := fs.Duration("timeout", 60*time.Second, "deadline of each call")
		after := fs.Int64("after", 0, "list: records with a sequence number above this")
		limit := fs.Int("limit", 0, "list: at most this many records (default all)")
		asJSON := fs.Bool("json", false, "list: one JSON object per line")
		var hs headSource
		fs.StringVar(&hs.jwks, "jwks", "", "verify: trusted JWKS (file or http(s) URL) to check the signed revocation document, whose audit_head the log must hold; default: no head, and a truncated tail goes unnoticed")
		fs.StringVar(&hs.revocations, "revocations", "", "verify: the signed revocation document (file or URL), a fresh one or a copy kept from before; default: "+jwks.RevocationsPath+" on the --jwks URL's host")
		fs.StringVar(&hs.head, "head", "", "verify: a head to check against, SEQ:HASH (hash in hex), instead of a revocation document")
		logURL := fs.String("log", "", "verify: the transparency log's URL prefix (cardsignd: "+transparency.PathPrefix+"); every record is then checked against its log entry, and the tree rebuilt from the entries against the log's signed checkpoint")
		logKey := fs.String("log-key", "", "verify, with --log: the log's verifier key(s): ORIGIN+HASH+BASE64, a file of such keys, or an http(s) URL serving them ("+transparency.KeyPath+")")
		pos, code, done := c.parse(e, fs, args[1:])
		if done {
			return code
		}
		if sub != "list" && sub != "verify" {
			return c.usageError(e, "unknown subcommand %q", sub)
		}
		if len(pos) > 0 {
			return c.usageError(e, "unexpected argument %q", pos[0])
		}
		if sub == "list" && (hs.jwks != "" || hs.revocations != "" || hs.head != "" || *logURL != "" || *logKey != "") {
			return c.usageError(e, "--jwks, --revocations, --head, --log and --log-key are for audit verify")
		}
		if (*logURL == "") != (*logKey == "") {
			return c.usageError(e, "--log and --log-key go together: the log is checked only against keys you name")
		}
		// The head is read before the log: records appended meanwhile only
		// extend the log past it, while a head read after the walk could be
		// past the records seen and look like a truncation.
		var published *publishedHead
		var noHead string // why there is no head to check against
		if sub == "verify" {
			hctx, cancel := context.WithTimeout(ctx, *timeout)
			var err error
			published, err = hs.load(hctx, &http.Client{Timeout: *timeout, CheckRedirect: noDowngrade}, time.Now())
			cancel()
			var up *usageProblem
			switch {
			case errors.As(err, &up):
				return c.usageError(e, "%s", up.msg)
			case errors.Is(err, errNoHeadSource):
				noHead = "give --jwks URL to check against the audit head in cardsignd's signed revocation document, or --head SEQ:HASH"
				if err != errNoHeadSource { // wrapped: it says why
					noHead = err.Error()
				}
			case err != nil:
				fmt.Fprintf(e.stderr, "cardsign audit verify: published head: %s\n", escapeText(err.Error()))
				return exitUsage
			}
		}
		// The log's checkpoint too is read before the records, for the
		// same reason: records appended meanwhile are past it, not missing.
		var lc *logChecker
		if *logURL != "" {
			hctx, cancel := context.WithTimeout(ctx, *timeout)
			hc := &http.Client{Timeout: *timeout, CheckRedirect: noDowngrade}
			keys, err := loadLogKeys(hctx, *logKey, hc)
			if err != nil {
				cancel()
				return c.usageError(e, "--log-key: %s", escapeText(err.Error()))
			}
			tc := &tlogclient.Client{URL: *logURL, HTTP: hc, Keys: keys}
			cp, err := tc.Checkpoint(hctx)
			cancel()
			if err != nil {
				fmt.Fprintf(e.stderr, "cardsign audit verify: transparency log: %s\n", escapeText(err.Error()))
				return exitFail
			}
			lc = newLogChecker(tc, cp, *timeout)
		}
		cl, err := dial(e, conn, *timeout)
		if err != nil {
			fmt.Fprintf(e.stderr, "cardsign %s: %v\n", c.name, err)
			return exitUsage
		}
		defer cl.close()
		if sub == "list" {
			// Lines go out page by page as they arrive: nothing but the
			// page being printed is held.
			out := bufio.NewWriterSize(e.stdout, 64<<10)
			for r, err := range auditRecords(ctx, cl, *after, *limit) {
				if err != nil {
					out.Flush()
					fmt.Fprintf(e.stderr, "cardsign audit %s: %s\n", sub, describe(err))
					return exitFail
				}
				printRecord(out, r, *asJSON)
			}
			if err := out.Flush(); err != nil {
				fmt.Fprintf(e.stderr, "cardsign audit %s: %v\n", sub, err)
				return exitFail
			}
			return exitOK
		}
		// verify: the whole log from seq 1, checked record by record as
		// the pages arrive; the verifier keeps only the previous hash and,
		// for the published head, the hash of the record at its seq.
		var head *audit.Head
		if published != nil {
			head = &published.head
		}
		v := audit.NewChainVerifier(audit.Genesis(), head)
		var trail store.KeyTrail // the key administration records, to check the keys against
		for r, err := range auditRecords(ctx, cl, 0, 0) {
			if err != nil {
				fmt.Fprintf(e.stderr, "cardsign audit %s: %s\n", sub, describe(err))
				return exitFail
			}
			if err := v.Add(r); err != nil {
				var ce *audit.ChainError
				if errors.As(err, &ce) {
					fmt.Fprintf(e.stdout, "audit chain BROKEN at record %d: %s\n", ce.Seq, escapeText(ce.Reason))
				} else {
					fmt.Fprintf(e.stdout, "audit chain BROKEN: %s\n", escapeText(err.Error()))
				}
				return exitFail
			}
			if err := trail.Add(r); err != nil {
				fmt.Fprintf(e.stdout, "audit chain BROKEN: %v\n", err)
				return exitFail
			}
			if lc != nil {
				if err := lc.add(ctx, r); err != nil {
					return lc.report(e, err)
				}
			}
		}
		if err := v.Finish(); err != nil {
			fmt.Fprintf(e.stdout, "%s\nhead published by %s\nthe log was edited outside cardsignd: restore the database from a backup and find out who could write to it\n", escapeText(err.Error()), escapeText(published.from))
			return exitFail
		}
		count := v.Count()
		var keysReport bytes.Buffer // printed after the chain's line
		var revocations *jwks.Revocations
		if published != nil {
			revocations = published.doc
		}
		keysOK, err := checkKeyTrail(ctx, &keysReport, cl, v, &trail, revocations)
		if err != nil {
			fmt.Fprintf(e.stderr, "cardsign audit %s: %s\n", sub, escapeText(err.Error()))
			return exitFail
		}
		_, lastHash := v.Last()
		if lc != nil {
			if err := lc.finish(count); err != nil {
				return lc.report(e, err)
			}
		}
		fmt.Fprintf(e.stdout, "audit chain intact: %d records, head %s\n", v.Count(), hex.EncodeToString(lastHash))
		e.stdout.Write(keysReport.Bytes())
		if lc != nil {
			fmt.Fprintf(e.stdout, "transparency log consistent with the audit records: %d leaves, root %s (checkpoint of %s from %s)\n",
				lc.cp.Size, lc.cp.Root, escapeText(lc.cp.Origin), lc.c.URL)
			if v.Count() > lc.cp.Size {
				fmt.Fprintf(e.stdout, "note: records %d to %d came after the log's checkpoint and are not checked against the log yet\n", lc.cp.Size+1, v.Count())
			}
		}
		if noHead != "" {
			fmt.Fprintf(e.stdout, "note: no published head to check against: truncation of the tail cannot be detected (%s)\n", escapeText(noHead))
		}
		if published != nil {
			for _, n := range published.note {
				fmt.Fprintf(e.stdout, "note: %s\n", escapeText(n))
			}
			if published.head.Seq == 0 {
				// Every log extends the empty one: a head of record 0 (a
				// document signed before the first record) checks nothing,
				// and saying "the log holds it" would pass off no check as
				// one.
				fmt.Fprintf(e.stdout, "note: nothing to check against: the published head from %s is record 0, the empty log (signed before the first record); truncation of the tail cannot be detected: check against a later document or --head SEQ:HASH\n",
					escapeText(published.from))
			} else {
				fmt.Fprintf(e.stdout, "checked against the published head record %d (hash %s) from %s: the log holds it\n",
					published.head.Seq, hex.EncodeToString(published.head.Hash), escapeText(published.from))
			}
		}
		if !keysOK {
			return exitFail
		}
		return exitOK
	}
	return c
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

// logChecker checks the transparency log against the audit records as
// audit verify walks them: record seq's entry (leaf seq-1) must be exactly
// transparency.NewEntry of the record (with the hosts the entry lists: the
// hash chain does not cover them); the tree rebuilt from the entries must
// have the root the log's checkpoint signs; and every hash the log serves
// in its tiles must be the one the rebuilt tree has there. The tree is a
// compact range (a hash per level), fed the leaf hashes in order, whose
// visitor sees every complete subtree's hash, and so every hash a tile
// holds. The checker holds one entry bundle and one hash tile per level:
// constant memory, whatever the size of the log.
type logChecker struct {
	c       *tlogclient.Client
	cp      transparency.Checkpoint
	timeout time.Duration

	bundleN int64 // the bundle held, -1 for none
	bundle  [][]byte
	tiles   [64 / transparency.TileHeight]heldTile // by tile level
	rng     *compact.Range
	leaves  int64 // entries checked and added to rng
	err     error // the first failure the range's visitor met
}

type heldTile struct {
	t    tlog.Tile
	data []byte // nil: none held
}

// logMismatch is a difference between the log and the audit records: the
// answer is no (exit 1), as a broken chain.
type logMismatch struct {
	seq int64 // the record, 0 when the difference is not one record's
	msg string
}

func (m *logMismatch) Error() string { return m.msg }

func newLogChecker(c *tlogclient.Client, cp transparency.Checkpoint, timeout time.Duration) *logChecker {
	f := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	return &logChecker{c: c, cp: cp, timeout: timeout, bundleN: -1, rng: f.NewEmptyRange(0)}
}

// add checks record r, the next of the walk (the chain verifier has
// checked its seq follows the previous one).
func (lc *logChecker) add(ctx context.Context, r audit.Record) error {
	leaf := r.Seq - 1
	if leaf >= lc.cp.Size {
		return nil // appended after the checkpoint
	}
	if leaf != lc.leaves {
		return &logMismatch{seq: r.Seq, msg: fmt.Sprintf("record %d comes after %d records checked against the log", r.Seq, lc.leaves)}
	}
	if n := leaf / transparency.TileWidth; n != lc.bundleN {
		t := transparency.TileFor(transparency.EntriesLevel, n, lc.cp.Size)
		cctx, cancel := context.WithTimeout(ctx, lc.timeout)
		entries, err := lc.c.EntryBundle(cctx, t)
		cancel()
		if err != nil {
			return err
		}
		lc.bundleN, lc.bundle = n, entries
	}
	got := lc.bundle[leaf%transparency.TileWidth]
	e, err := transparency.ParseEntry(got)
	if err != nil {
		return &logMismatch{seq: r.Seq, msg: fmt.Sprintf("its log entry (leaf %d) is not a valid entry: %v", leaf, err)}
	}
	if e.Sealed() {
		// A private agent's entry: its caller, card name and hosts are
		// commitments the auditor cannot open (its owner can, with the
		// agent's salt); every other member is checked.
		r.Sealed = &audit.Sealed{Caller: e.Caller, CardName: e.Card.Name}
	}
	want := transparency.NewEntry(r, e.Card.Hosts)
	if !bytes.Equal(want.Marshal(), got) {
		return &logMismatch{seq: r.Seq, msg: fmt.Sprintf("its log entry (leaf %d) differs from the record: %s", leaf, entryDiff(want, e))}
	}
	h := transparency.LeafHash(got)
	// The visitor sees the leaf and every subtree it completes; those at
	// tile levels are checked against the log's tiles.
	if err := lc.rng.Append(h[:], func(id compact.NodeID, hash []byte) {
		if lc.err == nil && id.Level%transparency.TileHeight == 0 {
			lc.err = lc.checkTileHash(ctx, r.Seq, int(id.Level)/transparency.TileHeight, int64(id.Index), hash)
		}
	}); err != nil {
		return err
	}
	if lc.err != nil {
		return lc.err
	}
	lc.leaves++
	return nil
}

// checkTileHash checks that the log's hash tile of level k holds hash at
// index i of its level (tree level 8k), fetching the tile when it is not
// the one held.
func (lc *logChecker) checkTileHash(ctx context.Context, seq int64, k int, i int64, hash []byte) error {
	held := &lc.tiles[k]
	if n := i / transparency.TileWidth; held.data == nil || held.t.N != n {
		t := transparency.TileFor(k, n, lc.cp.Size)
		cctx, cancel := context.WithTimeout(ctx, lc.timeout)
		data, err := lc.c.TileReader(cctx).ReadTiles([]tlog.Tile{t})
		cancel()
		if err != nil {
			return err
		}
		held.t, held.data = t, data[0]
	}
	at := (i % transparency.TileWidth) * tlog.HashSize
	if served := held.data[at : at+tlog.HashSize]; !bytes.Equal(served, hash) {
		what := fmt.Sprintf("the hash of leaf %d", i)
		if k > 0 {
			what = fmt.Sprintf("the hash of leaves %d to %d", i<<(k*transparency.TileHeight), (i+1)<<(k*transparency.TileHeight)-1)
		}
		return &logMismatch{seq: seq, msg: fmt.Sprintf("the log's tile %s serves %s as %s, but the entries hash to %s: a stored tree hash (or an entry's hosts) was changed",
			transparency.TilePath(held.t), what, tlog.Hash(served), tlog.Hash(hash))}
	}
	return nil
}

// finish checks, after records were walked, that they covered the
// checkpoint and that the entries hash to its root.
func (lc *logChecker) finish(records int64) error {
	if lc.leaves < lc.cp.Size {
		return &logMismatch{msg: fmt.Sprintf("the log's checkpoint covers %d leaves but the audit log has %d records: records were removed, or the log holds leaves no record explains", lc.cp.Size, records)}
	}
	if lc.cp.Size == 0 {
		// An empty tree's root is tlog's zero hash or RFC 6962's hash of
		// nothing; anything else is a checkpoint of some other tree.
		if lc.cp.Root == (tlog.Hash{}) || lc.cp.Root == tlog.Hash(rfc6962.DefaultHasher.EmptyRoot()) {
			return nil
		}
		return &logMismatch{msg: fmt.Sprintf("the log's signed checkpoint of 0 leaves has root %s, not the empty tree's", lc.cp.Root)}
	}
	b, err := lc.rng.GetRootHash(nil)
	if err != nil {
		return err
	}
	root := tlog.Hash(b)
	if root != lc.cp.Root {
		return &logMismatch{msg: fmt.Sprintf("the log's entries for records 1 to %d hash to root %s, but its signed checkpoint of %d leaves says %s: "+
			"a stored tree hash was changed, or the checkpoint was signed over other entries", lc.cp.Size, root, lc.cp.Size, lc.cp.Root)}
	}
	return nil
}

// report prints a mismatch (exit 1, as a broken chain) or a failure to
// check (exit 1 too, on stderr).
func (lc *logChecker) report(e env, err error) int {
	var m *logMismatch
	switch {
	case errors.As(err, &m) && m.seq > 0:
		fmt.Fprintf(e.stdout, "transparency log MISMATCH at record %d: %s\n", m.seq, escapeText(m.msg))
	case errors.As(err, &m):
		fmt.Fprintf(e.stdout, "transparency log MISMATCH: %s\n", escapeText(m.msg))
	default:
		fmt.Fprintf(e.stderr, "cardsign audit verify: transparency log: %s\n", escapeText(err.Error()))
	}
	return exitFail
}

// entryDiff names the members in which the entry the record makes (want)
// and the log's (got) differ.
func entryDiff(want, got transparency.Entry) string {
	var diffs []string
	cmp := func(name string, w, g any) {
		if fmt.Sprint(w) != fmt.Sprint(g) {
			diffs = append(diffs, fmt.Sprintf("%s %q in the log, %q in the record", name, fmt.Sprint(g), fmt.Sprint(w)))
		}
	}
	cmp("v", want.V, got.V)
	cmp("seq", want.Seq, got.Seq)
	cmp("time", want.Time, got.Time)
	cmp("outcome", want.Outcome, got.Outcome)
	cmp("caller", want.Caller, got.Caller)
	cmp("card name", want.Card.Name, got.Card.Name)
	cmp("card version", want.Card.Version, got.Card.Version)
	cmp("card sha256", want.Card.SHA256, got.Card.SHA256)
	cmp("kid", want.KID, got.KID)
	cmp("alg", want.Alg, got.Alg)
	cmp("profile", want.Profile, got.Profile)
	cmp("signature", want.Signature, got.Signature)
	cmp("record hash", want.Record, got.Record)
	if len(diffs) == 0 {
		return "the bytes differ"
	}
	return strings.Join(diffs, "; ")
}
