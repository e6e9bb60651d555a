package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardsign/cardsign/store"
)

func TestClassify(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	pg := func(code string) error { return fmt.Errorf("query: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"admin shutdown", context.Background(), pg("57P01"), true},
		{"crash shutdown", context.Background(), pg("57P02"), true},
		{"starting up", context.Background(), pg("57P03"), true},
		{"connection failure", context.Background(), pg("08006"), true},
		{"too many connections", context.Background(), pg("53300"), true},
		{"unique violation", context.Background(), pg("23505"), false},
		{"trigger refusal", context.Background(), pg("23000"), false},
		{"bad password", context.Background(), pg("28P01"), false},
		{"refused", context.Background(), fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"reset", context.Background(), fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"eof", context.Background(), io.ErrUnexpectedEOF, true},
		{"conn closed", context.Background(), errors.New("conn closed"), true},
		{"caller canceled", canceled, fmt.Errorf("begin: %w", context.Canceled), false},
		{"caller's deadline", canceled, context.DeadlineExceeded, false},
		{"store refusal", context.Background(), store.ErrKeyRevoked, false},
		{"plain", context.Background(), errors.New("something"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := classify(tt.ctx, tt.err)
			if got := errors.Is(err, store.ErrUnavailable); got != tt.want {
				t.Fatalf("classify(%v) is ErrUnavailable: %v, want %v", tt.err, got, tt.want)
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("classify(%v) = %v lost the error", tt.err, err)
			}
			var pe *pgconn.PgError
			if errors.As(tt.err, &pe) && !errors.As(err, &pe) {
				t.Fatal("the *pgconn.PgError is no longer reachable")
			}
		})
	}
}
