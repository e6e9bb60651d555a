package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
)

func agentsCmd() command {
	c := command{
		name:    "agents",
		long:    agentsLong,
		summary: "List, show and remove the agents in cardsignd's card registry, or pull an agent's current signed card into a file.",
		usage:   "list [--json] | show ID [--version V] | history ID | remove ID | pull ID --out FILE [--allow-revoked] | revoke ID [--version V] --reason TEXT   (all take --server ADDR)",
		example: "  cardsign sign --server 127.0.0.1:7700 --register --agent payments agent-card.json > /dev/null\n" +
			"  cardsign agents list --server 127.0.0.1:7700\n" +
			"  payments  version 3  private  kids k-2026-11-23a  stored 2026-11-23T17:40:02Z  by token:ci\n" +
			"  cardsign agents show payments > payments-card.json\n" +
			"  cardsign agents pull payments --out /srv/www/.well-known/agent-card.json   # from cron or a sidecar: replaced atomically, only when it changed\n" +
			"  cardsign agents revoke payments --version 2 --reason \"leaked with a staging URL\"   # verifiers refuse that card; its key stays good",
	}
	c.subcommands = true
	c.subs = []subcommand{
		{"list", "every registered agent's newest version: id, version, visibility, kids, when, by whom, audit record"},
		{"show", "a version's signed card, as served (a revoked one with a note on standard error)"},
		{"history", "every kept version of an agent, newest first"},
		{"remove", "delete an agent and its history (admin)"},
		{"pull", "write the newest signed card to --out through a temporary file and a rename, only when it changed; a revoked card is not written (exit 1) unless --allow-revoked"},
		{"revoke", "revoke one version of a card with --reason (admin): verifiers that read the revocation document refuse it; its key stays good"},
	}
	c.daemon = &daemonFlags{timeout: 30 * time.Second, timeoutUsage: "deadline of each call"}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		o := &agentsOptions{}
		fs.BoolVar(&o.asJSON, "json", false, "list, history: one JSON object per line")
		fs.Int64Var(&o.version, "version", 0, "show, revoke: this version (default the newest)")
		fs.StringVar(&o.reason, "reason", "", "revoke: why (required; verifiers show it)")
		fs.StringVar(&o.out, "out", "", "pull: the file to write the signed card to (required)")
		fs.BoolVar(&o.allowRevoked, "allow-revoked", false, "pull: write the card even when it is revoked (verifiers that read the revocation document refuse it)")
		return o.run
	}
	return c
}

// agentsOptions are the flags of the agents subcommands.
type agentsOptions struct {
	asJSON, allowRevoked bool
	version              int64
	reason, out          string
}

// agentsCall is one agents subcommand's call to cardsignd.
type agentsCall struct {
	*call
	o   *agentsOptions
	cl  *client
	ctx context.Context
}

// run checks the subcommand's arguments, dials cardsignd and makes the call.
func (o *agentsOptions) run(ctx context.Context, in *call) int {
	sub, pos := in.sub, in.pos
	wantID := map[string]bool{"show": true, "history": true, "remove": true, "pull": true, "revoke": true}
	switch {
	case sub != "list" && !wantID[sub]:
		return in.usageError("unknown subcommand %q", sub)
	case sub == "list" && len(pos) > 0:
		return in.usageError("unexpected argument %q", pos[0])
	case wantID[sub] && len(pos) != 1:
		return in.usageError("%s wants one agent id, got %d arguments", sub, len(pos))
	case sub == "pull" && o.out == "":
		return in.usageError("pull needs --out FILE")
	case sub != "pull" && o.out != "":
		return in.usageError("--out is for pull")
	case sub != "pull" && o.allowRevoked:
		return in.usageError("--allow-revoked is for pull")
	case sub != "show" && sub != "revoke" && o.version != 0:
		return in.usageError("--version is for show and revoke")
	case sub == "revoke" && strings.TrimSpace(o.reason) == "":
		return in.usageError("revoke needs --reason TEXT: verifiers show it")
	case sub != "revoke" && o.reason != "":
		return in.usageError("--reason is for revoke")
	}
	cl, code, ok := in.session(ctx)
	if !ok {
		return code
	}
	defer cl.close()
	cctx := cl.ctx
	a := &agentsCall{call: in, o: o, cl: cl.client, ctx: cctx}
	switch sub {
	case "list":
		return a.list()
	case "history":
		return a.history()
	case "revoke":
		return a.revoke()
	case "remove":
		return a.remove()
	}
	return a.getCard()
}

// fail reports a failed call and returns exitFail.
func (a *agentsCall) fail(err error) int {
	fmt.Fprintf(a.stderr, "cardsign %s %s: %s\n", a.c.name, a.sub, describe(err))
	return exitFail
}

// list prints every agent, page by page.
func (a *agentsCall) list() int {
	for after := ""; ; {
		res, err := a.cl.agents.ListAgents(a.ctx, &pb.ListAgentsRequest{AfterAgentId: after})
		if err != nil {
			return a.fail(err)
		}
		for _, ag := range res.GetAgents() {
			printAgent(a.stdout, ag, a.o.asJSON)
		}
		if after = res.GetNextAfterAgentId(); after == "" {
			return exitOK
		}
	}
}

// history prints every version of one agent.
func (a *agentsCall) history() int {
	res, err := a.cl.agents.AgentHistory(a.ctx, &pb.AgentHistoryRequest{AgentId: a.pos[0]})
	if err != nil {
		return a.fail(err)
	}
	for _, ag := range res.GetVersions() {
		printAgent(a.stdout, ag, a.o.asJSON)
	}
	return exitOK
}

// revoke revokes one version of an agent's card.
func (a *agentsCall) revoke() int {
	res, err := a.cl.agents.RevokeAgentCard(a.ctx, &pb.RevokeAgentCardRequest{AgentId: a.pos[0], Version: a.o.version, Reason: a.o.reason})
	if err != nil {
		return a.fail(err)
	}
	fmt.Fprintf(a.stdout, "revoked agent %s version %d (canonical SHA-256 %s) at %s: %s\n", escapeValue(res.GetAgentId()), res.GetVersion(),
		hex.EncodeToString(res.GetCanonicalSha256()), res.GetRevokedAt().AsTime().UTC().Format(time.RFC3339), escapeText(res.GetReason()))
	fmt.Fprintln(a.stderr, "cardsign agents revoke: the signed revocation document lists it from its next issue (within seconds); verifiers that fetch it refuse the card")
	return exitOK
}

// remove removes an agent and its history.
func (a *agentsCall) remove() int {
	if _, err := a.cl.agents.RemoveAgent(a.ctx, &pb.RemoveAgentRequest{AgentId: a.pos[0]}); err != nil {
		return a.fail(err)
	}
	fmt.Fprintf(a.stderr, "cardsign agents remove: removed agent %s and its history from the registry\n", escapeValue(a.pos[0]))
	return exitOK
}

// getCard fetches an agent's card, then shows it (show) or writes it to
// --out (pull).
func (a *agentsCall) getCard() int {
	res, err := a.cl.agents.GetAgentCard(a.ctx, &pb.GetAgentCardRequest{AgentId: a.pos[0], Version: a.o.version})
	if err != nil {
		return a.fail(err)
	}
	card := res.GetCard()
	revoked := ""
	if card.GetRevokedAt() != nil {
		revoked = fmt.Sprintf("%s version %d was revoked at %s: %s", escapeValue(card.GetAgentId()), card.GetVersion(),
			card.GetRevokedAt().AsTime().UTC().Format(time.RFC3339), escapeText(card.GetRevokeReason()))
	}
	if a.sub == "show" {
		if revoked != "" {
			fmt.Fprintf(a.stderr, "cardsign agents show: note: %s\n", revoked)
		}
		// On a terminal the card is read, not saved: C1 controls and bidi
		// overrides its strings may hold are shown escaped.
		showDocument(a.stdout, card.GetSignedCard(), isTerminal(a.stdout))
		return exitOK
	}
	return a.pull(card.GetSignedCard(), card.GetAgentId(), card.GetVersion(), revoked)
}

// pull writes an agent's signed card to --out, refusing a revoked one
// unless --allow-revoked.
func (a *agentsCall) pull(signed []byte, agentID string, version int64, revoked string) int {
	if revoked != "" {
		// Publishing a revoked card would have every verifier that
		// reads the revocation document refuse the agent: the file is
		// left as it was, unless the operator means it.
		if !a.o.allowRevoked {
			fmt.Fprintf(a.stderr, "cardsign agents pull: refusing to write %s: %s; sign and register a new version, or pass --allow-revoked to write it anyway\n", a.o.out, revoked)
			return exitFail
		}
		fmt.Fprintf(a.stderr, "cardsign agents pull: warning: %s; writing it because of --allow-revoked\n", revoked)
	}
	changed, err := writeAtomically(a.o.out, signed)
	if err != nil {
		fmt.Fprintf(a.stderr, "cardsign agents pull: %v\n", err)
		return exitFail
	}
	what := "unchanged"
	if changed {
		what = "written"
	}
	fmt.Fprintf(a.stderr, "cardsign agents pull: %s version %d: %s %s\n", escapeValue(agentID), version, a.o.out, what)
	return exitOK
}

// printAgent prints one registry entry: a line of text, or a JSON object.
func printAgent(w io.Writer, a *pb.AgentCard, asJSON bool) {
	stored := a.GetStoredAt().AsTime().UTC().Format(time.RFC3339)
	if asJSON {
		b, _ := json.Marshal(map[string]any{
			"agent_id": a.GetAgentId(), "version": a.GetVersion(), "visibility": a.GetVisibility(), "kids": a.GetKids(),
			"canonical_sha256": hex.EncodeToString(a.GetCanonicalSha256()), "caller": a.GetCaller(),
			"audit_sequence": a.GetAuditSequence(), "stored_at": stored,
		})
		fmt.Fprintf(w, "%s\n", escapeJSON(b))
		return
	}
	fmt.Fprintf(w, "%s  version %d  %s  kids %s  stored %s  by %s  audit %d\n", escapeValue(a.GetAgentId()), a.GetVersion(),
		escapeValue(a.GetVisibility()), escapeValues(a.GetKids()), stored, escapeValue(a.GetCaller()), a.GetAuditSequence())
}

// writeAtomically replaces name with data through a temporary file in the
// same directory and a rename, so a web server reading it never sees half a
// card; a file that already holds data is left alone (changed is false).
// The file is world-readable (0644): it is what an agent serves.
func writeAtomically(name string, data []byte) (changed bool, err error) {
	if old, err := os.ReadFile(name); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return false, err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename, nothing to remove
	if _, err := f.Write(data); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, name); err != nil {
		return false, err
	}
	return true, nil
}
