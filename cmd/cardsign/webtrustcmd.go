package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/webtrust"
)

// webFlags are the flags of the commands that verify from a URL: how to
// fetch (webtrust's safe fetching) and whom to trust.
type webFlags struct {
	caFile, trust string
	resolve       stringsFlag
	// now is the verification instant (nil: the clock's).
	now func() time.Time
}

func addWebFlags(fs *flag.FlagSet) *webFlags {
	w := &webFlags{}
	fs.StringVar(&w.caFile, "ca-file", "", "PEM certificates trusted as roots in addition to the system's, for every https fetch (default $"+caFileEnv+")")
	fs.Var(&w.resolve, "resolve", "HOST:PORT:ADDR:TPORT: connect to ADDR:TPORT for HOST:PORT (TLS still checks HOST's certificate); the operator's explicit choice, so ADDR may be a loopback or private address, which safe fetching otherwise refuses (repeatable)")
	fs.StringVar(&w.trust, "trust", "", "trust policy file (YAML): per host pattern, which JWKS or did:web to trust, the revocation document and its freshness, the log key")
	return w
}

// client makes the webtrust client of the flags.
func (w *webFlags) client(timeout, skew time.Duration) (*webtrust.Client, error) {
	roots, err := httpsRoots(w.caFile)
	if err != nil {
		return nil, err
	}
	opts := webtrust.Options{RootCAs: roots, Resolve: w.resolve, Timeout: timeout, ClockSkew: skew, Now: w.now}
	if w.trust != "" {
		p, err := webtrust.LoadPolicy(w.trust)
		if err != nil {
			return nil, err
		}
		opts.Policy = p
	}
	return webtrust.New(opts)
}

func catalogCmd() command {
	c := command{
		name:    "catalog",
		summary: "Verify an AI Catalog from its URL or a file: the catalog signature and every entry's Trust Manifest (did-web-v1); exit 0 all accepted, 1 any refusal, 2 on bad input.",
		usage:   "verify [--ca-file F] [--resolve HOST:PORT:ADDR:TPORT] [--trust FILE] [--state FILE] [--timeout D] [--max-time D] [--clock-skew D] [--at TIME] URL|FILE",
		example: "  cardsign catalog verify https://example.com/.well-known/ai-catalog.json\n" +
			"  catalog https://example.com/.well-known/ai-catalog.json: accepted (signer did:web:example.com, issued 2026-11-28T10:00:00Z, expires 2026-11-29T10:00:00Z)\n" +
			"  entry[0] urn:air:example.com:a2a:billing: accepted (signer did:web:example.com, issued 2026-11-28T10:00:00Z, expires 2026-11-29T10:00:00Z)\n" +
			"  entry[1] urn:air:example.com:a2a:support: refused: artifact-digest-mismatch: …\n" +
			"  cardsign catalog verify --state ~/.cardsign/catalog-state.json --trust trust.yaml https://example.com/.well-known/ai-catalog.json",
	}
	c.subcommands = true
	c.subs = []subcommand{
		{"verify", "verify an AI Catalog from its URL or a file: the catalog signature and every entry's Trust Manifest"},
	}
	c.flags = func(fs *flag.FlagSet, sub string) runFunc {
		if sub != "verify" {
			return nil
		}
		o := &catalogVerify{web: addWebFlags(fs)}
		fs.StringVar(&o.state, "state", "", "remember the newest release accepted per identifier in this file (0600) and refuse an older one (reason rollback)")
		fs.DurationVar(&o.timeout, "timeout", webtrust.DefaultTimeout, "timeout of each fetch (catalog, DID documents, artifacts)")
		fs.DurationVar(&o.maxTime, "max-time", 2*time.Minute, "bound on the whole verification, fetches included")
		fs.DurationVar(&o.skew, "clock-skew", time.Minute, "leeway on issuedAt and expiresAt")
		fs.StringVar(&o.at, "at", "", "verify as of this instant (RFC 3339, e.g. 2026-12-01T00:00:00Z) instead of now: what a kept copy was worth then, or will be")
		return o.run
	}
	return c
}

// catalogVerify is catalog verify's flags.
type catalogVerify struct {
	web                    *webFlags
	state, at              string
	timeout, maxTime, skew time.Duration
}

func (o *catalogVerify) run(ctx context.Context, in *call) int {
	switch {
	case len(in.pos) != 1:
		return in.usageError("want exactly one catalog URL or file, got %d arguments", len(in.pos))
	case o.timeout <= 0 || o.maxTime <= 0:
		return in.usageError("--timeout and --max-time must be positive durations such as 10s")
	case o.skew < 0 || o.skew > time.Hour:
		return in.usageError("--clock-skew must be between 0s and 1h, got %s", o.skew)
	}
	if o.at != "" {
		at, err := time.Parse(time.RFC3339, o.at)
		if err != nil {
			return in.usageError("--at %s is not an RFC 3339 instant such as 2026-12-01T00:00:00Z", escapeValue(o.at))
		}
		o.web.now = func() time.Time { return at }
	}
	fail := func(err error) int {
		fmt.Fprintf(in.stderr, "cardsign catalog verify: %s\n", escapeText(err.Error()))
		return exitUsage
	}
	cl, err := o.web.client(o.timeout, o.skew)
	if err != nil {
		return fail(err)
	}
	var state *webtrust.State
	if o.state != "" {
		if state, err = webtrust.LoadState(o.state); err != nil {
			return fail(err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.maxTime)
	defer cancel()
	src := in.pos[0]
	var rep *webtrust.CatalogReport
	if isURL(src) {
		rep, err = cl.VerifyCatalog(ctx, src)
	} else {
		var data []byte
		if data, err = readInput(in.env, src, webtrust.DefaultMaxCatalog+1); err == nil {
			if len(data) > webtrust.DefaultMaxCatalog {
				err = fmt.Errorf("%s: over %d bytes", src, webtrust.DefaultMaxCatalog)
			} else {
				rep, err = cl.VerifyCatalogDocument(ctx, data, "")
			}
		}
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (the whole run is bounded by --max-time %s)", err, o.maxTime)
		}
		return fail(err)
	}
	if state != nil {
		state.Apply(rep)
		if err := state.Save(); err != nil {
			return fail(err)
		}
	}
	return printCatalogReport(in.env, src, rep)
}

// printCatalogReport prints the catalog's line and one line per entry, and
// returns the exit code. Identifiers, signers and details come from the
// document: escaped.
func printCatalogReport(e env, src string, rep *webtrust.CatalogReport) int {
	fmt.Fprintf(e.stdout, "catalog %s: %s\n", escapeValue(src), verdict(rep.Catalog))
	for _, en := range rep.Entries {
		fmt.Fprintf(e.stdout, "entry[%d] %s: %s\n", en.Index, orDash(en.Identifier), verdict(en.Result))
	}
	if !rep.OK() {
		return exitFail
	}
	return exitOK
}

// verdict is "accepted (signer S, issued T, expires T)" or "refused: CODE:
// detail; CODE: detail".
func verdict(r aicatalog.Result) string {
	if r.Accepted {
		return fmt.Sprintf("accepted (signer %s, issued %s, expires %s)", escapeValue(r.Signer), stamp(r.IssuedAt), stamp(r.ExpiresAt))
	}
	return "refused: " + reasons(r.Reasons)
}

func reasons(rs []aicatalog.Reason) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, escapeText(r.Code+": "+r.Detail))
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, "; ")
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// runURL is verify with an https://HOST argument: the card at
// https://HOST/.well-known/agent-card.json, verified against the trust
// policy's rule for HOST.
func (o *verifyOptions) runURL(ctx context.Context, in *call) int {
	switch {
	case o.web.trust == "":
		return in.usageError("verify https://HOST needs --trust FILE: the trust policy says which keys HOST's card may be signed with")
	case o.src != "" || o.revSrc != "" || o.logKey != "" || len(o.allow) > 0 || o.profile != "":
		return in.usageError("--jwks, --revocations, --log-key, --allow-jku and --profile are for a card file; for https://HOST the trust policy names the keys, the revocation document and the log key")
	case o.timeout <= 0 || o.maxTime <= 0:
		return in.usageError("--timeout and --max-time must be positive durations such as 10s")
	}
	fail := func(err error) int {
		fmt.Fprintf(in.stderr, "cardsign verify: %s\n", escapeText(err.Error()))
		return exitUsage
	}
	cl, err := o.web.client(o.timeout, skewOption(o.skew))
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.maxTime)
	defer cancel()
	res, err := cl.VerifyCard(ctx, in.pos[0])
	if err != nil {
		return fail(err)
	}
	if r := res.Rule; r != nil {
		anchor := "jwks " + r.JWKS
		if r.DID != "" {
			anchor = "did " + r.DID
		}
		fmt.Fprintf(in.stdout, "card %s: trust rule %s (line %d): %s\n", escapeValue(res.URL), escapeValue(r.Host), r.Line, escapeText(anchor))
	}
	code := exitOK
	if res.Verification != nil {
		code = o.report(in.env, res.Verification)
	}
	if !res.Accepted() {
		fmt.Fprintf(in.stdout, "refused: %s\n", reasons(res.Reasons))
		return exitFail
	}
	return code
}

// isURL reports whether a FILE|URL argument is an http(s) URL (plain http
// is then refused with a reason, not read as a file name).
func isURL(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://")
}
