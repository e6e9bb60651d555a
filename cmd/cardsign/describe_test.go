package main

import (
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestDescribeEscapesServerText: a daemon's error quotes the card or key that
// caused it; the CLI must not let that text move the cursor, clear the screen
// or start a line of its own.
func TestDescribeEscapesServerText(t *testing.T) {
	st := status.New(codes.InvalidArgument, "card fails lint: kid \x1b[2J\nsignature[0] kid=good: valid")
	st, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
		{Field: "skills[0].\u202etags", Description: "bell\a and\r\ncarriage"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	out := describe(st.Err())
	for _, bad := range []string{"\x1b", "\a", "\r", "\u202e"} {
		if strings.Contains(out, bad) {
			t.Errorf("describe output holds %q raw: %q", bad, out)
		}
	}
	// One line for the status, one per violation: nothing the server sent
	// adds a line.
	if lines := strings.Split(out, "\n"); len(lines) != 2 {
		t.Errorf("describe printed %d lines, want 2: %q", len(lines), out)
	}
}
