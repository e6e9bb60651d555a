package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/cardsign/cardsign/backends/internal/kmsstats"
)

// TestRetryAfter: a provider's Retry-After makes the pause at least that
// long, and a call whose deadline comes first gives up at once.
func TestRetryAfter(t *testing.T) {
	throttled := errors.New("429")
	ra := 300 * time.Millisecond
	p := &Policy{Name: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Stats: &kmsstats.Counters{},
		Backoff: Backoff{Base: time.Millisecond, Cap: time.Millisecond}, Window: 5 * time.Second,
		RetryAfter: func(err error) time.Duration {
			if errors.Is(err, throttled) {
				return ra
			}
			return 0
		}}
	classify := func(context.Context, error) Class { return Throttled }
	attempts := 0
	start := time.Now()
	err := p.Do(t.Context(), Call{Op: "Sign", Key: "k", Classify: classify}, func(context.Context) error {
		attempts++
		if attempts < 3 {
			return throttled
		}
		return nil
	})
	if err != nil || attempts != 3 || time.Since(start) < 600*time.Millisecond {
		t.Fatalf("3 attempts after two Retry-After of 300ms: %v, %d attempts in %v", err, attempts, time.Since(start))
	}
	ra = 5 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	attempts = 0
	start = time.Now()
	err = p.Do(ctx, Call{Op: "Sign", Key: "k", Classify: classify}, func(context.Context) error { attempts++; return throttled })
	var gu *GaveUpError
	if !errors.As(err, &gu) || attempts != 1 || time.Since(start) > time.Second {
		t.Fatalf("a Retry-After past the deadline: %v after %d attempts in %v, want a give-up at once", err, attempts, time.Since(start))
	}
}

func TestNetworkAndOneLine(t *testing.T) {
	for err, want := range map[error]bool{
		&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}: true,
		fmt.Errorf("post: %w", io.ErrUnexpectedEOF):         true,
		syscall.ECONNRESET:                       true,
		errors.New("no WWW-Authenticate header"): false,
	} {
		if got := Network(err); got != want {
			t.Errorf("Network(%v) = %v, want %v", err, got, want)
		}
	}
	a, b := errors.New("a"), context.DeadlineExceeded
	err := OneLine(nil, a, nil, b)
	if err.Error() != "a; context deadline exceeded" || !errors.Is(err, a) || !errors.Is(err, b) {
		t.Fatalf("OneLine = %q", err)
	}
	if OneLine().Error() != "no error recorded" {
		t.Fatal("OneLine() of nothing")
	}
}
