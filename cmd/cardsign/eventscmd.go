package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/events"
)

func eventsCmd() command {
	c := command{
		name:    "events",
		long:    eventsLong,
		summary: "Read cardsignd's events (every audit record as a CloudEvent) as they happen, and make webhook secrets.",
		usage:   "tail [--from SEQ | --last N] [--follow] [--type PATTERN]... [--json]   (takes --server ADDR) | secret [--out FILE]",
		example: "  cardsign events tail --follow --server cardsign.internal:7700 --tls --token-file auditor.token\n" +
			"  1042  2026-11-29T10:02:11.52Z  card.signed  \"payments\"  caller oidc:https://token.actions.githubusercontent.com#repo:org/payments:ref:refs/heads/main\n" +
			"  cardsign events tail --from 1 --json --type 'dev.cardsign.key.*' --server cardsign.internal:7700 --token-file auditor.token > key-events.jsonl\n" +
			"  cardsign events secret --out /etc/cardsignd/webhook-secret   # for events.sinks[].secret_files and the receiver",
	}
	c.subcommands = true
	c.subs = []subcommand{
		{"tail", "the events of the audit log's records, from --from SEQ (default: the last 10), then with --follow each new one (role auditor)"},
		{"secret", "a new Standard Webhooks secret (whsec_…) for a webhook sink and its receiver"},
	}
	c.daemon = &daemonFlags{timeout: 30 * time.Second, timeoutUsage: "deadline of tail without --follow"}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		o := &eventsOptions{}
		fs.Int64Var(&o.from, "from", 0, "tail: the first record's sequence number (1: the whole log)")
		fs.IntVar(&o.last, "last", 0, "tail: without --from, how many of the latest records (default 10)")
		fs.BoolVar(&o.follow, "follow", false, "tail: then wait for new records and print each as it is committed, until interrupted")
		fs.Var(&o.types, "type", "tail: only events whose type matches this pattern (* and ?; repeatable), e.g. dev.cardsign.key.*")
		fs.BoolVar(&o.asJSON, "json", false, "tail: each event as its CloudEvent JSON, one per line")
		fs.StringVar(&o.out, "out", "", "secret: write the secret to this new file (mode 0600) rather than standard output")
		return o.run
	}
	return c
}

type eventsOptions struct {
	from   int64
	last   int
	follow bool
	types  stringsFlag
	asJSON bool
	out    string
}

func (o *eventsOptions) run(ctx context.Context, in *call) int {
	switch {
	case in.sub != "tail" && in.sub != "secret":
		return in.usageError("unknown subcommand %q", in.sub)
	case len(in.pos) > 0:
		return in.usageError("unexpected argument %q", in.pos[0])
	case in.sub == "secret" && (o.from != 0 || o.last != 0 || o.follow || len(o.types) > 0 || o.asJSON):
		return in.usageError("--from, --last, --follow, --type and --json are for tail")
	case in.sub == "tail" && o.out != "":
		return in.usageError("--out is for secret")
	case o.from < 0:
		return in.usageError("--from must be 1 or more (1: the whole log)")
	case o.from > 0 && o.last != 0:
		return in.usageError("--from and --last exclude each other")
	case o.last < 0 || o.last > 10000:
		return in.usageError("--last must be 0 (the default, 10) to 10000")
	}
	if in.sub == "secret" {
		return eventsSecret(in, o.out)
	}
	if _, err := events.NewFilter(o.types); err != nil {
		return in.usageError("--type: %s", escapeText(strings.ReplaceAll(err.Error(), "types[", "--type[")))
	}
	return o.tail(ctx, in)
}

// eventsSecret makes a Standard Webhooks secret: 32 random bytes.
func eventsSecret(in *call, out string) int {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail
	secret := "whsec_" + base64.StdEncoding.EncodeToString(b) + "\n"
	if out == "" {
		fmt.Fprint(in.stdout, secret)
		return exitOK
	}
	if err := writeSecret(out, secret); err != nil {
		fmt.Fprintf(in.stderr, "cardsign events secret: %s\n", escapeText(err.Error()))
		return exitFail
	}
	fmt.Fprintf(in.stderr, "cardsign events secret: wrote %s (mode 0600): name it in events.sinks[].secret_files and give it to the receiver\n", escapeValue(out))
	return exitOK
}

// tail streams the events; with --follow, a broken stream (a replica that
// stopped) is resumed after the last event printed.
func (o *eventsOptions) tail(ctx context.Context, in *call) int {
	cl, code, ok := in.dial()
	if !ok {
		return code
	}
	defer cl.close()
	api := pb.NewEventServiceClient(cl.conn)
	req := &pb.TailEventsRequest{FromSequence: o.from, Last: int32(o.last), Follow: o.follow, Types: o.types}
	for {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if !o.follow {
			cctx, cancel = cl.ctx(ctx)
		}
		last, err := o.stream(cctx, api, req, in.stdout)
		cancel()
		switch {
		case err == nil || ctx.Err() != nil:
			return exitOK
		case o.follow && (status.Code(err) == codes.Unavailable || status.Code(err) == codes.Internal):
			if last > 0 {
				req.FromSequence, req.Last = last+1, 0
				fmt.Fprintf(in.stderr, "cardsign events tail: %s; resuming after record %d\n", describe(err), last)
			} else {
				fmt.Fprintf(in.stderr, "cardsign events tail: %s; trying again\n", describe(err))
			}
			select {
			case <-ctx.Done():
				return exitOK
			case <-time.After(time.Second):
			}
		default:
			fmt.Fprintf(in.stderr, "cardsign events tail: %s\n", describe(err))
			return exitFail
		}
	}
}

// stream prints one stream's events and returns the last one's sequence
// number.
func (o *eventsOptions) stream(ctx context.Context, api pb.EventServiceClient, req *pb.TailEventsRequest, w io.Writer) (int64, error) {
	s, err := api.TailEvents(ctx, req)
	if err != nil {
		return 0, err
	}
	var last int64
	for {
		ev, err := s.Recv()
		if err == io.EOF {
			return last, nil
		}
		if err != nil {
			return last, err
		}
		last = ev.GetSequence()
		if ev.GetId() == "" {
			continue // a progress mark: read up to here
		}
		if o.asJSON {
			// One line per event whatever the server sent: compacted (a raw
			// newline would split it), then escaped for the terminal.
			var b bytes.Buffer
			if err := json.Compact(&b, ev.GetEvent()); err != nil {
				return last, fmt.Errorf("record %d: the server sent an event that is not JSON: %w", ev.GetSequence(), err)
			}
			fmt.Fprintf(w, "%s\n", escapeJSON(b.Bytes()))
			continue
		}
		fmt.Fprintln(w, eventLine(ev))
	}
}

// eventLine is the human form of an event: sequence, time, type, subject,
// caller, and why for a refusal. Every value came from a card or a caller:
// printed escaped.
func eventLine(ev *pb.TailEventsResponse) string {
	var e events.Event
	if err := json.Unmarshal(ev.GetEvent(), &e); err != nil {
		return fmt.Sprintf("%d  %s  (unreadable event: %s)", ev.GetSequence(), escapeValue(ev.GetType()), escapeText(err.Error()))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d  %s  %s  %q  caller %s", ev.GetSequence(), escapeValue(e.Time), escapeValue(strings.TrimPrefix(e.Type, events.TypePrefix)),
		e.Subject, escapeValue(e.Data.Caller))
	if e.Data.Reason != "" {
		fmt.Fprintf(&b, "  reason %q", e.Data.Reason)
	}
	return escapeText(b.String())
}
