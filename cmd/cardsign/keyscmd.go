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
		long:    keysLong,
		summary: "Administer cardsignd's signing keys: list, create, import, rotate, activate, retire, revoke.",
		usage: "list | create [--alg ALG] | import URI [--alg ALG] [--kid KID] | rotate [--alg ALG] [--prepublish D] |\n" +
			"       activate KID | retire KID [--force] | revoke KID [--reason CODE[: NOTE]] [--force]\n" +
			"       (all take " + connUsage + ")",
		example: "  cardsign keys rotate --prepublish 1h --server 127.0.0.1:7700\n  cardsign keys list\n" +
			"  cardsign keys list --server cardsign.internal:7700 --ca-file ca.pem --cert-file admin.pem --key-file admin-key.pem\n  cardsign keys revoke 3kP… --reason \"key-compromise: laptop stolen\"",
	}
	c.subcommands = true
	c.subs = []subcommand{
		{"list", "every key: kid, alg, state, publish/activate/retire/expire/revoke times, URI (secrets redacted)"},
		{"create", "a new pending key in the daemon's backend (keys.backend), with --alg"},
		{"import", "record an existing key URI (e.g. file:/etc/cardsign/k.pem) as pending; the URI must name one key for good (no AWS alias) and carry no secret (no pin-value)"},
		{"rotate", "a new key, published now, that activates after --prepublish (default keys.prepublish); the active one then retires"},
		{"activate", "make a pending key active now (skipping the wait that lets cached JWKS learn it)"},
		{"retire", "stop a key signing; it stays published for keys.retire_grace (the active key only with --force)"},
		{"revoke", "unpublish a key now and list it in the revocation document with --reason (the active key only with --force)"},
	}
	c.daemon = &daemonFlags{timeout: 30 * time.Second, timeoutUsage: "call deadline"}
	c.flags = func(fs *flag.FlagSet, sub string) runFunc {
		alg := fs.String("alg", "", "JOSE algorithm of the new key (default: the daemon's keys.default_alg)")
		kid := fs.String("kid", "", "import: kid instead of the RFC 7638 thumbprint")
		prepublish := fs.Duration("prepublish", -1, "rotate: time from now until the new key signs (default: the daemon's keys.prepublish; 0s activates at once)")
		reason := fs.String("reason", "", "revoke: why, listed in the revocation document: CODE or \"CODE: note\" (codes: unspecified, key-compromise, superseded, cessation-of-operation, affiliation-changed, privilege-withdrawn; note ≤ 200 characters)")
		force := fs.Bool("force", false, "retire/revoke: allow stopping the active key, which stops signing until another key is active")
		return func(ctx context.Context, in *call) int {
			e, pos := in.env, in.pos
			wantArgs := map[string]int{"list": 0, "create": 0, "rotate": 0, "import": 1, "activate": 1, "retire": 1, "revoke": 1}
			n, known := wantArgs[sub]
			if !known {
				return c.usageError(e, "unknown subcommand %q", sub)
			}
			if len(pos) != n {
				return c.usageError(e, "%s takes %d argument(s), got %d", sub, n, len(pos))
			}
			cl, code, ok := in.session(ctx)
			if !ok {
				return code
			}
			defer cl.close()
			cctx := cl.ctx
			keys, err := keysCall(cctx, cl.client, sub, pos, keysOptions{alg: *alg, kid: *kid, prepublish: *prepublish, reason: *reason, force: *force})
			if err != nil {
				fmt.Fprintf(e.stderr, "cardsign keys %s: %s\n", sub, describe(err))
				return exitFail
			}
			printKeys(e.stdout, keys)
			return exitOK
		}
	}
	return c
}

// keysOptions are the flags of the keys subcommands.
type keysOptions struct {
	alg, kid, reason string
	prepublish       time.Duration
	force            bool
}

// keysCall makes the key administration call of subcommand sub and returns
// the keys it answers with.
func keysCall(ctx context.Context, cl *client, sub string, pos []string, o keysOptions) ([]*pb.Key, error) {
	var keys []*pb.Key
	var err error
	switch sub {
	case "list":
		var r *pb.ListKeysResponse
		if r, err = cl.keys.ListKeys(ctx, &pb.ListKeysRequest{}); err == nil {
			keys = r.GetKeys()
		}
	case "create":
		var r *pb.CreateKeyResponse
		if r, err = cl.keys.CreateKey(ctx, &pb.CreateKeyRequest{Alg: o.alg}); err == nil {
			keys = []*pb.Key{r.GetKey()}
		}
	case "import":
		var r *pb.ImportKeyResponse
		if r, err = cl.keys.ImportKey(ctx, &pb.ImportKeyRequest{Uri: pos[0], Alg: o.alg, Kid: o.kid}); err == nil {
			keys = []*pb.Key{r.GetKey()}
		}
	case "rotate":
		req := &pb.RotateKeyRequest{Alg: o.alg}
		if o.prepublish >= 0 {
			// Rounded up: a sub-second wait must not become "activate now".
			secs := int64((o.prepublish + time.Second - 1) / time.Second)
			req.PrepublishSeconds = &secs
		}
		var r *pb.RotateKeyResponse
		if r, err = cl.keys.RotateKey(ctx, req); err == nil {
			keys = []*pb.Key{r.GetKey()}
		}
	case "activate":
		var r *pb.ActivateKeyResponse
		if r, err = cl.keys.ActivateKey(ctx, &pb.ActivateKeyRequest{Kid: pos[0]}); err == nil {
			keys = []*pb.Key{r.GetKey()}
		}
	case "retire":
		var r *pb.RetireKeyResponse
		if r, err = cl.keys.RetireKey(ctx, &pb.RetireKeyRequest{Kid: pos[0], Force: o.force}); err == nil {
			keys = []*pb.Key{r.GetKey()}
		}
	case "revoke":
		var r *pb.RevokeKeyResponse
		if r, err = cl.keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Kid: pos[0], Reason: o.reason, Force: o.force}); err == nil {
			keys = []*pb.Key{r.GetKey()}
		}
	}
	return keys, err
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
