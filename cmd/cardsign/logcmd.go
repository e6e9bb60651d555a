package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/tlogclient"
	"github.com/cardsign/cardsign/webtrust"
)

// exitAlarm is the exit code of log verify and log monitor when the log
// misbehaved (a fork, a rollback, an origin change, data its own signed
// checkpoint contradicts): distinct from exitFail, which only says a check
// could not be made, so that cron and alerting can tell them apart.
const exitAlarm = 3

// logUsage is log's usage: its subcommands and their arguments.
const logUsage = "key create --origin ORIGIN FILE | key show --origin ORIGIN FILE |\n" +
	"       checkpoint --url URL --log-key KEY [--ca-file F] [--json] [--out FILE] |\n" +
	"       verify --url URL --log-key KEY [--ca-file F] OLD_CHECKPOINT_FILE [NEW_CHECKPOINT_FILE] |\n" +
	"       monitor --url URL --log-key KEY [--ca-file F] --state FILE [--watch NAME|HOST ...] [--json] |\n" +
	"       proof refresh --url URL --log-key KEY [--ca-file F] [--out FILE] CARD|-\n" +
	"       (checkpoint, verify, monitor and proof refresh take --witness KEY|FILE|URL ... [--witness-quorum K])"

// logLong is log's long help: what its subcommands check, and its exit
// codes.
const logLong = "--url is the log's prefix (cardsignd serves it at " + transparency.PathPrefix + "). --log-key is the log's verifier key ORIGIN+HASH+BASE64,\n" +
	"a file of such keys (one a line), or an http(s) URL serving them (cardsignd: " + transparency.KeyPath + "); take it from\n" +
	"a source you trust, not only from the log's own server.\n\n" +
	"verify proves that NEW (default: the log's current checkpoint) extends OLD. monitor does the same from the\n" +
	"checkpoint saved in --state (the first run trusts the log's current one: trust on first use), walks the new\n" +
	"leaves, checks each against the tree, and reports the entries whose card name is a --watch NAME (or matches\n" +
	"it as a pattern with * and ?) or whose card points at a --watch HOST (\"*.example.com\" matches subdomains);\n" +
	"with --json, one object per line: {\"event\":\"entry\"|\"alarm\"|\"checkpoint\",...}. The state file advances only\n" +
	"when the run succeeds, so an alarm is raised again on every run until someone looks.\n\n" +
	"--witness names a witness whose cosignatures count (C2SP tlog-cosignature; repeatable, a key, a file of keys or a\n" +
	"URL): checkpoint, verify and monitor then say which witnesses vouched for the checkpoint and require\n" +
	"--witness-quorum of them (default: all named). proof refresh gives each signature of a signed card an inclusion\n" +
	"proof in the log's current (witnessed) checkpoint, after proving it consistent with the proof's own; nothing\n" +
	"signed changes.\n\n" +
	"Exit codes: 0 consistent (monitor: matching entries are reported, not failures); 1 the check could not be\n" +
	"made (network, an unreadable state file, a bad answer); 2 usage; 3 ALARM: the log FORKED (two trees that do\n" +
	"not extend one another), ROLLED BACK, changed ORIGIN, or served data its own signed checkpoint contradicts;\n" +
	"4 NOT WITNESSED: consistent, but the checkpoint lacks the --witness-quorum of cosignatures."

// logSubcommands are log's subcommands, for help and the CLI reference.
func logSubcommands() []subcommand {
	return []subcommand{
		{"key create", "a new Ed25519 log key (PEM PKCS#8, mode 0600, never overwriting); prints its verifier key ORIGIN+HASH+BASE64"},
		{"key show", "the verifier key of a log key file"},
		{"checkpoint", "fetch and verify the log's current checkpoint; --out keeps it for a later log verify"},
		{"verify", "prove that checkpoint NEW (default: the log's current one) extends OLD, from the log's tiles"},
		{"monitor", "from cron: prove the log consistent with the checkpoint saved in --state, and report every new entry for a watched card name or host"},
		{"proof refresh", "give each signature of a signed card an inclusion proof in the log's current checkpoint (with the witnesses' cosignatures it carries), without signing again"},
	}
}

// logExample is log's example: make a key, keep a checkpoint, prove the log
// extends it, and monitor from cron.
const logExample = "  cardsign log key create --origin cardsign.example.com/log /etc/cardsign/log-key.pem\n" +
	"  cardsign.example.com/log+1a2b3c4d+AbCd…\n" +
	"  cardsign log checkpoint --url https://cardsign.example.com/log/ --log-key cardsign.example.com/log+1a2b3c4d+AbCd… --out cp-monday\n" +
	"  cardsign log verify --url https://cardsign.example.com/log/ --log-key log-keys.txt cp-monday\n" +
	"  consistent: the log's checkpoint of 1207 leaves extends cp-monday (1042 leaves)\n" +
	"  # crontab: alert on exit 3, read the matches\n" +
	"  */10 * * * * cardsign log monitor --url https://cardsign.example.com/log/ --log-key log-keys.txt --state /var/lib/cardsign-monitor/state.json --watch payments-agent --watch '*.payments.example.com' --json >> /var/log/cardsign-monitor.jsonl"

func logCmd() command {
	c := command{
		name:    "log",
		long:    logLong,
		summary: "The transparency log: make its key, fetch and verify its checkpoint, prove two checkpoints consistent, monitor it for cards signed in your name.",
		usage:   logUsage,
		example: logExample,
	}
	c.subcommands = true
	c.subs = logSubcommands()
	c.groups = map[string]string{"key": "key create or key show", "proof": "proof refresh"}
	c.flags = func(fs *flag.FlagSet, sub string) runFunc {
		origin := fs.String("origin", "", "key create, key show: the log's origin, a schema-less URL such as cardsign.example.com/log (cardsignd's log origin)")
		logURL := fs.String("url", "", "checkpoint, verify, monitor: the log's URL prefix, e.g. https://cardsign.example.com"+transparency.PathPrefix)
		logKey := fs.String("log-key", "", "checkpoint, verify, monitor: the log's verifier key(s): ORIGIN+HASH+BASE64, a file of such keys, or an http(s) URL serving them")
		asJSON := fs.Bool("json", false, "checkpoint: print a JSON object; monitor: one JSON object per event and line")
		out := fs.String("out", "", "checkpoint: also write the signed checkpoint to this file, for a later log verify; proof refresh: write the card there (default: standard output)")
		state := fs.String("state", "", "monitor: the state file (JSON, mode 0600): the last checkpoint proved consistent (required)")
		var watch stringsFlag
		fs.Var(&watch, "watch", "monitor: a card name or host to report entries for (repeatable; * and ? are wildcards)")
		var salts stringsFlag
		fs.Var(&salts, "salt", "monitor: a private agent's log salt (hex, from GET /agents/ID/log-salt with a reader token; repeatable): its sealed entries match a --watch NAME or HOST exactly")
		timeout := fs.Duration("timeout", 10*time.Minute, "checkpoint, verify, monitor: deadline of the whole command, walk included")
		var witnesses stringsFlag
		fs.Var(&witnesses, "witness", "checkpoint, verify, monitor, proof refresh: a witness's verifier key NAME+HASH+BASE64, a file of such keys, or an http(s) URL serving them (repeatable): report its cosignatures and require --witness-quorum of them")
		quorum := fs.Int("witness-quorum", 0, "with --witness: how many of the witnesses must have cosigned (default: all named)")
		caFile := fs.String("ca-file", "", "checkpoint, verify, monitor: PEM certificates trusted as roots in addition to the system's, for the log's https URLs (--url, a --log-key URL) (default $"+caFileEnv+")")
		hook := monitorHookFlags(fs)
		return func(ctx context.Context, in *call) int {
			e, pos := in.env, in.pos
			if code, ok := logFlagsOf(fs, in); !ok {
				return code
			}
			if strings.HasPrefix(sub, "key ") {
				return logKeyCmd(ctx, in, *origin)
			}
			if msg := logArgsProblem(sub, pos, *logURL, *logKey, *state, *timeout, *quorum, len(witnesses)); msg != "" {
				return c.usageError(e, "%s", msg)
			}
			saltBytes, code, ok := parseSalts(in, salts)
			if !ok {
				return code
			}
			ctx, cancel := context.WithTimeout(ctx, *timeout)
			defer cancel()
			hc, err := fetchClient(*caFile, min(*timeout, 2*time.Minute), noDowngrade)
			if err != nil {
				return c.usageError(e, "%s", escapeText(err.Error()))
			}
			keys, err := webtrust.LoadLogKeys(ctx, *logKey, hc)
			if err != nil {
				return c.usageError(e, "--log-key: %s", escapeText(err.Error()))
			}
			lc := &tlogclient.Client{URL: *logURL, HTTP: hc, Keys: keys}
			var wp transparency.WitnessPolicy
			if len(witnesses) > 0 {
				if wp, err = webtrust.LoadWitnessPolicy(ctx, witnesses, *quorum, hc); err != nil {
					return c.usageError(e, "--witness: %s", escapeText(err.Error()))
				}
			}
			switch sub {
			case "checkpoint":
				return logCheckpoint(ctx, e, lc, wp, *asJSON, *out)
			case "verify":
				return logVerify(ctx, e, lc, wp, pos)
			case "proof refresh":
				return proofRefresh(ctx, in, lc, wp, *out)
			default:
				if hook.url != "" {
					if err := hook.open(*caFile); err != nil {
						return c.usageError(e, "%s", escapeText(err.Error()))
					}
				}
				return logMonitor(ctx, e, lc, wp, *state, watch, saltBytes, *asJSON, hook)
			}
		}
	}
	return c
}

// logArgsProblem is what is wrong with the arguments of log SUB (not key
// create or key show), or "".
func logArgsProblem(sub string, pos []string, logURL, logKey, state string, timeout time.Duration, quorum, witnesses int) string {
	switch {
	case logURL == "":
		return "--url is required: the log's prefix, e.g. https://cardsign.example.com" + transparency.PathPrefix
	case logKey == "":
		return "--log-key is required: the log is checked only against keys you name"
	case timeout <= 0:
		return "--timeout must be positive"
	case (sub == "checkpoint" || sub == "monitor") && len(pos) > 0:
		return fmt.Sprintf("unexpected argument %q", pos[0])
	case sub == "verify" && (len(pos) < 1 || len(pos) > 2):
		return fmt.Sprintf("verify wants OLD_CHECKPOINT_FILE [NEW_CHECKPOINT_FILE], got %d arguments", len(pos))
	case sub == "monitor" && state == "":
		return "monitor needs --state FILE: where it keeps the last checkpoint it proved"
	case sub == "proof refresh" && len(pos) != 1:
		return fmt.Sprintf("proof refresh wants one signed card (a file, or - for standard input), got %d arguments", len(pos))
	case quorum != 0 && witnesses == 0:
		return "--witness-quorum needs --witness: name the witnesses whose cosignatures count"
	}
	return ""
}

// logFlagsOf refuses an unknown subcommand and the flags of another
// subcommand: log's subcommands share one flag set.
func logFlagsOf(fs *flag.FlagSet, in *call) (code int, ok bool) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	allowed := map[string][]string{
		"key create": {"origin"}, "key show": {"origin"},
		"checkpoint":    {"url", "log-key", "json", "out", "timeout", "ca-file", "witness", "witness-quorum"},
		"verify":        {"url", "log-key", "timeout", "ca-file", "witness", "witness-quorum"},
		"monitor":       {"url", "log-key", "json", "state", "watch", "salt", "timeout", "ca-file", "witness", "witness-quorum", "webhook", "webhook-secret-file"},
		"proof refresh": {"url", "log-key", "out", "timeout", "ca-file", "witness", "witness-quorum"},
	}
	flags, known := allowed[in.sub]
	if !known {
		return in.usageError("unknown subcommand %q", in.sub), false
	}
	for name := range given {
		if !slices.Contains(flags, name) {
			return in.usageError("--%s is not a flag of log %s", name, in.sub), false
		}
	}
	return 0, true
}

// logKeyCmd runs log key create and log key show.
func logKeyCmd(ctx context.Context, in *call, origin string) int {
	if len(in.pos) != 1 {
		return in.usageError("%s wants one key file, got %d arguments", in.sub, len(in.pos))
	}
	if err := transparency.CheckOrigin(origin); err != nil {
		return in.usageError("--origin: %v", err)
	}
	if in.sub == "key create" {
		return logKeyCreate(in.env, origin, in.pos[0])
	}
	return logKeyShow(ctx, in.env, origin, in.pos[0])
}

// parseSalts reads the --salt values: 32 bytes in hex each.
func parseSalts(in *call, salts []string) (saltBytes [][]byte, code int, ok bool) {
	for i, h := range salts {
		b, err := hex.DecodeString(strings.TrimSpace(h))
		if err != nil || len(b) != sha256.Size {
			return nil, in.usageError("--salt #%d: want the 64 hex digits GET /agents/ID/log-salt serves", i+1), false
		}
		saltBytes = append(saltBytes, b)
	}
	return saltBytes, 0, true
}

// logKeyCreate makes a new Ed25519 log key in a new file (mode 0600) and
// prints its verifier key.
func logKeyCreate(e env, origin, path string) int {
	key, err := file.Generate(jose.EdDSA)
	if err != nil {
		fmt.Fprintf(e.stderr, "cardsign log key create: %v\n", err)
		return exitFail
	}
	vkey, err := transparency.VerifierKey(origin, key.Public())
	if err != nil {
		fmt.Fprintf(e.stderr, "cardsign log key create: %v\n", err)
		return exitFail
	}
	if err := file.Write(path, key, jose.EdDSA); err != nil {
		fmt.Fprintf(e.stderr, "cardsign log key create: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(e.stderr, "cardsign log key create: wrote %s (mode 0600), an Ed25519 key for the log %s; publish the verifier key below (cardsignd serves it at %s)\n", path, origin, transparency.KeyPath)
	fmt.Fprintln(e.stdout, vkey)
	return exitOK
}

// logKeyShow prints the verifier key of an existing log key file.
func logKeyShow(ctx context.Context, e env, origin, path string) int {
	abs, err := filepath.Abs(path)
	if err != nil {
		fmt.Fprintf(e.stderr, "cardsign log key show: %v\n", err)
		return exitUsage
	}
	// The file backend reads it as cardsignd would: mode 0600, a regular
	// file, size-capped, its errors free of key material.
	h, err := file.Backend{}.Open(ctx, file.Scheme+":"+abs)
	if err != nil {
		fmt.Fprintf(e.stderr, "cardsign log key show: %v\n", err)
		return exitUsage
	}
	if _, ok := h.Signer.Public().(ed25519.PublicKey); !ok {
		fmt.Fprintf(e.stderr, "cardsign log key show: %s holds a %T key; a log key is Ed25519 (make one with cardsign log key create)\n", path, h.Signer.Public())
		return exitUsage
	}
	vkey, err := transparency.VerifierKey(origin, h.Signer.Public())
	if err != nil {
		fmt.Fprintf(e.stderr, "cardsign log key show: %v\n", err)
		return exitUsage
	}
	fmt.Fprintln(e.stdout, vkey)
	return exitOK
}

func logCheckpoint(ctx context.Context, e env, lc *tlogclient.Client, wp transparency.WitnessPolicy, asJSON bool, out string) int {
	cp, err := lc.Checkpoint(ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "cardsign log checkpoint: %s\n", escapeText(err.Error()))
		return exitFail
	}
	if out != "" {
		if _, err := writeAtomically(out, cp.Note); err != nil {
			fmt.Fprintf(e.stderr, "cardsign log checkpoint: %v\n", err)
			return exitFail
		}
	}
	vouched, werr := witnessCheck(wp, cp.Note)
	code := exitOK
	if werr != nil {
		code = exitNotWitnessed
	}
	if asJSON {
		m := map[string]any{"origin": cp.Origin, "size": cp.Size, "root": cp.Root.String(), "checkpoint": string(cp.Note)}
		if wp.Enabled() {
			m["witnessed_by"], m["witness_quorum"], m["witnessed"] = vouched, wp.Quorum, werr == nil
		}
		b, _ := json.Marshal(m)
		fmt.Fprintf(e.stdout, "%s\n", escapeJSON(b))
		return code
	}
	fmt.Fprintf(e.stdout, "origin %s\nsize   %d\nroot   %s\n", escapeText(cp.Origin), cp.Size, cp.Root)
	if wp.Enabled() {
		fmt.Fprintln(e.stdout, witnessLine(wp, vouched, werr))
	}
	if out != "" {
		fmt.Fprintf(e.stderr, "cardsign log checkpoint: wrote the signed checkpoint to %s; later: cardsign log verify --url %s --log-key KEY %s\n", out, lc.URL, out)
	}
	return code
}

// readCheckpointFile reads and verifies a saved signed checkpoint.
func readCheckpointFile(path string, keys []transparency.Verifier) (transparency.Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return transparency.Checkpoint{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, transparency.MaxCheckpointBytes+1))
	if err != nil {
		return transparency.Checkpoint{}, fmt.Errorf("%s: %w", path, err)
	}
	cp, err := transparency.OpenCheckpoint(b, keys)
	if err != nil {
		return transparency.Checkpoint{}, fmt.Errorf("%s: %w", path, err)
	}
	return cp, nil
}

func logVerify(ctx context.Context, e env, lc *tlogclient.Client, wp transparency.WitnessPolicy, pos []string) int {
	old, err := readCheckpointFile(pos[0], lc.Keys)
	if err != nil {
		fmt.Fprintf(e.stderr, "cardsign log verify: %s\n", escapeText(err.Error()))
		return exitUsage
	}
	var cur transparency.Checkpoint
	newName := "the log's current checkpoint"
	if len(pos) == 2 {
		if cur, err = readCheckpointFile(pos[1], lc.Keys); err != nil {
			fmt.Fprintf(e.stderr, "cardsign log verify: %s\n", escapeText(err.Error()))
			return exitUsage
		}
		newName = pos[1]
	} else if cur, err = lc.Checkpoint(ctx); err != nil {
		fmt.Fprintf(e.stderr, "cardsign log verify: %s\n", escapeText(err.Error()))
		return exitFail
	}
	err = transparency.Consistent(ctx, lc, old, cur)
	var a *transparency.AlarmError
	switch {
	case errors.As(err, &a):
		fmt.Fprintf(e.stdout, "%s: %s\n", alarmLabel(a.Kind), alarmText(a))
		fmt.Fprintf(e.stdout, "keep both signed checkpoints as evidence: %s, and %s:\n%s", pos[0], newName, indent(cur.Note))
		return exitAlarm
	case err != nil:
		fmt.Fprintf(e.stderr, "cardsign log verify: %s\n", escapeText(err.Error()))
		return exitFail
	}
	fmt.Fprintf(e.stdout, "consistent: %s of %d leaves (root %s) extends %s (%d leaves, root %s)\n", newName, cur.Size, cur.Root, pos[0], old.Size, old.Root)
	if wp.Enabled() {
		vouched, werr := witnessCheck(wp, cur.Note)
		fmt.Fprintln(e.stdout, witnessLine(wp, vouched, werr))
		if werr != nil {
			return exitNotWitnessed
		}
	}
	return exitOK
}

// alarmLabel is how an alarm is shouted on a terminal or in a mail.
func alarmLabel(k transparency.AlarmKind) string {
	switch k {
	case transparency.AlarmFork:
		return "FORK"
	case transparency.AlarmInconsistent:
		return "INCONSISTENT"
	case transparency.AlarmRollback:
		return "ROLLBACK"
	case transparency.AlarmOrigin:
		return "ORIGIN CHANGED"
	case transparency.AlarmTampered:
		return "TAMPERED"
	case transparency.AlarmBadEntry:
		return "BAD ENTRY"
	}
	return strings.ToUpper(string(k))
}

// alarmText is an alarm's detail and cause, without the kind its label
// already shouts.
func alarmText(a *transparency.AlarmError) string {
	s := a.Detail
	if a.Err != nil {
		s += ": " + a.Err.Error()
	}
	return escapeText(s)
}

// indent prints a signed note indented, escaped (a checkpoint's text is
// the log's).
func indent(b []byte) string {
	var s strings.Builder
	for _, line := range strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n") {
		s.WriteString("    " + escapeText(strings.TrimSuffix(line, "\n")) + "\n")
	}
	return s.String()
}

func logMonitor(ctx context.Context, e env, lc *tlogclient.Client, wp transparency.WitnessPolicy, state string, watch []string, salts [][]byte, asJSON bool, hook *monitorHook) int {
	var notWitnessed, hookErr error
	m := &tlogclient.Monitor{Client: lc, StatePath: state, Watch: watch, Salts: salts, Progress: prefixed{e.stderr, "cardsign log monitor: "},
		Emit: func(ev tlogclient.Event) (err error) {
			// Printed first, then sent: a webhook that fails never hides
			// what the monitor found. A match the webhook did not take
			// stops the run before the state file moves, so the next run
			// sends it again; an alarm is raised whatever the webhook did
			// (the state file never moves past one).
			defer func() {
				if herr := hook.send(ctx, lc.URL, ev); herr != nil {
					if hookErr == nil {
						hookErr = herr
					}
					if err == nil && ev.Kind == tlogclient.EventEntry {
						err = herr
					}
				}
			}()
			if ev.Kind == tlogclient.EventCheckpoint && wp.Enabled() {
				vouched, werr := witnessCheck(wp, ev.Checkpoint.Note)
				notWitnessed = werr
				if asJSON {
					b, _ := json.Marshal(map[string]any{"event": "witnesses", "origin": ev.Checkpoint.Origin, "size": ev.Checkpoint.Size,
						"witnessed_by": vouched, "witness_quorum": wp.Quorum, "witnessed": werr == nil})
					if _, err := fmt.Fprintf(e.stdout, "%s\n", escapeJSON(b)); err != nil {
						return err
					}
				} else if _, err := fmt.Fprintln(e.stdout, witnessLine(wp, vouched, werr)); err != nil {
					return err
				}
			}
			if asJSON {
				b, err := json.Marshal(ev)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(e.stdout, "%s\n", escapeJSON(b))
				return err
			}
			_, err = io.WriteString(e.stdout, monitorLine(ev))
			return err
		}}
	err := m.Run(ctx)
	if hookErr != nil {
		fmt.Fprintf(e.stderr, "cardsign log monitor: %s\n", escapeText(hookErr.Error()))
	}
	var a *transparency.AlarmError
	switch {
	case errors.As(err, &a):
		fmt.Fprintf(e.stderr, "cardsign log monitor: ALARM (%s): the state file %s was not advanced; every run raises it again until the log is investigated\n", alarmLabel(a.Kind), state)
		return exitAlarm
	case err != nil && hookErr != nil && errors.Is(err, hookErr):
		fmt.Fprintf(e.stderr, "cardsign log monitor: the webhook did not take a match printed above; the state file was not advanced, so the next run sends it again\n")
		return exitFail
	case err != nil:
		fmt.Fprintf(e.stderr, "cardsign log monitor: %s\n", escapeText(err.Error()))
		return exitFail
	case notWitnessed != nil:
		fmt.Fprintf(e.stderr, "cardsign log monitor: NOT WITNESSED: the log is consistent, but its checkpoint lacks the witnesses' quorum: %s\n", escapeText(notWitnessed.Error()))
		if err := hook.sendUnwitnessed(ctx, lc.URL, notWitnessed); err != nil {
			// Still NOT WITNESSED: the webhook's failure is said beside it.
			fmt.Fprintf(e.stderr, "cardsign log monitor: %s\n", escapeText(err.Error()))
		}
		return exitNotWitnessed
	}
	return exitOK
}

// monitorLine is the human form of a monitor event. Everything from an
// entry is the log's text, printed escaped.
func monitorLine(ev tlogclient.Event) string {
	switch ev.Kind {
	case tlogclient.EventEntry:
		en := ev.Entry
		var b strings.Builder
		// Each value on its own: a caller or host holding a space could
		// otherwise pass for the next field of the line.
		fmt.Fprintf(&b, "MATCH leaf %d (audit record %d) %s %s card %q", ev.Index, en.Seq, escapeValue(en.Time), escapeValue(en.Outcome), en.Card.Name)
		if en.Card.Version != "" {
			fmt.Fprintf(&b, " version %q", en.Card.Version)
		}
		if len(en.Card.Hosts) > 0 {
			fmt.Fprintf(&b, " hosts %s", escapeValues(en.Card.Hosts))
		}
		fmt.Fprintf(&b, " caller %s", escapeValue(en.Caller))
		if en.KID != "" {
			fmt.Fprintf(&b, " kid %s", escapeValue(en.KID))
		}
		fmt.Fprintf(&b, " sha256 %s (watch %s)", escapeValue(en.Card.SHA256), escapeValues(ev.Matched))
		return escapeText(b.String()) + "\n"
	case tlogclient.EventAlarm:
		a := ev.Alarm
		s := fmt.Sprintf("ALARM %s: %s\n", alarmLabel(a.Kind), alarmText(a))
		if len(a.Old.Note) > 0 {
			s += "  the checkpoint saved before:\n" + indent(a.Old.Note)
		}
		return s + "  the log's checkpoint now:\n" + indent(a.New.Note)
	case tlogclient.EventCheckpoint:
		cp := ev.Checkpoint
		was := fmt.Sprintf("was %d", ev.PreviousSize)
		if ev.PreviousSize < 0 {
			was = "first run, trusted on first use"
		}
		return fmt.Sprintf("checkpoint %s: %d leaves (%s), root %s, %d matching entries\n", escapeText(cp.Origin), cp.Size, was, cp.Root, ev.Matches)
	}
	return ""
}

// prefixed writes each write with a prefix: progress lines on stderr,
// named like the command's other messages.
type prefixed struct {
	w      io.Writer
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+escapeText(strings.TrimSuffix(string(b), "\n"))+"\n"); err != nil {
		return 0, err
	}
	return len(b), nil
}
