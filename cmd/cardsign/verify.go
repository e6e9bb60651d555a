package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/jwks/jwksfetch"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/webtrust"
)

func verifyCmd() command {
	c := command{
		name:    "verify",
		long:    verifyLong,
		summary: "Verify a signed card (a file, or https://HOST's card with a trust policy) against trusted keys; exit 0 when a signature (with --all: every one) verifies, 1 when not, 2 on bad input.",
		usage: "--jwks FILE|URL [--log-key KEY|FILE|URL [--witness KEY|FILE|URL ... [--witness-quorum K]]] [--ca-file F] [--all] [--profile spec|sdk|python-ascii] [--allow-jku PREFIX] [--max-signatures N] [--clock-skew D] [--timeout D] [--max-time D] FILE|-\n" +
			"       cardsign verify --trust FILE [--ca-file F] [--resolve HOST:PORT:ADDR:TPORT] [--clock-skew D] [--timeout D] [--max-time D] https://HOST",
		example: "  cardsign jwks --key file:signing-key.pem > jwks.json\n  cardsign verify --jwks jwks.json signed.json\n  signature[0] kid=3kP… alg=ES256: valid (spec profile)\n" +
			"  verifies in: spec ✔  @a2a-js/sdk ≥1.3 ✔  a2a-python ≥1.2 ✔  a2a-python ≤1.1 ✘ (no signature over python-ascii bytes)  @a2a-js/sdk resolver ✔\n" +
			"  cardsign verify --jwks jwks.json --allow-jku https://keys.example.com/jwks/ --max-time 10s signed.json\n" +
			"  cardsign verify --jwks http://127.0.0.1:7701/.well-known/jwks.json --log-key http://127.0.0.1:7701/.well-known/cardsign-log-key signed.json\n" +
			"  signature[0] kid=3kP… alg=ES256: valid (spec profile), logged: cardsign.localhost/log leaf 41 of 57\n" +
			"  cardsign verify --jwks jwks.json --log-key log-key.txt --witness witnesses.txt --witness-quorum 2 signed.json\n" +
			"  signature[0] kid=3kP… alg=ES256: valid (spec profile), logged: cardsign.example.com/log leaf 41 of 57, witnessed by w1.example.net, w2.example.org\n" +
			"  cardsign verify --trust trust.yaml https://agents.example.com\n" +
			"  card https://agents.example.com/.well-known/agent-card.json: trust rule *.example.com (line 2): did did:web:example.com",
	}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		o := &verifyOptions{}
		fs.StringVar(&o.src, "jwks", "", "trusted JWKS: a file or an http(s) URL (required)")
		fs.BoolVar(&o.all, "all", false, "require every signature to verify")
		fs.StringVar(&o.profile, "profile", "", "accept only signatures over this canonical profile (spec, sdk or python-ascii); default any")
		fs.Var(&o.allow, "allow-jku", "follow a signature's jku when its normalized URL (dot segments resolved, scheme and host lower-cased, default port dropped) is under this URL prefix, at a path-segment boundary (repeatable); default: jku is ignored")
		fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "timeout for each HTTP fetch (JWKS, jku, revocation document)")
		fs.DurationVar(&o.maxTime, "max-time", 30*time.Second, "bound on the whole verification, fetches included")
		fs.IntVar(&o.maxSigs, "max-signatures", signer.DefaultMaxSignatures, "refuse a card with more signatures than this")
		fs.DurationVar(&o.skew, "clock-skew", signer.DefaultClockSkew, "leeway for a signature's exp and iat (a signature past exp + this is refused)")
		fs.StringVar(&o.revSrc, "revocations", "", "signed revocation document (file or URL); default: "+jwks.RevocationsPath+" on the --jwks URL's host, none for a --jwks file; \"none\" to skip")
		fs.Var(&o.witnesses, "witness", "with --log-key: a witness's verifier key NAME+HASH+BASE64, a file of such keys, or an http(s) URL serving them (repeatable); a signature then counts only when its proof's checkpoint carries cosignatures from --witness-quorum of them")
		fs.IntVar(&o.quorum, "witness-quorum", 0, "with --witness: how many of the witnesses must have cosigned (default: all named)")
		fs.StringVar(&o.logKey, "log-key", "", "the transparency log's key(s): ORIGIN+HASH+BASE64, a file of such keys, or an http(s) URL serving them ("+transparency.KeyPath+"); a signature then counts only with an inclusion proof the log key vouches for")
		o.lim = limitFlags(fs)
		o.web = addWebFlags(fs)
		return o.run
	}
	return c
}

// verifyOptions are verify's flags.
type verifyOptions struct {
	src, profile, revSrc, logKey string
	all                          bool
	allow                        stringsFlag
	witnesses                    stringsFlag
	quorum                       int
	timeout, maxTime, skew       time.Duration
	maxSigs                      int
	lim                          *strictjson.Limits
	web                          *webFlags
}

// run checks the flags, reads the card, verifies it and reports.
func (o *verifyOptions) run(ctx context.Context, in *call) int {
	if len(in.pos) == 1 && isURL(in.pos[0]) {
		return o.runURL(ctx, in)
	}
	p, code, ok := o.check(in)
	if !ok {
		return code
	}
	data, code, ok := in.c.oneInput(in.env, in.pos, o.lim)
	if !ok {
		return code
	}
	// One deadline for the whole run: a card with many signatures, or
	// servers that answer slowly, cannot keep the verifier busy longer.
	ctx, cancel := context.WithTimeout(ctx, o.maxTime)
	defer cancel()
	res, code, ok := o.verify(ctx, in, data, p)
	if !ok {
		return code
	}
	return o.report(in.env, res)
}

// check refuses flag values out of range, and returns the profile asked
// for (zero: any).
func (o *verifyOptions) check(in *call) (p card.Profile, code int, ok bool) {
	switch {
	case o.src == "":
		return p, in.usageError("--jwks is required: verification only trusts keys you name"), false
	case o.skew < 0 || o.skew > time.Hour:
		return p, in.usageError("--clock-skew must be between 0s and 1h, got %s", o.skew), false
	case o.maxSigs <= 0:
		return p, in.usageError("--max-signatures must be positive, got %d", o.maxSigs), false
	case o.timeout <= 0 || o.maxTime <= 0:
		return p, in.usageError("--timeout and --max-time must be positive durations such as 10s"), false
	}
	if _, err := jwks.ParseJKUAllowList(o.allow); err != nil {
		return p, in.usageError("--%v", escapeText(err.Error())), false
	}
	if o.profile != "" {
		var err error
		if p, err = card.ParseProfile(o.profile); err != nil {
			return p, in.usageError("%v", err), false
		}
	}
	return p, 0, true
}

// verify fetches the trusted keys, the revocation document and the log
// keys, and verifies the card with them.
func (o *verifyOptions) verify(ctx context.Context, in *call, data []byte, p card.Profile) (*signer.Verification, int, bool) {
	e, name := in.env, in.c.name
	fail := func(code int, err error) (*signer.Verification, int, bool) {
		msg := err.Error()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			msg += fmt.Sprintf(" (the whole run is bounded by --max-time %s)", o.maxTime)
		}
		fmt.Fprintf(e.stderr, "cardsign %s: %s\n", name, escapeText(msg))
		return nil, code, false
	}
	// The JWKS named on the command line may redirect, but never from
	// https to plain http off this machine; a jku is a hint from the
	// card, so it is fetched from exactly the allowed URL, no redirects
	// (a 3xx could otherwise lead outside the allow-list).
	client, err := fetchClient(o.web.caFile, o.timeout, noDowngrade)
	if err != nil {
		return fail(exitUsage, err)
	}
	jkuClient, err := fetchClient(o.web.caFile, o.timeout, func(*http.Request, []*http.Request) error {
		return errors.New("a jku URL must answer itself; redirects are not followed")
	})
	if err != nil {
		return fail(exitUsage, err)
	}
	trusted, err := jwksfetch.Load(ctx, o.src, client)
	if err != nil {
		return fail(exitUsage, err)
	}
	revoked, revokedCard, err := loadRevocations(ctx, e, o.src, o.revSrc, client, trusted)
	if err != nil {
		return fail(exitUsage, err)
	}
	var logKeys []transparency.Verifier
	if o.logKey != "" {
		if logKeys, err = webtrust.LoadLogKeys(ctx, o.logKey, client); err != nil {
			return fail(exitUsage, fmt.Errorf("--log-key: %w", err))
		}
	}
	var witnesses transparency.WitnessPolicy
	switch {
	case len(o.witnesses) > 0 && o.logKey == "":
		return fail(exitUsage, errors.New("--witness needs --log-key: witnesses vouch for the log's checkpoints, which the log key signs"))
	case len(o.witnesses) == 0 && o.quorum != 0:
		return fail(exitUsage, errors.New("--witness-quorum needs --witness: name the witnesses whose cosignatures count"))
	case len(o.witnesses) > 0:
		if witnesses, err = webtrust.LoadWitnessPolicy(ctx, o.witnesses, o.quorum, client); err != nil {
			return fail(exitUsage, fmt.Errorf("--witness: %w", err))
		}
	}
	res, err := signer.Verify(ctx, data, signer.VerifyOptions{
		Revoked:  revoked,
		Trusted:  trusted,
		AllowJKU: o.allow,
		FetchJKU: func(ctx context.Context, u string) (signer.KeySource, error) {
			return jwksfetch.Load(ctx, u, jkuClient)
		},
		Profile:       p,
		Limits:        *o.lim,
		MaxSignatures: o.maxSigs,
		ClockSkew:     skewOption(o.skew),
		RevokedCard:   revokedCard,
		LogKeys:       logKeys,
		RequireLog:    len(logKeys) > 0,
		Witnesses:     witnesses,
	})
	if err != nil {
		if ctx.Err() != nil {
			return fail(exitFail, err)
		}
		return nil, reportCardError(e, name, err), false
	}
	return res, 0, true
}

// report prints each signature's verdict and where the card verifies, and
// returns the exit code.
func (o *verifyOptions) report(e env, res *signer.Verification) int {
	if len(res.Checks) == 0 {
		fmt.Fprintln(e.stdout, "no signatures: the card is not signed")
		return exitFail
	}
	for _, ch := range res.Checks {
		// kid, alg and reason come from the card (or embed its text):
		// escaped, so that they cannot forge lines or drive a terminal.
		if ch.Valid {
			logged := ""
			switch {
			case ch.Logged != nil:
				logged = fmt.Sprintf(", logged: %s leaf %d of %d", escapeText(ch.Logged.Origin), ch.Logged.Index, ch.Logged.Size)
				if w := ch.Logged.Witnessed; len(w) > 0 {
					names := make([]string, len(w))
					for i, v := range w {
						names[i] = v.Witness
					}
					logged += fmt.Sprintf(", witnessed by %s", escapeText(strings.Join(names, ", ")))
				}
			case ch.HasProof:
				logged = ", carries a log inclusion proof (not checked: give --log-key)"
			}
			mapped := ""
			if ch.Mapping != "" {
				mapped = ", " + ch.Mapping.Describe()
			}
			fmt.Fprintf(e.stdout, "signature[%d] kid=%s alg=%s: valid (%s profile%s)%s\n", ch.Index, orDash(ch.KID), orDash(ch.Alg), ch.Profile, mapped, logged)
		} else {
			fmt.Fprintf(e.stdout, "signature[%d] kid=%s alg=%s: invalid: %s\n", ch.Index, orDash(ch.KID), orDash(ch.Alg), escapeText(ch.Reason))
		}
	}
	// Which shipped verifiers would accept the card: each computes its
	// own bytes, and a signature covers the verifiers whose bytes it
	// signed.
	fmt.Fprintln(e.stdout, escapeText(signer.FormatPortability("verifies in: ", res.Portability())))
	if u := res.Uncovered(); len(u) > 0 && res.Valid(false) {
		fmt.Fprintf(e.stderr, "warning: these keys are outside the v1.0 schema and covered by no verified signature: %s\n", escapeText(strings.Join(u, ", ")))
	}
	if res.CardRevoked != "" {
		fmt.Fprintf(e.stdout, "card revoked: %s\n", escapeText(res.CardRevoked))
		fmt.Fprintln(e.stderr, "verification failed: the card itself is listed in the signed revocation document")
		return exitFail
	}
	if !res.Valid(o.all) {
		switch revoked := revokedOnly(res.Checks); {
		case o.all:
			fmt.Fprintln(e.stderr, "verification failed: not every signature verifies")
		case revoked != "":
			fmt.Fprintf(e.stderr, "verification failed: %s\n", escapeText(revoked))
		default:
			fmt.Fprintln(e.stderr, "verification failed: no signature verifies")
		}
		return exitFail
	}
	return exitOK
}

// loadRevocations fetches and verifies the revocation document that goes
// with a JWKS. A JWKS served over HTTP by cardsignd has one beside it; one
// that is missing (404) is reported and verification goes on, but one that
// fails its signature or has expired stops verification: a stale list could
// hide a revoked key.
func loadRevocations(ctx context.Context, e env, jwksSrc, src string, client *http.Client, trusted jwks.Set) (
	revokedKey func(string) (string, bool), revokedCard func([32]byte) (string, bool), err error) {
	if src == "none" {
		return nil, nil, nil
	}
	if src == "" {
		beside, ok := jwks.RevocationsURLBeside(jwksSrc)
		if !ok {
			return nil, nil, nil
		}
		src = beside
	}
	doc, err := webtrust.ReadRevocations(ctx, src, client, trusted, time.Now(), 0)
	var se *jwksfetch.StatusError
	if errors.As(err, &se) && se.Code == http.StatusNotFound {
		fmt.Fprintf(e.stderr, "note: no revocation document at %s; revoked keys are known only by their absence from the JWKS\n", escapeText(se.URL))
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return jwks.RevokedKeyLookup(doc.Revoked), jwks.CardLookup(doc.Cards), nil
}

// noDowngrade follows at most 5 redirects and none from https to plain
// http on another machine.
func noDowngrade(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" && !card.IsLoopbackHost(req.URL.Hostname()) {
		return fmt.Errorf("refusing redirect from https to %s", req.URL.Redacted())
	}
	return nil
}

// revokedOnly says why a card failed when every signature it carries is
// by a revoked key (the revocation, not the card, is the news), and is
// empty otherwise.
func revokedOnly(checks []signer.Check) string {
	var why []string
	for _, ch := range checks {
		if !ch.Revoked {
			return ""
		}
		why = append(why, ch.RevokedReason())
	}
	return strings.Join(slices.Compact(why), "; ")
}

// orDash prints a header value from the card: "-" when absent, else as
// escapeValue does (plain kids and algs bare, anything else quoted).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return escapeValue(s)
}

// skewOption turns --clock-skew into VerifyOptions.ClockSkew, where 0 means
// the default and a negative value none.
func skewOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
