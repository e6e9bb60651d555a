package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/strictjson"
)

// limitFlags registers the parser caps every card-reading command takes.
func limitFlags(fs *flag.FlagSet) *strictjson.Limits {
	l := &strictjson.Limits{}
	fs.IntVar(&l.MaxBytes, "max-bytes", strictjson.DefaultMaxBytes, "refuse cards larger than this many bytes")
	fs.IntVar(&l.MaxDepth, "max-depth", strictjson.DefaultMaxDepth, "refuse cards nested deeper than this")
	fs.IntVar(&l.MaxValues, "max-values", card.DefaultMaxValues, "refuse cards of more JSON values than this (objects, arrays, strings, numbers, booleans, nulls)")
	return l
}

// reportCardError prints a card that cannot be read and returns the exit
// code. Errors quote card content; escapeText keeps it from reaching the
// terminal as control characters.
func reportCardError(e env, name string, err error) int {
	var ce *strictjson.Error
	if errors.As(err, &ce) {
		fmt.Fprintf(e.stderr, "cardsign %s: invalid card: %s\n", name, escapeText(err.Error()))
		return exitUsage
	}
	fmt.Fprintf(e.stderr, "cardsign %s: %s\n", name, escapeText(err.Error()))
	return exitFail
}

func printNotes(e env, name string, l *card.Loaded) {
	if l.Shape == card.V03 {
		fmt.Fprintf(e.stderr, "cardsign %s: mapped a v0.3 card to the v1.0 shape:\n", name)
		for _, n := range l.Notes {
			fmt.Fprintf(e.stderr, "  %s\n", escapeText(n.String()))
		}
	}
	for _, p := range l.Stripped {
		fmt.Fprintf(e.stderr, "cardsign %s: removed %s (not in the v1.0 schema)\n", name, escapeText(p))
	}
}

func canonicalizeCmd() command {
	c := command{
		name:    "canonicalize",
		long:    canonicalizeLong,
		summary: "Print the canonical bytes a signature covers (A2A §8.4.1, RFC 8785), without a trailing newline.",
		usage:   "[--profile spec|sdk|python-ascii] FILE|-",
		example: "  cardsign canonicalize agent-card.json | sha256sum\n  cardsign canonicalize --profile sdk - < agent-card.json",
	}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		profile := fs.String("profile", "spec", "canonical profile: spec (A2A §8.4.1 to the letter), sdk (what @a2a-js/sdk and a2a-python ≥ 1.2 compute) or python-ascii (what a2a-python ≤ 1.1 computes)")
		lim := limitFlags(fs)
		return func(_ context.Context, in *call) int {
			e := in.env
			p, err := card.ParseProfile(*profile)
			if err != nil {
				return c.usageError(e, "%v", err)
			}
			l, code, ok := in.loadCard(lim)
			if !ok {
				return code
			}
			out, err := card.Canonical(l.Value, p)
			if err != nil {
				return reportCardError(e, c.name, err)
			}
			e.stdout.Write(out)
			return exitOK
		}
	}
	return c
}

func lintCmd() command {
	c := command{
		name:    "lint",
		long:    lintLong,
		summary: "Check a card against the A2A v1.0 schema and the rules that make its signature verify everywhere; exit 1 on any error.",
		usage:   "[--strip-unknown] FILE|-",
		example: "  cardsign lint agent-card.json\n  error skills[0].tags: REQUIRED field of AgentSkill is missing [required]; fix: add tags",
	}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		strip := fs.Bool("strip-unknown", false, "drop keys outside the v1.0 schema (and say which) instead of reporting them")
		lim := limitFlags(fs)
		return func(_ context.Context, in *call) int {
			e, pos := in.env, in.pos
			data, code, ok := c.oneInput(e, pos, lim)
			if !ok {
				return code
			}
			l, err := card.Load(data, card.Options{Limits: *lim, StripUnknown: *strip})
			if err != nil {
				var ce *strictjson.Error
				if errors.As(err, &ce) {
					fmt.Fprintf(e.stdout, "error %s: %s [%s]\n", escapeText(ce.Path), escapeText(ce.Reason), ce.Rule)
					return exitFail
				}
				return reportCardError(e, c.name, err)
			}
			printNotes(e, c.name, l)
			findings := card.Lint(l.Value)
			errs, warns := 0, 0
			for _, f := range findings {
				fmt.Fprintln(e.stdout, escapeText(f.String()))
				if f.Severity == card.SeverityError {
					errs++
				} else {
					warns++
				}
			}
			fmt.Fprintf(e.stderr, "%d errors, %d warnings\n", errs, warns)
			if errs > 0 {
				return exitFail
			}
			forms, err := card.CanonicalForms(l.Value)
			if err != nil {
				return reportCardError(e, c.name, err)
			}
			printSigningPlan(e.stdout, forms)
			return exitOK
		}
	}
	return c
}

func upgradeCmd() command {
	c := command{
		name:    "upgrade",
		long:    upgradeLong,
		summary: "Print a v0.3 card mapped to the A2A v1.0 shape (a v1.0 card is printed unchanged).",
		usage:   "FILE|-",
		example: "  cardsign upgrade old-card.json > agent-card.json",
	}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		lim := limitFlags(fs)
		return func(_ context.Context, in *call) int {
			e := in.env
			l, code, ok := in.loadCard(lim)
			if !ok {
				return code
			}
			printNotes(e, c.name, l)
			if l.Shape == card.V10 {
				fmt.Fprintf(e.stderr, "cardsign %s: the card is already in the v1.0 shape\n", c.name)
			}
			e.stdout.Write(l.Value.Indent())
			return exitOK
		}
	}
	return c
}

// printSigningPlan says which signatures signing adds to a card that passes
// lint, why each one beyond the first, and which verifiers the signed card
// will then satisfy.
func printSigningPlan(w io.Writer, forms *card.Forms) {
	profiles := signer.AutoProfiles(forms)
	fmt.Fprintf(w, "signing adds %d signature(s):\n", len(profiles))
	for _, p := range profiles {
		switch p {
		case card.ProfileSpec:
			fmt.Fprintln(w, "  spec: A2A §8.4.1 canonical bytes")
		case card.ProfileSDK:
			fmt.Fprintf(w, "  sdk: for @a2a-js/sdk and a2a-python ≥1.2, which drop these: %s\n", escapeText(strings.Join(forms.Divergences, ", ")))
		case card.ProfilePythonASCII:
			fmt.Fprintf(w, "  python-ascii: for a2a-python ≤1.1, which writes these otherwise: %s\n", escapeText(strings.Join(forms.PythonDivergences, ", ")))
		}
	}
	fmt.Fprintln(w, signer.FormatPortability("verifies after signing in: ", signer.Portability(forms, profiles)))
}
