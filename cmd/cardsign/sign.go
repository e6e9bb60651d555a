package main

import (
	"context"
	"io/fs"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/signer"
)

// keyFlags are the flags that name signing keys.
type keyFlags struct {
	uris stringsFlag
	kid  string
	alg  string
}

func (k *keyFlags) register(fs *flag.FlagSet, what string) {
	fs.Var(&k.uris, "key", "key URI: file:signing-key.pem, pkcs11:token=T;object=O (module in $"+pkcs11ModuleEnv+", PIN in $"+pkcs11PINEnv+
		"), gcpkms://projects/…/cryptoKeyVersions/N, awskms:///KEY-ARN, azurekv://VAULT.vault.azure.net/keys/NAME/VERSION or hashivault://KEY/VERSION "+
		"(each configured from its provider's environment, as cosign: docs/keys.md); repeat for several keys "+what)
	fs.StringVar(&k.kid, "kid", "", "key id to use instead of the RFC 7638 thumbprint (only with one --key)")
	fs.StringVar(&k.alg, "alg", "", "JOSE algorithm instead of the key's default, e.g. PS256 for an RSA key (only with one --key)")
}

// open opens every --key through the backend registry.
func (k *keyFlags) open(ctx context.Context) ([]signer.Key, error) {
	if len(k.uris) == 0 {
		return nil, errors.New("--key is required")
	}
	if len(k.uris) > 1 && (k.kid != "" || k.alg != "") {
		return nil, errors.New("--kid and --alg apply to a single --key")
	}
	reg, err := keyBackends()
	if err != nil {
		return nil, err
	}
	var opts backends.OpenOptions
	opts.KID = k.kid
	if k.alg != "" {
		a, err := jose.ParseAlg(k.alg)
		if err != nil {
			return nil, err
		}
		opts.Alg = a
	}
	var keys []signer.Key
	for _, uri := range k.uris {
		key, err := reg.Open(ctx, uri, opts)
		if err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// signExample is sign's example: offline with a key file, through one
// cardsignd or several replicas, and into the registry.
const signExample = "  cardsign keygen --alg ES256 --out signing-key.pem\n  cardsign sign --key file:signing-key.pem --jku https://keys.example.com/jwks.json agent-card.json > signed.json\n  cardsign sign --server 127.0.0.1:7700 agent-card.json > signed.json   # or set CARDSIGN_SERVER\n" +
	"  cardsign sign --server cardsign.internal:7700 --ca-file ca.pem --token-file release.token agent-card.json > signed.json\n" +
	"  cardsign sign --server cs1.internal:7700,cs2.internal:7700,cs3.internal:7700 --ca-file ca.pem --token-file release.token agent-card.json > signed.json   # three replicas: balanced, failed over\n" +
	"  cardsign sign --server cardsign.internal:7700 --tls --register --agent payments --visibility public agent-card.json > signed.json   # kept in the registry"

func signCmd() command {
	c := command{
		name:    "sign",
		long:    signLong,
		summary: "Sign a card, offline with your keys (--key) or through cardsignd (--server), and print the signed card.",
		usage: "(--key URI [--kid KID] [--jku URL] | --server ADDR[,ADDR...] [--ca-file FILE | --tls] [--cert-file FILE --key-file FILE] [--server-name NAME] [--token-file FILE])\n" +
			"       [--profile spec|sdk|python-ascii|both] [--strip-unknown] [--keep-signatures] [--register [--agent ID] [--visibility public|private]] [--approval ID | --wait [--wait-timeout D]] [--result-file FILE] FILE|-",
		example: signExample,
	}
	c.daemon = &daemonFlags{timeout: 30 * time.Second, timeoutUsage: "deadline of the signing call to cardsignd"}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		var kf keyFlags
		kf.register(fs, "(required)")
		jku := fs.String("jku", "", "public JWKS URL to put in the protected header as a hint for verifiers (https)")
		profile := fs.String("profile", "", "canonical profiles to sign: spec, sdk, python-ascii, or both (the default: spec, plus sdk and python-ascii when their bytes differ from those already signed)")
		strip := fs.Bool("strip-unknown", false, "remove keys outside the v1.0 schema (and say which) instead of refusing the card")
		keep := fs.Bool("keep-signatures", false, "keep the card's existing signatures (default: replace them)")
		lifetime := fs.Duration("lifetime", 0, "with --key: put iat and exp (now + this, e.g. 168h) in every signature's protected header; verifiers refuse it after exp (cardsignd: signing.lifetime)")
		register := fs.Bool("register", false, "keep the signed card in cardsignd's registry as its agent's newest version (--server only)")
		agent := fs.String("agent", "", "with --register: the agent's id (1-128 of a-z 0-9 . - _; default: derived by cardsignd from the card's first interface URL)")
		visibility := fs.String("visibility", "", "with --register: public (served to anyone) or private (readers only); default: private for a new agent, unchanged for a known one")
		var w waitOptions
		w.register(fs)
		resultFile := fs.String("result-file", "", "also write what was signed as JSON to this file: each signature's kid, alg, profile and (--server) audit_sequence, and the registered agent_id and agent_version (for pipelines: the GitHub Action's outputs)")
		fs.Lookup("server").Usage = "sign through cardsignd at this address HOST:PORT, or through several replicas: HOST:PORT,HOST:PORT,... (balanced over the ready ones, failed over; default $" + serverEnv + " when no --key is given)"
		lim := limitFlags(fs)
		return func(ctx context.Context, in *call) int {
			e, pos := in.env, in.pos
			mode, err := signer.ParseMode(*profile)
			if err != nil {
				return c.usageError(e, "%v", err)
			}
			if *jku != "" && !jkuUsable(*jku) {
				return c.usageError(e, "--jku must be an absolute https URL (http only for loopback hosts), got %q", *jku)
			}
			if len(pos) == 1 && pos[0] == "-" && in.conn.idt.file == "-" {
				return c.usageError(e, "%v", errIDTokenAndStdin)
			}
			data, code, ok := c.oneInput(e, pos, lim)
			if !ok {
				return code
			} else if err := prepareResultFile(*resultFile); err != nil {
				return c.usageError(e, "%v", err)
			}
			given := connFlagsGiven(fs)
			if len(given) > 0 && len(kf.uris) > 0 {
				return c.usageError(e, "--%s and --key exclude each other: the daemon signs with its own keys", given[0])
			}
			if (len(given) > 0 || serverAddr(in.conn.server) != "") && len(kf.uris) == 0 {
				if msg := remoteFlagsProblem(*jku != "" || kf.kid != "" || kf.alg != "" || *lifetime != 0, *register, *agent != "" || *visibility != "", w); msg != "" {
					return c.usageError(e, "%s", msg)
				}
				return remote(ctx, in, *resultFile, w, &pb.SignCardRequest{Card: data, StripUnknown: *strip, Profile: profileOf(mode), KeepSignatures: *keep,
					Register: *register, AgentId: *agent, Visibility: *visibility, ApprovalId: w.approval})
			}
			if *register || *agent != "" || *visibility != "" || w.approval != "" || w.wait {
				return c.usageError(e, "--register, --agent, --visibility, --approval and --wait need --server: the registry and approvals are cardsignd's")
			}
			keys, err := kf.open(ctx)
			if err != nil {
				fmt.Fprintf(e.stderr, "cardsign %s: %v\n", c.name, err)
				return exitUsage
			}
			if *lifetime < 0 {
				return c.usageError(e, "--lifetime must be positive, got %s", *lifetime)
			}
			opts := signer.Options{JKU: *jku, Mode: mode, KeepSignatures: *keep, Lifetime: *lifetime,
				Card: card.Options{Limits: *lim, StripUnknown: *strip}}
			opts.Keys = keys
			res, err := signer.Sign(ctx, data, opts)
			if err != nil {
				return reportSignError(e, c.name, err)
			}
			return printSigned(e, c.name, res, *resultFile)
		}
	}
	return c
}

// jkuUsable says whether jku is an absolute https URL, or http to a
// loopback host.
func jkuUsable(jku string) bool {
	u, err := url.Parse(jku)
	loopbackHTTP := err == nil && u.Scheme == "http" && card.IsLoopbackHost(u.Hostname())
	return err == nil && (u.Scheme == "https" || loopbackHTTP) && u.Host != ""
}

// printSigned reports an offline signature's notes, warnings and keys on
// stderr, writes resultFile (if any) and prints the signed card.
func printSigned(e env, name string, res *signer.Result, resultFile string) int {
	printNotes(e, name, res.Loaded)
	for _, w := range res.Warnings {
		fmt.Fprintf(e.stderr, "cardsign %s: %s\n", name, escapeText(w.String()))
	}
	if len(res.Divergences) > 0 {
		fmt.Fprintf(e.stderr, "cardsign %s: signing the spec and sdk profiles separately: A2A §8.4.1 keeps these empty values and the shipped verifiers (@a2a-js/sdk, a2a-python) drop them: %s\n",
			name, escapeText(strings.Join(res.Divergences, ", ")))
	}
	if len(res.PythonDivergences) > 0 {
		fmt.Fprintf(e.stderr, "cardsign %s: adding a python-ascii signature for a2a-python ≤1.1, which writes these otherwise than RFC 8785: %s\n",
			name, escapeText(strings.Join(res.PythonDivergences, ", ")))
	}
	for _, s := range res.Signatures {
		fmt.Fprintf(e.stderr, "cardsign %s: signed with kid %s (%s, %s profile)\n", name, escapeValue(s.KID), s.Alg, s.Profile)
	}
	fmt.Fprintf(e.stderr, "cardsign %s: %s\n", name, signer.FormatPortability("verifies in: ", res.Portability))
	var sr signResult
	for _, s := range res.Signatures {
		sr.Signatures = append(sr.Signatures, signedWith{KID: s.KID, Alg: string(s.Alg), Profile: string(s.Profile)})
	}
	if err := sr.write(resultFile); err != nil {
		fmt.Fprintf(e.stderr, "cardsign %s: %v\n", name, err)
		return exitFail
	}
	e.stdout.Write(res.Card)
	return exitOK
}

// profileOf is the API's name of a signing mode.
func profileOf(m signer.Mode) pb.Profile {
	switch m {
	case signer.ModeSpec:
		return pb.Profile_PROFILE_SPEC
	case signer.ModeSDK:
		return pb.Profile_PROFILE_SDK
	case signer.ModeBoth:
		return pb.Profile_PROFILE_BOTH
	case signer.ModePythonASCII:
		return pb.Profile_PROFILE_PYTHON_ASCII
	}
	return pb.Profile_PROFILE_UNSPECIFIED
}

// signResult is what --result-file holds: what a pipeline reads back
// without parsing the human-readable lines on standard error.
type signResult struct {
	Signatures   []signedWith `json:"signatures"`
	AgentID      string       `json:"agent_id,omitempty"`
	AgentVersion int64        `json:"agent_version,omitempty"`
}

// signedWith is one signature of a signResult.
type signedWith struct {
	KID           string `json:"kid"`
	Alg           string `json:"alg"`
	Profile       string `json:"profile"`
	AuditSequence int64  `json:"audit_sequence,omitempty"` // the daemon's audit record; offline signatures have none
}

// prepareResultFile checks that the result file name, if any, can be
// written, before anything is signed: a path that cannot be written is
// refused up front, rather than after cardsignd signed and audited a card
// the command could then not hand over. It leaves nothing behind: a file
// it had to create is removed again, an existing one is not changed.
func prepareResultFile(name string) error {
	if name == "" {
		return nil
	}
	_, statErr := os.Lstat(name)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("--result-file: %w", err)
	}
	f.Close()
	if errors.Is(statErr, fs.ErrNotExist) {
		os.Remove(name)
	}
	return nil
}

// write writes r as JSON to name; an empty name writes nothing. It is
// written before the signed card is printed, so that a pipeline that has
// the card also has its result.
func (r signResult) write(name string) error {
	if name == "" {
		return nil
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("--result-file: %w", err)
	}
	if err := os.WriteFile(name, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("--result-file: %w", err)
	}
	return nil
}

// waitOptions are sign's flags for cards held for approval.
type waitOptions struct {
	approval string
	wait     bool
	limit    time.Duration
}

func (w *waitOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&w.approval, "approval", "", "sign under this approval (the id cardsignd answered when a signing policy rule held the card; --server only): the same card, once approved")
	fs.BoolVar(&w.wait, "wait", false, "when a signing policy rule holds the card for approval, wait until approvers approve it, then sign (--server only); without it, sign exits 4 with the approval's id")
	fs.DurationVar(&w.limit, "wait-timeout", 24*time.Hour, "with --wait: give up after this long (the approval itself expires after policy.approval_ttl)")
}

// remoteFlagsProblem says which flags of sign --server do not go together,
// or "": daemonConfig (--jku, --kid, --alg, --lifetime) is the daemon's,
// --agent and --visibility need --register, --approval and --wait exclude
// each other.
func remoteFlagsProblem(daemonConfig, register, agentOrVisibility bool, w waitOptions) string {
	switch {
	case daemonConfig:
		return "--jku, --kid, --alg and --lifetime are the daemon's configuration when signing through --server"
	case !register && agentOrVisibility:
		return "--agent and --visibility go with --register"
	case w.approval != "" && w.wait:
		return "--approval and --wait exclude each other: --wait asks for the approval itself"
	}
	return ""
}

// remote signs through cardsignd; resultFile (if any) receives the
// signatures' kids and audit records. A card held for approval is waited
// for (w.wait) and signed again under its approval.
func remote(ctx context.Context, in *call, resultFile string, w waitOptions, req *pb.SignCardRequest) int {
	e, c := in.env, in.c
	cl, code, ok := in.session(ctx)
	if !ok {
		return code
	}
	defer cl.close()
	res, err := cl.signing.SignCard(cl.ctx, req)
	if id := heldApproval(err); id != "" {
		fmt.Fprintf(e.stderr, "cardsign %s: %s\n", c.name, describe(err))
		if !w.wait {
			return exitHeld
		}
		signer, approved := awaitApproval(ctx, in, cl.client, id, w.limit)
		if signer != cl.client {
			defer signer.close()
		}
		if !approved {
			return exitFail
		}
		req.ApprovalId = id
		cctx, cancel := signer.ctx(ctx)
		defer cancel()
		res, err = signer.signing.SignCard(cctx, req)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "cardsign %s: %s\n", c.name, describe(err))
		if status.Code(err) == codes.Unavailable {
			return exitUsage // the daemon could not be reached: nothing was decided
		}
		return exitFail
	}
	// What the daemon says about a card quotes the card: escaped like
	// everything else a card can put on a terminal.
	for _, n := range res.GetNotes() {
		fmt.Fprintf(e.stderr, "cardsign %s: %s\n", c.name, escapeText(n))
	}
	for _, w := range res.GetWarnings() {
		fmt.Fprintf(e.stderr, "cardsign %s: %s\n", c.name, escapeText(fmt.Sprintf("%s %s: %s [%s]", w.GetSeverity(), w.GetPath(), w.GetMessage(), w.GetRule())))
	}
	if d := res.GetDivergences(); len(d) > 0 {
		fmt.Fprintf(e.stderr, "cardsign %s: signed the spec and sdk profiles separately because of: %s\n", c.name, escapeText(strings.Join(d, ", ")))
	}
	if d := res.GetPythonDivergences(); len(d) > 0 {
		fmt.Fprintf(e.stderr, "cardsign %s: added a python-ascii signature for a2a-python ≤1.1, which writes these otherwise than RFC 8785: %s\n", c.name, escapeText(strings.Join(d, ", ")))
	}
	for _, s := range res.GetSignatures() {
		fmt.Fprintf(e.stderr, "cardsign %s: signed with kid %s (%s, %s profile), audit record %d\n", c.name, escapeValue(s.GetKid()), escapeValue(s.GetAlg()), escapeValue(s.GetProfile()), s.GetAuditSequence())
	}
	if p := res.GetPortability(); len(p) > 0 {
		fmt.Fprintf(e.stderr, "cardsign %s: %s\n", c.name, escapeText(signer.FormatPortability("verifies in: ", supportOf(p))))
	}
	if id := res.GetAgentId(); id != "" {
		fmt.Fprintf(e.stderr, "cardsign %s: registered as agent %s, version %d\n", c.name, escapeValue(id), res.GetAgentVersion())
	}
	sr := signResult{AgentID: res.GetAgentId(), AgentVersion: res.GetAgentVersion()}
	for _, s := range res.GetSignatures() {
		sr.Signatures = append(sr.Signatures, signedWith{KID: s.GetKid(), Alg: s.GetAlg(), Profile: s.GetProfile(), AuditSequence: s.GetAuditSequence()})
	}
	if err := sr.write(resultFile); err != nil {
		// Signed and recorded, but the pipeline cannot learn it: fail
		// rather than let it go on without its outputs.
		fmt.Fprintf(e.stderr, "cardsign %s: %v\n", c.name, err)
		return exitFail
	}
	e.stdout.Write(res.GetSignedCard())
	return exitOK
}

// reportSignError prints why a card was not signed: every lint error, or the
// parse error, or the key failure.
func reportSignError(e env, name string, err error) int {
	var le *card.LintError
	if errors.As(err, &le) {
		fmt.Fprintf(e.stderr, "cardsign %s: refusing to sign: the card fails lint\n", name)
		printFindings(e.stderr, le.Findings)
		return exitFail
	}
	return reportCardError(e, name, err)
}

func printFindings(w io.Writer, fs []card.Finding) {
	for _, f := range fs {
		fmt.Fprintf(w, "  %s\n", escapeText(f.String()))
	}
}

// supportOf reads the daemon's portability report.
func supportOf(rows []*pb.VerifierSupport) []signer.Support {
	out := make([]signer.Support, len(rows))
	for i, r := range rows {
		out[i] = signer.Support{Verifier: r.GetVerifier(), Profile: card.Profile(r.GetProfile()), Covered: r.GetCovered(), By: card.Profile(r.GetCoveredBy()), Reason: r.GetReason()}
	}
	return out
}
