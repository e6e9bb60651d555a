package grpcapi

import (
	"log/slog"
	"net"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/server/servertest"
	"github.com/cardsign/cardsign/strictjson"
)

// TestLintErrorFitsClientHeaders: a card of 4,000 empty skills (16,000 lint
// errors) is refused with INVALID_ARGUMENT whose details fit a client that
// accepts 8 KiB of headers (grpc-java's default), and the same connection
// keeps working. Before findings were bounded, the error overflowed the
// client's header list and failed as a protocol error. One of 60,000 empty
// skills is refused before lint, by the parser's item cap, naming the array.
func TestLintErrorFitsClientHeaders(t *testing.T) {
	a, _ := servertest.New(t)
	client := pb.NewSigningServiceClient(serveGRPC(t, a, Options{MaxMessageBytes: 1 << 20}))
	ctx := t.Context()

	good := testsupport.Card(t, "spec-sample.json")
	huge := strings.Replace(string(good), `"skills": [`, `"skills": [`+strings.Repeat("{},", 60000), 1)
	if huge == string(good) {
		t.Fatal("the sample card has no skills array to fill")
	}
	_, err := client.SignCard(ctx, &pb.SignCardRequest{Card: []byte(huge), StripUnknown: true})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "skills") || !strings.Contains(st.Message(), strictjson.RuleMaxItems) {
		t.Fatalf("SignCard(60,000 empty skills) = %v, want INVALID_ARGUMENT naming skills and %s", err, strictjson.RuleMaxItems)
	}
	hostile := strings.Replace(string(good), `"skills": [`, `"skills": [`+strings.Repeat("{},", 4000), 1)
	_, err = client.SignCard(ctx, &pb.SignCardRequest{Card: []byte(hostile), StripUnknown: true})
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("SignCard(4,000 empty skills) = %v, want INVALID_ARGUMENT", err)
	}
	var violations []*errdetails.BadRequest_FieldViolation
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			violations = br.FieldViolations
		}
	}
	if len(violations) == 0 || len(violations) > card.MaxFindings+1 {
		t.Fatalf("%d field violations, want some and at most %d", len(violations), card.MaxFindings+1)
	}
	if last := violations[len(violations)-1]; !strings.Contains(last.Description, card.RuleTooManyFindings) {
		t.Fatalf("last violation %v does not say that findings were left out", last)
	}
	// One unknown key of 150,000 characters: its path is in the message and
	// in the violation, and must be cut to fit as well.
	longKey := strings.Replace(string(good), `{`, `{"`+strings.Repeat("k", 150000)+`": 1, `, 1)
	_, err = client.SignCard(ctx, &pb.SignCardRequest{Card: []byte(longKey)})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "…") {
		t.Fatalf("SignCard(150,000-character key) = %v, want INVALID_ARGUMENT with the key cut short", err)
	}
	if _, err := client.SignCard(ctx, &pb.SignCardRequest{Card: good, StripUnknown: true}); err != nil {
		t.Fatalf("signing a good card on the same connection afterwards: %v", err)
	}
}

// serveGRPC serves a's gRPC services with opts on a loopback port, without
// TLS, to a client that accepts 8 KiB of headers (grpc-java's default).
func serveGRPC(t *testing.T, a *server.Authority, opts Options) *grpc.ClientConn {
	t.Helper()
	srv, _ := NewServer(a, slog.New(slog.DiscardHandler), opts)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithMaxHeaderListSize(8<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
