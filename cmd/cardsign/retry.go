package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// retrier sends a call of retriedMethods that failed UNAVAILABLE again, up
// to retryAttempts in all; each attempt goes to the replica the balancer
// picks next (round_robin over the ready ones), so a retry lands on another
// replica when there is one.
//
// The client retries itself rather than through a gRPC retry policy: gRPC
// gives up on a call as soon as the server has sent response headers
// (cardsignd before #24 sent its request id in them before every error, so
// a replica that answered UNAVAILABLE was never retried), and it cannot
// say how many attempts a successful call took.
type retrier struct {
	attempts int
	// backoff is the pause before retry n (1 for the second attempt).
	backoff func(n int) time.Duration
	// note tells the user about a call that succeeded after failed
	// attempts; nil says nothing.
	note func(method string, attempts int, last error)
}

func newRetrier(note func(method string, attempts int, last error)) *retrier {
	return &retrier{attempts: retryAttempts, backoff: retryBackoff, note: note}
}

// retryBackoff is min(0.25 s·2^(n-1), 2 s), ±20% at random so that clients
// failed by the same outage do not come back in step.
func retryBackoff(n int) time.Duration {
	d := min(retryInitialBackoff<<min(n-1, 10), retryMaxBackoff)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func (r *retrier) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !slices.Contains(retriedMethods, method) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var last error
	for n := 1; ; n++ {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil {
			if n > 1 && r.note != nil {
				r.note(method, n, last)
			}
			return nil
		}
		last = err
		if status.Code(err) != codes.Unavailable || n >= r.attempts {
			return gaveUp(n, err)
		}
		wait := r.backoff(n)
		if d, ok := ctx.Deadline(); ok && time.Until(d) <= wait {
			return gaveUp(n, err) // the last error says more than DEADLINE_EXCEEDED would
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return gaveUp(n, err)
		case <-t.C:
		}
		if m, ok := reply.(proto.Message); ok {
			proto.Reset(m)
		}
	}
}

// gaveUp is the error of a call abandoned after n attempts.
func gaveUp(n int, err error) error {
	if n == 1 {
		return err
	}
	return &retriedError{attempts: n, err: err}
}

// retriedError is the last attempt's error of a call made more than once.
// Its gRPC status is that attempt's, with "(after N attempts)" at the end
// of the message and the details kept.
type retriedError struct {
	attempts int
	err      error
}

func (e *retriedError) Error() string {
	return fmt.Sprintf("%v (after %d attempts)", e.err, e.attempts)
}

func (e *retriedError) Unwrap() error { return e.err }

func (e *retriedError) GRPCStatus() *status.Status {
	p := status.Convert(e.err).Proto()
	p.Message = fmt.Sprintf("%s (after %d attempts)", p.GetMessage(), e.attempts)
	return status.FromProto(p)
}

// retryNotes writes one line to w for each call that succeeded after
// failed attempts, naming the last failure; calls may end concurrently
// (cardsign bench).
func retryNotes(w io.Writer, cmd string) func(method string, attempts int, last error) {
	var mu sync.Mutex
	return func(method string, attempts int, last error) {
		st := status.Convert(last)
		name := method[strings.LastIndex(method, "/")+1:]
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "cardsign %s: %s succeeded on attempt %d of at most %d (attempt %d: %s: %s)\n",
			cmd, name, attempts, retryAttempts, attempts-1, st.Code(), escapeText(st.Message()))
	}
}
