package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
)

func keysCmd() command {
	c := command{
		name:    "keys",
		summary: "Administer cardsignd's signing keys: list, create, import, rotate, activate, retire, revoke.",
		usage: "list | create [--alg ALG] | import URI [--alg ALG] [--kid KID] | rotate [--alg ALG] [--prepublish D] |\n" +
			"       activate KID | retire KID [--force] | revoke KID [--reason CODE[: NOTE]] [--force]\n" +
			"       (all take " + connUsage + ")",
		example: "  cardsign keys rotate --prepublish 1h --server 127.0.0.1:7700\n  cardsign keys list\n" +
			"  cardsign keys list --server cardsign.internal:7700 --ca-file ca.pem --cert-file admin.pem --key-file admin-key.pem\n  cardsign keys revoke 3kP… --reason \"key-compromise: laptop stolen\"",
	}
	c.run = func(ctx context.Context, e env, args []string) int {
		if code, done := c.subcommandHelp(e, args); done {
			return code
		}
		sub := args[0]
		fs := flag.NewFlagSet(c.name+" "+sub, flag.ContinueOnError)
		conn := addConnFlags(fs)
		timeout := fs.Duration("timeout", 30*time.Second, "call deadline")
		alg := fs.String("alg", "", "JOSE algorithm of the new key (default: the daemon's keys.default_alg)")
		kid := fs.String("kid", "", "import: kid instead of the RFC 7638 thumbprint")
		prepublish := fs.Duration("prepublish", -1, "rotate: time from now until the new key signs (default: the daemon's keys.prepublish; 0s activates at once)")
		reason := fs.String("reason", "", "revoke: why, listed in the revocation document: CODE or \"CODE: note\" (codes: unspecified, key-compromise, superseded, cessation-of-operation, affiliation-changed, privilege-withdrawn; note ≤ 200 characters)")
		force := fs.Bool("force", false, "retire/revoke: allow stopping the active key, which stops signing until another key is active")
		pos, code, done := c.parse(e, fs, args[1:])
		if done {
			return code
		}
		wantArgs := map[string]int{"list": 0, "create": 0, "rotate": 0, "import": 1, "activate": 1, "retire": 1, "revoke": 1}
		n, known := wantArgs[sub]
		if !known {
			return c.usageError(e, "unknown subcommand %q", sub)
		}
		if len(pos) != n {
			return c.usageError(e, "%s takes %d argument(s), got %d", sub, n, len(pos))
		}
		cl, err := dial(e, conn, *timeout)
		if err != nil {
			fmt.Fprintf(e.stderr, "cardsign %s: %v\n", c.name, err)
			return exitUsage
		}
		defer cl.close()
		cctx, cancel := cl.ctx(ctx)
		defer cancel()
		var keys []*pb.Key
		switch sub {
		case "list":
			var r *pb.ListKeysResponse
			if r, err = cl.keys.ListKeys(cctx, &pb.ListKeysRequest{}); err == nil {
				keys = r.GetKeys()
			}
		case "create":
			var r *pb.CreateKeyResponse
			if r, err = cl.keys.CreateKey(cctx, &pb.CreateKeyRequest{Alg: *alg}); err == nil {
				keys = []*pb.Key{r.GetKey()}
			}
		case "import":
			var r *pb.ImportKeyResponse
			if r, err = cl.keys.ImportKey(cctx, &pb.ImportKeyRequest{Uri: pos[0], Alg: *alg, Kid: *kid}); err == nil {
				keys = []*pb.Key{r.GetKey()}
			}
		case "rotate":
			req := &pb.RotateKeyRequest{Alg: *alg}
			if *prepublish >= 0 {
				// Rounded up: a sub-second wait must not become "activate now".
				secs := int64((*prepublish + time.Second - 1) / time.Second)
				req.PrepublishSeconds = &secs
			}
			var r *pb.RotateKeyResponse
			if r, err = cl.keys.RotateKey(cctx, req); err == nil {
				keys = []*pb.Key{r.GetKey()}
			}
		case "activate":
			var r *pb.ActivateKeyResponse
			if r, err = cl.keys.ActivateKey(cctx, &pb.ActivateKeyRequest{Kid: pos[0]}); err == nil {
				keys = []*pb.Key{r.GetKey()}
			}
		case "retire":
			var r *pb.RetireKeyResponse
			if r, err = cl.keys.RetireKey(cctx, &pb.RetireKeyRequest{Kid: pos[0], Force: *force}); err == nil {
				keys = []*pb.Key{r.GetKey()}
			}
		case "revoke":
			var r *pb.RevokeKeyResponse
			if r, err = cl.keys.RevokeKey(cctx, &pb.RevokeKeyRequest{Kid: pos[0], Reason: *reason, Force: *force}); err == nil {
				keys = []*pb.Key{r.GetKey()}
			}
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "cardsign keys %s: %s\n", sub, describe(err))
			return exitFail
		}
		printKeys(e.stdout, keys)
		return exitOK
	}
	return c
}

// printKeys prints keys as a table, one line per key.
func printKeys(w io.Writer, keys []*pb.Key) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KID\tALG\tSTATE\tPUBLISHED\tACTIVATES\tRETIRES\tEXPIRES\tREVOKED\tURI")
	for _, k := range keys {
		// Kids and URIs recorded before they were validated may hold
		// anything: a tab or newline would shift the table.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", escapeValue(k.GetKid()), escapeValue(k.GetAlg()), escapeValue(k.GetState()),
			tsText(k.GetPublishAt()), tsText(k.GetActivateAt()), tsText(k.GetRetireAt()), tsText(k.GetExpireAt()),
			escapeText(revokedText(k)), escapeValue(k.GetUri()))
	}
	tw.Flush()
}

func tsText(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

func revokedText(k *pb.Key) string {
	if k.GetRevokedAt() == nil {
		return "-"
	}
	return tsText(k.GetRevokedAt()) + " (" + strings.ReplaceAll(k.GetRevokeReason(), "\t", " ") + ")"
}
