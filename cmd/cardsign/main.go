// Command cardsign is the cardsign command-line client: it canonicalizes,
// lints, upgrades, signs and verifies A2A Agent Cards offline, makes keys,
// and prints JWKS documents.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cardsign/cardsign/strictjson"
)

// Exit codes shared by every command.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and the answer is no (lint errors, invalid signature, signing failed)
	exitUsage = 2 // bad flags or unreadable input
)

// env is what a command touches of the outside world, so tests can run
// commands in-process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

type command struct {
	name    string
	summary string
	usage   string // after "cardsign NAME "
	example string
	run     func(ctx context.Context, e env, args []string) int
}

func commands() []command {
	return []command{
		canonicalizeCmd(), lintCmd(), upgradeCmd(), signCmd(), verifyCmd(), keygenCmd(), jwksCmd(), keysCmd(), agentsCmd(), auditCmd(), logCmd(), benchCmd(), tokenCmd(),
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, e env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) > 1 {
			for _, c := range commands() {
				if c.name == args[1] {
					fmt.Fprint(e.stdout, c.help(nil))
					return exitOK
				}
			}
		}
		topUsage(e.stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
	}
	fmt.Fprintf(e.stderr, "cardsign: unknown command %q\n\n", args[0])
	topUsage(e.stderr)
	return exitUsage
}

func topUsage(w io.Writer) {
	fmt.Fprintln(w, "cardsign signs and verifies A2A Agent Cards.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: cardsign COMMAND [flags] [FILE|-]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "sign --server, keys, audit and bench talk to cardsignd: --server HOST:PORT, or several replicas")
	fmt.Fprintln(w, "separated by commas (--server cs1.internal:7700,cs2.internal:7700,cs3.internal:7700), balanced and failed over.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'cardsign COMMAND --help' for a command's flags and an example.")
}

func (c command) help(fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nUsage: cardsign %s %s\n", c.summary, c.name, c.usage)
	if fs != nil {
		var flags strings.Builder
		fs.SetOutput(&flags)
		fs.PrintDefaults()
		if flags.Len() > 0 {
			fmt.Fprintf(&b, "\nFlags:\n%s", flags.String())
		}
	}
	fmt.Fprintf(&b, "\nExample:\n%s\n", c.example)
	return b.String()
}

// parse parses flags that may come before, between or after the positional
// arguments (cardsign sign card.json --key file:k.pem), and returns the
// positional ones. It prints help and returns done on -h.
func (c command) parse(e env, fs *flag.FlagSet, args []string) (pos []string, code int, done bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(e.stdout, c.help(fs))
				return nil, exitOK, true
			}
			hint := ""
			if strings.Contains(err.Error(), "not defined") {
				// A kid is base64url: one in 64 starts with "-".
				hint = "An argument that starts with '-', such as a kid, goes after '--': cardsign " + c.name + " SUBCOMMAND -- -KID.\n"
			}
			fmt.Fprintf(e.stderr, "cardsign %s: %v\n%sRun 'cardsign %s --help' for usage.\n", c.name, err, hint, c.name)
			return nil, exitUsage, true
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, 0, false
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// subcommandHelp handles a command with subcommands called with none (usage,
// exit 2) or with -h/--help (usage, exit 0); done says whether it did.
func (c command) subcommandHelp(e env, args []string) (code int, done bool) {
	if len(args) > 0 && args[0] != "-h" && args[0] != "--help" {
		return 0, false
	}
	fmt.Fprint(e.stdout, c.help(nil))
	if len(args) == 0 {
		return exitUsage, true
	}
	return exitOK, true
}

// usageError prints a usage problem and returns exitUsage.
func (c command) usageError(e env, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "cardsign %s: %s\nRun 'cardsign %s --help' for usage.\n", c.name, fmt.Sprintf(format, args...), c.name)
	return exitUsage
}

// oneInput reads the single FILE or - argument of a command, reading at most
// one byte more than the size cap so the card parser reports the cap by name.
func (c command) oneInput(e env, pos []string, lim *strictjson.Limits) ([]byte, int, bool) {
	if lim.MaxBytes <= 0 || lim.MaxDepth <= 0 || lim.MaxValues <= 0 {
		return nil, c.usageError(e, "--max-bytes, --max-depth and --max-values must be positive"), false
	}
	if len(pos) != 1 {
		return nil, c.usageError(e, "want exactly one card file (or - for standard input), got %d arguments", len(pos)), false
	}
	data, err := readInput(e, pos[0], int64(lim.MaxBytes)+1)
	if err != nil {
		fmt.Fprintf(e.stderr, "cardsign %s: %v\n", c.name, err)
		return nil, exitUsage, false
	}
	return data, 0, true
}

func readInput(e env, name string, limit int64) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = e.stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	return io.ReadAll(io.LimitReader(r, limit))
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }
