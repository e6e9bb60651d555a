package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/refdoc"
)

var update = flag.Bool("update", false, "write cardsign's part of docs/reference/cli.md instead of checking it")

// cliReference is the page, relative to the module root.
const cliReference = "docs/reference/cli.md"

// cliIntro opens the page.
const cliIntro = `Two binaries: ` + "`cardsign`" + `, the command-line client (offline signing and verification, and the
administration of a running authority), and ` + "`cardsignd`" + `, the authority. This page is generated from
their command tables and flag definitions, so it lists every command and flag of this version.

Every ` + "`cardsign`" + ` command that reads a card takes a file argument or ` + "`-`" + ` (standard input), writes
results to standard output and diagnostics to standard error, and takes ` + "`--help`" + ` (its usage, flags and an
example; ` + "`cardsign help COMMAND`" + ` prints the same). Flags may come before or after the file.

Exit codes: ` + "`0`" + ` success; ` + "`1`" + ` the answer is no (lint errors, no valid signature, signing refused);
` + "`2`" + ` bad flags or unreadable input (malformed card, missing file, unreachable JWKS). Commands with more
say so below.`

// connFlagNames are the flags addConnFlags registers: documented once, in
// "Connecting to cardsignd".
func connFlagNames() map[string]bool {
	fs := flag.NewFlagSet("conn", flag.ContinueOnError)
	addConnFlags(fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
	return names
}

// flagNames lists the names of the flags of fs.
func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// cliPage renders cardsign's part of the CLI reference from cmds.
func cliPage(t *testing.T, cmds []command) string {
	t.Helper()
	conn := connFlagNames()
	skipConn := func(name string) bool { return conn[name] }
	var b strings.Builder
	fmt.Fprintf(&b, "# CLI reference\n\n%s\n\n", cliIntro)
	b.WriteString("Commands:")
	for _, c := range cmds {
		fmt.Fprintf(&b, " [`%s`](#%s) ·", c.name, refdoc.Slug("cardsign "+c.name))
	}
	b.WriteString(" [connecting to cardsignd](#connecting-to-cardsignd) · [`cardsignd`](#cardsignd).\n")

	fs := flag.NewFlagSet("conn", flag.ContinueOnError)
	addConnFlags(fs)
	fmt.Fprintf(&b, "\n%s\n## Connecting to cardsignd\n\n%s\n\n%s", refdoc.Anchor("connecting-to-cardsignd"),
		refdoc.Markdown(connectingHelp, "sh"), refdoc.FlagTable(fs, nil))

	for _, c := range cmds {
		title := "cardsign " + c.name
		fmt.Fprintf(&b, "\n%s\n## %s\n\n%s\n\n%s", refdoc.Anchor(refdoc.Slug(title)), title, c.summary,
			refdoc.CodeBlock(title+" "+c.usage, "sh"))
		if c.long != "" {
			fmt.Fprintf(&b, "\n%s\n", refdoc.Markdown(c.long, "sh"))
		}
		subs := []string{""}
		if c.subcommands {
			subs = nil
			for _, s := range c.subs {
				subs = append(subs, s.name)
			}
			if len(subs) == 0 {
				t.Errorf("cardsign %s takes subcommands and lists none in subs", c.name)
			}
		}
		// One flag table for the command when every subcommand has the
		// same flags; one per subcommand otherwise.
		var sets []*flag.FlagSet
		shared := true
		for _, sub := range subs {
			fs, _, run := c.flagSet(sub)
			if run == nil {
				t.Errorf("cardsign %s: subcommand %q of subs is unknown to its flags", c.name, sub)
				fs = flag.NewFlagSet(sub, flag.ContinueOnError)
			}
			sets = append(sets, fs)
			shared = shared && slices.Equal(flagNames(fs), flagNames(sets[0]))
		}
		writeFlags := func(fs *flag.FlagSet, what string) {
			if table := refdoc.FlagTable(fs, skipConn); table != "" {
				fmt.Fprintf(&b, "\nFlags%s:\n\n%s", what, table)
			}
			if c.daemon != nil {
				b.WriteString("\nAnd the [connection flags](#connecting-to-cardsignd).\n")
			}
		}
		if shared {
			what := ""
			if c.subcommands {
				what = " (every subcommand)"
			}
			writeFlags(sets[0], what)
		}
		if c.example != "" {
			fmt.Fprintf(&b, "\nExample:\n\n%s", refdoc.CodeBlock(c.example, "sh"))
		}
		for i, s := range c.subs {
			title := "cardsign " + c.name + " " + s.name
			fmt.Fprintf(&b, "\n%s\n### %s\n\n%s\n", refdoc.Anchor(refdoc.Slug(title)), title, refdoc.Sentence(s.summary))
			if !shared && i < len(sets) {
				writeFlags(sets[i], "")
			}
		}
	}
	return b.String()
}

// TestCLIReference checks cardsign's part of docs/reference/cli.md against
// the command table; -update writes it.
func TestCLIReference(t *testing.T) {
	docs, err := refdoc.NewDocs(".")
	if err != nil {
		t.Fatal(err)
	}
	fix := "go test ./cmd/cardsign -run TestCLIReference -update (or scripts/gen)"
	if err := refdoc.UpdateSection(filepath.Join(docs.Root(), cliReference), "cardsign", cliPage(t, commands()), fix, *update); err != nil {
		t.Fatal(err)
	}
}

// TestCLIReferenceFollowsTable checks that the page is the command table:
// a changed flag usage, summary or subcommand shows in it.
func TestCLIReferenceFollowsTable(t *testing.T) {
	before := cliPage(t, commands())
	for _, tc := range []struct {
		name   string
		change func(c *command)
		want   string
	}{
		{"flag usage", func(c *command) {
			if c.name != "sign" {
				return
			}
			orig := c.flags
			c.flags = func(fs *flag.FlagSet, sub string) runFunc {
				run := orig(fs, sub)
				fs.Lookup("key").Usage = "an edited usage"
				return run
			}
		}, "| an edited usage |"},
		{"summary", func(c *command) {
			if c.name == "lint" {
				c.summary = "An edited summary."
			}
		}, "An edited summary."},
		{"subcommand", func(c *command) {
			if c.name == "keys" {
				c.subs = append(c.subs, subcommand{"list", "listed twice"})
			}
		}, "Listed twice."},
	} {
		cmds := commands()
		for i := range cmds {
			tc.change(&cmds[i])
		}
		after := cliPage(t, cmds)
		if strings.Contains(before, tc.want) || !strings.Contains(after, tc.want) {
			t.Errorf("%s: the page does not follow the table:\n%s", tc.name, refdoc.Diff(before, after))
		}
	}
	// Every command and flag of the table is on the page.
	for _, c := range commands() {
		if !strings.Contains(before, "## cardsign "+c.name+"\n") {
			t.Errorf("cardsign %s has no section", c.name)
		}
		fs, _, _ := c.flagSet(firstSub(c))
		for _, n := range flagNames(fs) {
			if !strings.Contains(before, "`--"+n) {
				t.Errorf("cardsign %s --%s is not on the page", c.name, n)
			}
		}
	}
}

// firstSub is the command's first subcommand, or "" for none.
func firstSub(c command) string {
	if len(c.subs) == 0 {
		return ""
	}
	return c.subs[0].name
}
