package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/backends/pkcs11"
	"github.com/cardsign/cardsign/buildinfo"
)

func versionCmd() command {
	c := command{
		name:    "version",
		summary: "Print which build of cardsign this is (version, VCS revision and time, Go version, platform, key backends); with --server, cardsignd's too.",
		usage:   "[--json] " + connUsage + "   (--server asks cardsignd too)",
		example: "  cardsign version\n" +
			"  cardsign v1.2.3\n    revision  0123456789abcdef0123456789abcdef01234567 (2026-11-28T13:45:00Z)\n    go        go1.26.8 linux/amd64\n    backends  file, pkcs11\n" +
			"  cardsign version --server cardsign.internal:7700 --ca-file ca.pem --token-file auditor.token\n" +
			"  cardsign version --json --server 127.0.0.1:7700",
	}
	c.daemon = &daemonFlags{timeout: 10 * time.Second, timeoutUsage: "deadline of the call to cardsignd"}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		asJSON := fs.Bool("json", false, "print one JSON object: {\"client\":{...},\"server\":{...}} (server only with --server)")
		return func(ctx context.Context, in *call) int {
			if code, ok := in.noArgs(); !ok {
				return code
			}
			v := versions{Client: describeBuild(cliBuild())}
			// Only --server on the command line asks cardsignd: $CARDSIGN_SERVER
			// alone leaves version an offline command that always answers.
			if slices.Contains(connFlagsGiven(fs), "server") {
				s, code, ok := in.session(ctx)
				if !ok {
					return code
				}
				defer s.close()
				info, err := pb.NewServerServiceClient(s.conn).GetServerInfo(s.ctx, &pb.GetServerInfoRequest{})
				if err != nil {
					fmt.Fprintf(in.stderr, "cardsign version: %s\n", describe(err))
					return exitFail
				}
				v.Server = serverBuild(info)
			}
			return v.print(in.env, *asJSON)
		}
	}
	return c
}

// cliBuild is this binary's build with the key backends it has: file
// always, pkcs11 when built with cgo and without -tags nopkcs11.
func cliBuild() buildinfo.Info {
	in := buildinfo.Read()
	in.Backends = []string{file.Scheme}
	if pkcs11.NotBuilt == "" {
		in.Backends = append(in.Backends, pkcs11.Scheme)
	}
	return in
}

// build is one binary's build as version prints it.
type build struct {
	Version  string   `json:"version"`
	Revision string   `json:"revision"`
	Time     string   `json:"time"` // RFC 3339; "" when unknown
	Modified bool     `json:"modified"`
	Go       string   `json:"go"`
	Platform string   `json:"platform"`
	Backends []string `json:"backends"`
	Replica  string   `json:"replica,omitempty"` // the server's
}

// versions is what version prints: the client's build and, with --server,
// the server's.
type versions struct {
	Client build  `json:"client"`
	Server *build `json:"server,omitempty"`
}

func describeBuild(in buildinfo.Info) build {
	b := build{Version: in.Version, Revision: in.Revision, Modified: in.Modified, Go: in.GoVersion, Platform: in.Platform, Backends: in.Backends}
	if !in.Time.IsZero() {
		b.Time = in.Time.UTC().Format(time.RFC3339)
	}
	if b.Backends == nil {
		b.Backends = []string{}
	}
	return b
}

// serverBuild reads cardsignd's answer; its strings are the server's and
// are escaped when printed.
func serverBuild(info *pb.GetServerInfoResponse) *build {
	b := describeBuild(buildinfo.Info{Version: info.GetVersion(), Revision: info.GetRevision(), Modified: info.GetModified(),
		GoVersion: info.GetGoVersion(), Platform: info.GetPlatform(), Backends: info.GetBackends()})
	if t := info.GetRevisionTime(); t != nil {
		b.Time = t.AsTime().UTC().Format(time.RFC3339)
	}
	b.Replica = info.GetReplica()
	return &b
}

func (v versions) print(e env, asJSON bool) int {
	w := e.stdout
	if asJSON {
		out, err := json.Marshal(v)
		if err != nil {
			fmt.Fprintf(e.stderr, "cardsign version: %v\n", err)
			return exitFail
		}
		w.Write(append(escapeJSON(out), '\n'))
		return exitOK
	}
	v.Client.print(w, "cardsign")
	if v.Server != nil {
		v.Server.print(w, "cardsignd")
	}
	return exitOK
}

// print writes the build as a heading line and indented fields.
func (b build) print(w io.Writer, name string) {
	fmt.Fprintf(w, "%s %s\n", name, escapeText(b.Version))
	if b.Replica != "" {
		fmt.Fprintf(w, "    replica   %s\n", escapeText(b.Replica))
	}
	if b.Revision != "" {
		rev := b.Revision
		if b.Time != "" {
			rev += " (" + b.Time + ")"
		}
		if b.Modified {
			rev += ", modified"
		}
		fmt.Fprintf(w, "    revision  %s\n", escapeText(rev))
	}
	fmt.Fprintf(w, "    go        %s\n", escapeText(b.Go+" "+b.Platform))
	fmt.Fprintf(w, "    backends  %s\n", escapeText(strings.Join(b.Backends, ", ")))
}
