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
		summary: "List, show and remove the agents in cardsignd's card registry, or pull an agent's current signed card into a file.",
		usage:   "list [--json] | show ID [--version V] | history ID | remove ID | pull ID --out FILE [--allow-revoked] | revoke ID [--version V] --reason TEXT   (all take --server ADDR)",
		example: "  cardsign sign --server 127.0.0.1:7700 --register --agent payments agent-card.json > /dev/null\n" +
			"  cardsign agents list --server 127.0.0.1:7700\n" +
			"  payments  version 3  private  kids k-2026-11-23a  stored 2026-11-23T17:40:02Z  by token:ci\n" +
			"  cardsign agents show payments > payments-card.json\n" +
			"  cardsign agents pull payments --out /srv/www/.well-known/agent-card.json   # from cron or a sidecar: replaced atomically, only when it changed\n" +
			"  cardsign agents revoke payments --version 2 --reason \"leaked with a staging URL\"   # verifiers refuse that card; its key stays good",
	}
	c.run = func(ctx context.Context, e env, args []string) int {
		if code, done := c.subcommandHelp(e, args); done {
			return code
		}
		sub := args[0]
		fs := flag.NewFlagSet(c.name+" "+sub, flag.ContinueOnError)
		conn := addConnFlags(fs)
		timeout := fs.Duration("timeout", 30*time.Second, "deadline of each call")
		asJSON := fs.Bool("json", false, "list, history: one JSON object per line")
		version := fs.Int64("version", 0, "show, revoke: this version (default the newest)")
		reason := fs.String("reason", "", "revoke: why (required; verifiers show it)")
		out := fs.String("out", "", "pull: the file to write the signed card to (required)")
		allowRevoked := fs.Bool("allow-revoked", false, "pull: write the card even when it is revoked (verifiers that read the revocation document refuse it)")
		pos, code, done := c.parse(e, fs, args[1:])
		if done {
			return code
		}
		wantID := map[string]bool{"show": true, "history": true, "remove": true, "pull": true, "revoke": true}
		switch {
		case sub != "list" && !wantID[sub]:
			return c.usageError(e, "unknown subcommand %q", sub)
		case sub == "list" && len(pos) > 0:
			return c.usageError(e, "unexpected argument %q", pos[0])
		case wantID[sub] && len(pos) != 1:
			return c.usageError(e, "%s wants one agent id, got %d arguments", sub, len(pos))
		case sub == "pull" && *out == "":
			return c.usageError(e, "pull needs --out FILE")
		case sub != "pull" && *out != "":
			return c.usageError(e, "--out is for pull")
		case sub != "pull" && *allowRevoked:
			return c.usageError(e, "--allow-revoked is for pull")
		case sub != "show" && sub != "revoke" && *version != 0:
			return c.usageError(e, "--version is for show and revoke")
		case sub == "revoke" && strings.TrimSpace(*reason) == "":
			return c.usageError(e, "revoke needs --reason TEXT: verifiers show it")
		case sub != "revoke" && *reason != "":
			return c.usageError(e, "--reason is for revoke")
		}
		cl, err := dial(e, conn, *timeout)
		if err != nil {
			fmt.Fprintf(e.stderr, "cardsign %s: %v\n", c.name, err)
			return exitUsage
		}
		defer cl.close()
		fail := func(err error) int {
			fmt.Fprintf(e.stderr, "cardsign %s %s: %s\n", c.name, sub, describe(err))
			return exitFail
		}
		cctx, cancel := cl.ctx(ctx)
		defer cancel()
		switch sub {
		case "list":
			for after := ""; ; {
				res, err := cl.agents.ListAgents(cctx, &pb.ListAgentsRequest{AfterAgentId: after})
				if err != nil {
					return fail(err)
				}
				for _, a := range res.GetAgents() {
					printAgent(e.stdout, a, *asJSON)
				}
				if after = res.GetNextAfterAgentId(); after == "" {
					return exitOK
				}
			}
		case "history":
			res, err := cl.agents.AgentHistory(cctx, &pb.AgentHistoryRequest{AgentId: pos[0]})
			if err != nil {
				return fail(err)
			}
			for _, a := range res.GetVersions() {
				printAgent(e.stdout, a, *asJSON)
			}
			return exitOK
		case "revoke":
			res, err := cl.agents.RevokeAgentCard(cctx, &pb.RevokeAgentCardRequest{AgentId: pos[0], Version: *version, Reason: *reason})
			if err != nil {
				return fail(err)
			}
			fmt.Fprintf(e.stdout, "revoked agent %s version %d (canonical SHA-256 %s) at %s: %s\n", escapeValue(res.GetAgentId()), res.GetVersion(),
				hex.EncodeToString(res.GetCanonicalSha256()), res.GetRevokedAt().AsTime().UTC().Format(time.RFC3339), escapeText(res.GetReason()))
			fmt.Fprintln(e.stderr, "cardsign agents revoke: the signed revocation document lists it from its next issue (within seconds); verifiers that fetch it refuse the card")
			return exitOK
		case "remove":
			if _, err := cl.agents.RemoveAgent(cctx, &pb.RemoveAgentRequest{AgentId: pos[0]}); err != nil {
				return fail(err)
			}
			fmt.Fprintf(e.stderr, "cardsign agents remove: removed agent %s and its history from the registry\n", escapeValue(pos[0]))
			return exitOK
		}
		res, err := cl.agents.GetAgentCard(cctx, &pb.GetAgentCardRequest{AgentId: pos[0], Version: *version})
		if err != nil {
			return fail(err)
		}
		card := res.GetCard()
		revoked := ""
		if card.GetRevokedAt() != nil {
			revoked = fmt.Sprintf("%s version %d was revoked at %s: %s", escapeValue(card.GetAgentId()), card.GetVersion(),
				card.GetRevokedAt().AsTime().UTC().Format(time.RFC3339), escapeText(card.GetRevokeReason()))
		}
		if sub == "show" {
			if revoked != "" {
				fmt.Fprintf(e.stderr, "cardsign agents show: note: %s\n", revoked)
			}
			// On a terminal the card is read, not saved: C1 controls and bidi
			// overrides its strings may hold are shown escaped.
			showDocument(e.stdout, card.GetSignedCard(), isTerminal(e.stdout))
			return exitOK
		}
		if revoked != "" {
			// Publishing a revoked card would have every verifier that
			// reads the revocation document refuse the agent: the file is
			// left as it was, unless the operator means it.
			if !*allowRevoked {
				fmt.Fprintf(e.stderr, "cardsign agents pull: refusing to write %s: %s; sign and register a new version, or pass --allow-revoked to write it anyway\n", *out, revoked)
				return exitFail
			}
			fmt.Fprintf(e.stderr, "cardsign agents pull: warning: %s; writing it because of --allow-revoked\n", revoked)
		}
		changed, err := writeAtomically(*out, card.GetSignedCard())
		if err != nil {
			fmt.Fprintf(e.stderr, "cardsign agents pull: %v\n", err)
			return exitFail
		}
		what := "unchanged"
		if changed {
			what = "written"
		}
		fmt.Fprintf(e.stderr, "cardsign agents pull: %s version %d: %s %s\n", escapeValue(card.GetAgentId()), card.GetVersion(), *out, what)
		return exitOK
	}
	return c
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
