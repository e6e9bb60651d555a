package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/refdoc"
)

var update = flag.Bool("update", false, "write cardsignd's part of docs/reference/cli.md instead of checking it")

// cliReference is the page, relative to the module root.
const cliReference = "docs/reference/cli.md"

// cliPage renders cardsignd's part of the CLI reference from its usage
// texts and the flags defineFlags and storeCopyFlags register.
func cliPage(daemon, storeCopy *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n## cardsignd\n\nThe signing authority. Its configuration is one YAML file: see the "+
		"[configuration reference](config.md); the flags below override the fields they name.\n\n%s\nFlags:\n\n%s",
		refdoc.Anchor("cardsignd"), refdoc.CodeBlock(topUsage, "text"), refdoc.FlagTable(daemon, nil))
	fmt.Fprintf(&b, "\nMemory: cardsignd runs Go's garbage collector at `GOGC=%d` unless `GOGC` is set in its environment "+
		"(its live heap is small and nearly all garbage is per request, so Go's default of 100 costs CPU under load); "+
		"`GOGC=100` restores Go's default, and `GOMEMLIMIT` (e.g. `256MiB`) caps the heap whatever `GOGC` says. "+
		"The variables the configuration reads are listed under [Environment](config.md#environment).\n", defaultGCPercent)
	usage, _ := strings.CutSuffix(storeCopyUsage, "Flags:\n")
	fmt.Fprintf(&b, "\n%s\n### cardsignd store copy\n\n%s\nFlags:\n\n%s",
		refdoc.Anchor("cardsignd-store-copy"), refdoc.CodeBlock(usage, "text"), refdoc.FlagTable(storeCopy, nil))
	fmt.Fprintf(&b, "\n%s\n### cardsignd help\n\nPrints the usage above.\n", refdoc.Anchor("cardsignd-help"))
	return b.String()
}

// flagSets are cardsignd's flags and those of store copy.
func flagSets() (daemon, storeCopy *flag.FlagSet) {
	daemon = flag.NewFlagSet("cardsignd", flag.ContinueOnError)
	defineFlags(daemon)
	storeCopy = flag.NewFlagSet("cardsignd store copy", flag.ContinueOnError)
	storeCopyFlags(storeCopy)
	return daemon, storeCopy
}

// TestCLIReference checks cardsignd's part of docs/reference/cli.md
// against its flags; -update writes it.
func TestCLIReference(t *testing.T) {
	docs, err := refdoc.NewDocs(".")
	if err != nil {
		t.Fatal(err)
	}
	fix := "go test ./cmd/cardsignd -run TestCLIReference -update (or scripts/gen)"
	if err := refdoc.UpdateSection(filepath.Join(docs.Root(), cliReference), "cardsignd", cliPage(flagSets()), fix, *update); err != nil {
		t.Fatal(err)
	}
}

// TestCLIReferenceFollowsFlags checks that the page is the flags: each one
// is on it, and an edited usage shows.
func TestCLIReferenceFollowsFlags(t *testing.T) {
	daemon, storeCopy := flagSets()
	before := cliPage(daemon, storeCopy)
	for _, fs := range []*flag.FlagSet{daemon, storeCopy} {
		fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(before, "`--"+f.Name) {
				t.Errorf("%s --%s is not on the page", fs.Name(), f.Name)
			}
		})
	}
	storeCopy.Lookup("batch").Usage = "an edited usage"
	if after := cliPage(daemon, storeCopy); strings.Contains(before, "an edited usage") || !strings.Contains(after, "| an edited usage |") {
		t.Errorf("the page does not follow the flags:\n%s", refdoc.Diff(before, after))
	}
}
