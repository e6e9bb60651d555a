package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
)

func verifyCmd() command {
	c := command{
		name:    "verify",
		summary: "Verify a signed card against a trusted JWKS; exit 0 when a signature (with --all: every one) verifies, 1 when not, 2 on bad input.",
		usage:   "--jwks FILE|URL [--all] [--profile spec|sdk] [--allow-jku PREFIX] FILE|-",
		example: "  cardsign jwks --key file:signing-key.pem > jwks.json\n  cardsign verify --jwks jwks.json signed.json\n  signature[0] kid=3kP… alg=ES256: valid (spec profile)",
	}
	c.run = func(ctx context.Context, e env, args []string) int {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		src := fs.String("jwks", "", "trusted JWKS: a file or an http(s) URL (required)")
		all := fs.Bool("all", false, "require every signature to verify")
		profile := fs.String("profile", "", "accept only signatures over this canonical profile (spec or sdk); default either")
		var allow stringsFlag
		fs.Var(&allow, "allow-jku", "follow a signature's jku when it starts with this URL prefix (repeatable); default: jku is ignored")
		timeout := fs.Duration("timeout", 10*time.Second, "timeout for fetching a JWKS over HTTP")
		lim := limitFlags(fs)
		pos, code, done := c.parse(e, fs, args)
		if done {
			return code
		}
		if *src == "" {
			return c.usageError(e, "--jwks is required: verification only trusts keys you name")
		}
		var p card.Profile
		if *profile != "" {
			var err error
			if p, err = card.ParseProfile(*profile); err != nil {
				return c.usageError(e, "%v", err)
			}
		}
		data, code, ok := c.oneInput(e, pos, lim)
		if !ok {
			return code
		}
		// The JWKS named on the command line may redirect, but never from
		// https to plain http off this machine; a jku is a hint from the
		// card, so it is fetched from exactly the allowed URL, no redirects.
		client := &http.Client{Timeout: *timeout, CheckRedirect: noDowngrade}
		jkuClient := &http.Client{Timeout: *timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("a jku URL must answer itself; redirects are not followed")
		}}
		trusted, err := jwks.Load(ctx, *src, client)
		if err != nil {
			fmt.Fprintf(e.stderr, "cardsign %s: %v\n", c.name, err)
			return exitUsage
		}
		res, err := signer.Verify(ctx, data, signer.VerifyOptions{
			Trusted:  trusted,
			AllowJKU: allow,
			FetchJKU: func(ctx context.Context, u string) (signer.KeySource, error) {
				return jwks.Load(ctx, u, jkuClient)
			},
			Profile: p,
			Limits:  *lim,
		})
		if err != nil {
			return reportCardError(e, c.name, err)
		}
		if len(res.Checks) == 0 {
			fmt.Fprintln(e.stdout, "no signatures: the card is not signed")
			return exitFail
		}
		for _, ch := range res.Checks {
			if ch.Valid {
				fmt.Fprintf(e.stdout, "signature[%d] kid=%s alg=%s: valid (%s profile)\n", ch.Index, orDash(ch.KID), orDash(ch.Alg), ch.Profile)
			} else {
				fmt.Fprintf(e.stdout, "signature[%d] kid=%s alg=%s: invalid: %s\n", ch.Index, orDash(ch.KID), orDash(ch.Alg), ch.Reason)
			}
		}
		if u := res.Uncovered(); len(u) > 0 && res.Valid(false) {
			fmt.Fprintf(e.stderr, "warning: these keys are outside the v1.0 schema and covered by no verified signature: %s\n", strings.Join(u, ", "))
		}
		if !res.Valid(*all) {
			if *all {
				fmt.Fprintln(e.stderr, "verification failed: not every signature verifies")
			} else {
				fmt.Fprintln(e.stderr, "verification failed: no signature verifies")
			}
			return exitFail
		}
		return exitOK
	}
	return c
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
