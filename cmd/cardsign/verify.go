package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
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
		revSrc := fs.String("revocations", "", "signed revocation document (file or URL); default: "+jwks.RevocationsPath+" on the --jwks URL's host, none for a --jwks file; \"none\" to skip")
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
		revoked, err := loadRevocations(ctx, e, *src, *revSrc, client, trusted)
		if err != nil {
			fmt.Fprintf(e.stderr, "cardsign %s: %v\n", c.name, err)
			return exitUsage
		}
		res, err := signer.Verify(ctx, data, signer.VerifyOptions{
			Revoked:  revoked,
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

// loadRevocations fetches and verifies the revocation document that goes
// with a JWKS. A JWKS served over HTTP by cardsignd has one beside it; one
// that is missing (404) is reported and verification goes on, but one that
// fails its signature or has expired stops verification: a stale list could
// hide a revoked key.
func loadRevocations(ctx context.Context, e env, jwksSrc, src string, client *http.Client, trusted jwks.Set) (func(string) (string, bool), error) {
	if src == "none" {
		return nil, nil
	}
	if src == "" {
		u, err := url.Parse(jwksSrc)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, nil
		}
		src = u.Scheme + "://" + u.Host + jwks.RevocationsPath
	}
	var data []byte
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return nil, fmt.Errorf("revocations: %w", err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("revocations: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			fmt.Fprintf(e.stderr, "note: no revocation document at %s; revoked keys are known only by their absence from the JWKS\n", src)
			return nil, nil
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("revocations: %s answered %s", src, resp.Status)
		}
		if data, err = io.ReadAll(io.LimitReader(resp.Body, jwks.MaxSize)); err != nil {
			return nil, fmt.Errorf("revocations: %w", err)
		}
	} else {
		var err error
		if data, err = os.ReadFile(src); err != nil {
			return nil, fmt.Errorf("revocations: %w", err)
		}
	}
	doc, err := jwks.VerifyRevocations(data, trusted, time.Now())
	if err != nil {
		return nil, fmt.Errorf("revocation document %s: %w", src, err)
	}
	byKID := map[string]jwks.Revocation{}
	for _, r := range doc.Revoked {
		byKID[r.KID] = r
	}
	return func(kid string) (string, bool) {
		r, ok := byKID[kid]
		if !ok {
			return "", false
		}
		return r.String(), true
	}, nil
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
