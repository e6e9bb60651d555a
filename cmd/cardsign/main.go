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
	"time"

	"github.com/cardsign/cardsign/card"
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

// command is one entry of the command table: its help, how its arguments
// are read, and whether it talks to cardsignd. Every command runs through
// command.invoke, so flags, help, usage errors, dialing and credentials are
// handled in one place.
type command struct {
	name    string
	summary string
	usage   string // after "cardsign NAME "
	example string
	// long is what a user needs beyond the summary, usage and flags: what
	// the command checks and prints, its exit codes, its caveats. help
	// prints it, and so does the CLI reference (docs/reference/cli.md).
	long string
	// subs names the subcommands, each with its summary, in the order help
	// lists them; a group's are two words (log key create).
	subs []subcommand
	// subcommands: the first argument names a subcommand; without one, or
	// with -h, the command prints its help.
	subcommands bool
	// groups are the subcommands that take a subcommand of their own
	// (log key create), each with the ones it takes, for its usage error.
	groups map[string]string
	// daemon, when set, makes the command one that talks to cardsignd: the
	// connection flags (--server, TLS, token, certificate, identity token)
	// are added and call.dial connects with them.
	daemon *daemonFlags
	// flags registers the flags of the command (or of its subcommand sub)
	// on fs and returns the run that reads them once parsed; nil for an
	// unknown subcommand.
	flags func(fs *flag.FlagSet, sub string) runFunc
}

// subcommand is one entry of a command's subs.
type subcommand struct{ name, summary string }

// runFunc runs a command once its flags are parsed.
type runFunc func(ctx context.Context, in *call) int

// daemonFlags is how a command talks to cardsignd.
type daemonFlags struct {
	timeout      time.Duration // the default deadline of each call
	timeoutUsage string        // --timeout's usage; empty: no --timeout flag
}

// call is one run of a command: its environment, its subcommand and
// positional arguments and, for a command that talks to cardsignd, the
// connection flags given.
type call struct {
	env
	c       command
	sub     string
	pos     []string
	conn    *connFlags
	timeout time.Duration
}

// invoke runs the command with its arguments (after its name).
func (c command) invoke(ctx context.Context, e env, args []string) int {
	sub := ""
	if c.subcommands {
		if code, done := c.subcommandHelp(e, args); done {
			return code
		}
		sub, args = args[0], args[1:]
		if subs, group := c.groups[sub]; group {
			if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "--help" {
				return c.usageError(e, "%s wants a subcommand: %s", sub, subs)
			}
			if args[0] == "-h" || args[0] == "--help" {
				fmt.Fprint(e.stdout, c.help(nil))
				return exitOK
			}
			sub, args = sub+" "+args[0], args[1:]
		}
	}
	return c.invokeSub(ctx, e, sub, args)
}

// invokeSub parses the flags of the command's subcommand sub ("" for
// none) and runs it.
func (c command) invokeSub(ctx context.Context, e env, sub string, args []string) int {
	fs, in, run := c.flagSet(sub)
	if run == nil {
		return c.usageError(e, "unknown subcommand %q", sub)
	}
	in.env = e
	pos, code, done := c.parse(e, fs, args)
	if done {
		return code
	}
	in.pos = pos
	return run(ctx, in)
}

// flagSet registers every flag of the command's subcommand sub ("" for
// none), the connection flags of a command that talks to cardsignd
// included, on a new FlagSet; run is nil for an unknown subcommand. The
// CLI reference reads the flags from here too.
func (c command) flagSet(sub string) (fs *flag.FlagSet, in *call, run runFunc) {
	name := c.name
	if sub != "" {
		name += " " + sub
	}
	fs = flag.NewFlagSet(name, flag.ContinueOnError)
	in = &call{c: c, sub: sub}
	if d := c.daemon; d != nil {
		in.conn = addConnFlags(fs)
		in.timeout = d.timeout
		if d.timeoutUsage != "" {
			fs.DurationVar(&in.timeout, "timeout", d.timeout, d.timeoutUsage)
		}
	}
	return fs, in, c.flags(fs, sub)
}

// dial connects to cardsignd with the call's connection flags; when it
// cannot, it says why and ok is false, with the exit code.
func (in *call) dial() (cl *client, code int, ok bool) {
	cl, err := dial(in.env, in.conn, in.timeout)
	if err != nil {
		fmt.Fprintf(in.stderr, "cardsign %s: %v\n", in.c.name, err)
		return nil, exitUsage, false
	}
	return cl, 0, true
}

// session is a connection to cardsignd with the deadline of one call.
type session struct {
	*client
	ctx    context.Context // bounded by --timeout
	cancel context.CancelFunc
}

// session dials cardsignd for one call bounded by --timeout; when it
// cannot, it says why and ok is false, with the exit code.
func (in *call) session(ctx context.Context) (s *session, code int, ok bool) {
	cl, code, ok := in.dial()
	if !ok {
		return nil, code, false
	}
	cctx, cancel := cl.ctx(ctx)
	return &session{client: cl, ctx: cctx, cancel: cancel}, 0, true
}

// close ends the call's deadline and the connection.
func (s *session) close() {
	s.cancel()
	s.client.close()
}

// usageError prints a usage problem of the call and returns exitUsage.
func (in *call) usageError(format string, args ...any) int {
	return in.c.usageError(in.env, format, args...)
}

// noArgs refuses the positional arguments of a command that takes none.
func (in *call) noArgs() (code int, ok bool) {
	if len(in.pos) > 0 {
		return in.usageError("unexpected argument %q", in.pos[0]), false
	}
	return 0, true
}

func commands() []command {
	return []command{
		canonicalizeCmd(), lintCmd(), upgradeCmd(), signCmd(), verifyCmd(), catalogCmd(), keygenCmd(), jwksCmd(), keysCmd(), agentsCmd(), approvalsCmd(), auditCmd(), eventsCmd(), logCmd(), policyCmd(), benchCmd(), tokenCmd(), versionCmd(),
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
			return c.invoke(ctx, e, args[1:])
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
	if len(c.subs) > 0 {
		b.WriteString("\nSubcommands:\n")
		for _, s := range c.subs {
			fmt.Fprintf(&b, "  %-15s %s\n", s.name, s.summary)
		}
	}
	if c.long != "" {
		fmt.Fprintf(&b, "\n%s\n", c.long)
	}
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

// loadCard reads the call's one card argument and loads it within lim;
// when it cannot, it has said why and ok is false, with the exit code.
func (in *call) loadCard(lim *strictjson.Limits) (l *card.Loaded, code int, ok bool) {
	data, code, ok := in.c.oneInput(in.env, in.pos, lim)
	if !ok {
		return nil, code, false
	}
	l, err := card.Load(data, card.Options{Limits: *lim})
	if err != nil {
		return nil, reportCardError(in.env, in.c.name, err), false
	}
	return l, 0, true
}

// readInput reads the file name, or standard input for -, up to limit
// bytes.
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
