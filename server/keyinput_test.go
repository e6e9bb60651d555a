package server_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/server/grpcapi"
)

// wantInvalidField fails unless err is INVALID_ARGUMENT naming field.
func wantInvalidField(t *testing.T, what string, err error, field string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("%s: %v, want INVALID_ARGUMENT for %s", what, err, field)
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) > 0 && br.FieldViolations[0].Field == field {
			return
		}
	}
	t.Fatalf("%s: %v does not name the field %s", what, err, field)
}

// TestKeyRPCInputs: kids, prepublish periods and revocation reasons are
// published and read by other programs; each is checked before it is stored.
func TestKeyRPCInputs(t *testing.T) {
	ctx := context.Background()
	a, dir := server.NewTestAuthority(t)
	keys := pb.NewKeyServiceClient(serveGRPC(t, a))
	keyDir := filepath.Join(dir, "keys")

	for _, kid := range []string{"a\x00b", "evil\nkid", "\x1b[31mred", "with space", "é", strings.Repeat("k", 200000)} {
		_, err := keys.ImportKey(ctx, &pb.ImportKeyRequest{Uri: "file:" + server.WriteKeyFile(t, keyDir), Kid: kid})
		wantInvalidField(t, "import with kid "+strings.ToValidUTF8(kid[:min(len(kid), 12)], "?"), err, "kid")
		// Looked up, not checked: such a kid was never stored now.
		if _, err = keys.ActivateKey(ctx, &pb.ActivateKeyRequest{Kid: kid}); status.Code(err) != codes.NotFound {
			t.Fatalf("activate an unknown hostile kid: %v, want NOT_FOUND", err)
		}
	}
	// A key recorded before kids were checked stays revocable.
	legacy, err := a.RecordKey(ctx, "file:"+server.WriteKeyFile(t, keyDir), backends.OpenOptions{KID: "legacy kid/with space"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Kid: legacy.KID, Reason: "superseded"}); err != nil {
		t.Fatalf("revoking a key recorded with an old-format kid: %v", err)
	}
	if _, err := keys.ImportKey(ctx, &pb.ImportKeyRequest{Uri: "file:" + server.WriteKeyFile(t, keyDir), Kid: "team-a.2026:v1"}); err != nil {
		t.Fatalf("import with a plain kid: %v", err)
	}

	// 18446744074 s × 10^9 overflows int64 nanoseconds into a small
	// positive duration: the key would activate at once.
	for _, secs := range []int64{18446744074, -1, int64(server.MaxPrepublish/time.Second) + 1} {
		_, err := keys.RotateKey(ctx, &pb.RotateKeyRequest{PrepublishSeconds: proto.Int64(secs)})
		wantInvalidField(t, "rotate with prepublish_seconds", err, "prepublish_seconds")
	}

	var revokable []string
	for range 4 {
		r, err := keys.ImportKey(ctx, &pb.ImportKeyRequest{Uri: "file:" + server.WriteKeyFile(t, keyDir)})
		if err != nil {
			t.Fatal(err)
		}
		revokable = append(revokable, r.Key.Kid)
	}
	for _, reason := range []string{
		strings.Repeat("x", 300<<10),
		"key-compromise: " + strings.Repeat("n", server.MaxReasonNote+1),
		"line\nbreak", // free text, checked as a note
		"key-compromise: line\nbreak",
		"key-compromise: \x1b[2Jclear",
	} {
		_, err := keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Kid: revokable[0], Reason: reason})
		wantInvalidField(t, "revoke with reason "+strings.ToValidUTF8(reason[:min(len(reason), 20)], "?"), err, "reason")
	}
	// A gRPC client cannot send invalid UTF-8 in a string field; the check
	// is there for callers of the Go API.
	if _, err := server.CheckReason("superseded: \xff"); err == nil {
		t.Fatal("a note of invalid UTF-8 was accepted")
	}
	for _, kid := range revokable {
		r, err := keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Kid: kid, Reason: "key-compromise: " + strings.Repeat("é", server.MaxReasonNote)})
		if err != nil {
			t.Fatalf("revoke with the longest note: %v", err)
		}
		if want := "key-compromise: " + strings.Repeat("é", server.MaxReasonNote); r.Key.RevokeReason != want {
			t.Fatalf("reason stored as %q", r.Key.RevokeReason)
		}
	}
	if r, err := keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Kid: "team-a.2026:v1"}); err != nil || r.Key.RevokeReason != "unspecified" {
		t.Fatalf("revoke without a reason: %v, %v; want reason unspecified", r, err)
	}
	// Free text, as scripts wrote it before the codes, is kept as a note.
	if reason, err := server.CheckReason("key compromise"); err != nil || reason != "unspecified: key compromise" {
		t.Fatalf(`server.CheckReason("key compromise") = %q, %v`, reason, err)
	}
	doc, err := a.RevocationDocument(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Five revocations with the longest notes stay a few KiB, far under the
	// 1 MiB a verifier reads.
	if len(doc) > 8<<10 {
		t.Fatalf("revocation document of 5 keys is %d bytes", len(doc))
	}
}

// serveGRPC serves a's gRPC API in memory and returns a client connection.
func serveGRPC(t *testing.T, a *server.Authority) *grpc.ClientConn {
	t.Helper()
	srv, _ := grpcapi.NewServer(a, slog.New(slog.DiscardHandler), grpcapi.Options{MaxMessageBytes: 1 << 20})
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///cardsignd", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
