package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/internal/testsupport"
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

// writeKeyFile writes a new P-256 private key into dir, as an operator would
// before importing it.
func writeKeyFile(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "import-*.pem")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(testsupport.NewKeyPEM(t)); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// TestKeyRPCInputs: kids, prepublish periods and revocation reasons are
// published and read by other programs; each is checked before it is stored.
func TestKeyRPCInputs(t *testing.T) {
	ctx := context.Background()
	a, dir := newAuthority(t)
	keys := pb.NewKeyServiceClient(serveGRPC(t, a))
	keyDir := filepath.Join(dir, "keys")

	for _, kid := range []string{"a\x00b", "evil\nkid", "\x1b[31mred", "with space", "é", strings.Repeat("k", 200000)} {
		_, err := keys.ImportKey(ctx, &pb.ImportKeyRequest{Uri: "file:" + writeKeyFile(t, keyDir), Kid: kid})
		wantInvalidField(t, "import with kid "+strings.ToValidUTF8(kid[:min(len(kid), 12)], "?"), err, "kid")
		// Looked up, not checked: such a kid was never stored now.
		if _, err = keys.ActivateKey(ctx, &pb.ActivateKeyRequest{Kid: kid}); status.Code(err) != codes.NotFound {
			t.Fatalf("activate an unknown hostile kid: %v, want NOT_FOUND", err)
		}
	}
	// A key recorded before kids were checked stays revocable.
	legacy, err := a.record(ctx, "file:"+writeKeyFile(t, keyDir), backends.OpenOptions{KID: "legacy kid/with space"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.store.CreateKey(ctx, legacy, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Kid: legacy.KID, Reason: "superseded"}); err != nil {
		t.Fatalf("revoking a key recorded with an old-format kid: %v", err)
	}
	if _, err := keys.ImportKey(ctx, &pb.ImportKeyRequest{Uri: "file:" + writeKeyFile(t, keyDir), Kid: "team-a.2026:v1"}); err != nil {
		t.Fatalf("import with a plain kid: %v", err)
	}

	// 18446744074 s × 10^9 overflows int64 nanoseconds into a small
	// positive duration: the key would activate at once.
	for _, secs := range []int64{18446744074, -1, int64(MaxPrepublish/time.Second) + 1} {
		_, err := keys.RotateKey(ctx, &pb.RotateKeyRequest{PrepublishSeconds: proto.Int64(secs)})
		wantInvalidField(t, "rotate with prepublish_seconds", err, "prepublish_seconds")
	}

	var revokable []string
	for range 4 {
		r, err := keys.ImportKey(ctx, &pb.ImportKeyRequest{Uri: "file:" + writeKeyFile(t, keyDir)})
		if err != nil {
			t.Fatal(err)
		}
		revokable = append(revokable, r.Key.Kid)
	}
	for _, reason := range []string{
		strings.Repeat("x", 300<<10),
		"key-compromise: " + strings.Repeat("n", MaxReasonNote+1),
		"line\nbreak", // free text, checked as a note
		"key-compromise: line\nbreak",
		"key-compromise: \x1b[2Jclear",
	} {
		_, err := keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Kid: revokable[0], Reason: reason})
		wantInvalidField(t, "revoke with reason "+strings.ToValidUTF8(reason[:min(len(reason), 20)], "?"), err, "reason")
	}
	// A gRPC client cannot send invalid UTF-8 in a string field; the check
	// is there for callers of the Go API.
	if _, err := checkReason("superseded: \xff"); err == nil {
		t.Fatal("a note of invalid UTF-8 was accepted")
	}
	for _, kid := range revokable {
		r, err := keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Kid: kid, Reason: "key-compromise: " + strings.Repeat("é", MaxReasonNote)})
		if err != nil {
			t.Fatalf("revoke with the longest note: %v", err)
		}
		if want := "key-compromise: " + strings.Repeat("é", MaxReasonNote); r.Key.RevokeReason != want {
			t.Fatalf("reason stored as %q", r.Key.RevokeReason)
		}
	}
	if r, err := keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Kid: "team-a.2026:v1"}); err != nil || r.Key.RevokeReason != "unspecified" {
		t.Fatalf("revoke without a reason: %v, %v; want reason unspecified", r, err)
	}
	// Free text, as scripts wrote it before the codes, is kept as a note.
	if reason, err := checkReason("key compromise"); err != nil || reason != "unspecified: key compromise" {
		t.Fatalf(`checkReason("key compromise") = %q, %v`, reason, err)
	}
	doc, err := a.Revocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Five revocations with the longest notes stay a few KiB, far under the
	// 1 MiB a verifier reads.
	if len(doc) > 8<<10 {
		t.Fatalf("revocation document of 5 keys is %d bytes", len(doc))
	}
}
