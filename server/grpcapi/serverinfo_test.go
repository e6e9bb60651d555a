package grpcapi

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cardsign/cardsign/access"
	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/buildinfo"
	"github.com/cardsign/cardsign/server/servertest"
)

// TestEveryMethodHasRoles: every RPC the server registers is placed in
// methodRoles (one missing would be refused to everyone with
// authentication on, and pass unnoticed without it).
func TestEveryMethodHasRoles(t *testing.T) {
	a, _ := servertest.New(t)
	srv, _ := NewServer(a, slog.New(slog.DiscardHandler), Options{})
	n := 0
	for name, svc := range srv.GetServiceInfo() {
		if name == "grpc.health.v1.Health" || strings.HasPrefix(name, "grpc.reflection.") {
			continue
		}
		for _, m := range svc.Methods {
			n++
			full := "/" + name + "/" + m.Name
			if len(methodRoles[full]) == 0 {
				t.Errorf("%s has no roles in methodRoles", full)
			}
		}
	}
	if n != len(methodRoles) {
		t.Errorf("%d methods registered, methodRoles has %d", n, len(methodRoles))
	}
}

// TestGetServerInfo: the build the server was given comes back to a caller
// of any role and, without authentication, to anyone; a caller with no
// valid credential is refused.
func TestGetServerInfo(t *testing.T) {
	build := buildinfo.Info{Version: "v1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567",
		Time: time.Date(2026, 11, 28, 13, 45, 0, 0, time.UTC), GoVersion: "go1.26.8", Platform: "linux/amd64",
		Backends: []string{"file", "gcpkms"}}
	var tokens []access.Token
	for _, r := range []access.Role{access.RoleSigner, access.RoleAdmin, access.RoleAuditor, access.RoleReader} {
		tokens = append(tokens, access.Token{Name: string(r), SHA256: sha256.Sum256([]byte("cst_" + r)), Roles: []access.Role{r}})
	}
	dial := func(t *testing.T, opts Options) pb.ServerServiceClient {
		a, _ := servertest.New(t)
		opts.Build = build
		return pb.NewServerServiceClient(serveGRPC(t, a, opts))
	}
	withAuth := dial(t, Options{Auth: access.New(tokens, nil)})
	open := dial(t, Options{})
	for _, tc := range []struct {
		name   string
		client pb.ServerServiceClient
		bearer string
		code   codes.Code
	}{
		{"signer", withAuth, "cst_signer", codes.OK},
		{"admin", withAuth, "cst_admin", codes.OK},
		{"auditor", withAuth, "cst_auditor", codes.OK},
		{"reader", withAuth, "cst_reader", codes.OK},
		{"no credentials", withAuth, "", codes.Unauthenticated},
		{"unknown token", withAuth, "cst_unknown", codes.Unauthenticated},
		{"authentication off", open, "", codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.bearer != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tc.bearer)
			}
			got, err := tc.client.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
			if status.Code(err) != tc.code {
				t.Fatalf("GetServerInfo = %v, want %s", err, tc.code)
			}
			if err != nil {
				return
			}
			if got.Version != build.Version || got.Revision != build.Revision || !got.RevisionTime.AsTime().Equal(build.Time) ||
				got.GoVersion != build.GoVersion || got.Platform != build.Platform || !slices.Equal(got.Backends, build.Backends) || got.Replica == "" {
				t.Errorf("GetServerInfo = %v, want %+v and a replica name", got, build)
			}
		})
	}
}
