//go:build !noawskms

package awskms

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/cardsign/cardsign/backends/internal/retry"
)

// httpErr is an SDK-shaped error for a KMS answer with status and code, as
// the SDK returns them: *smithy.OperationError around *awshttp.ResponseError
// around the API error.
func httpErr(status int, code string) error {
	var inner error = &smithy.GenericAPIError{Code: code, Message: "m"}
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: status}}
	return &smithy.OperationError{ServiceID: "KMS", OperationName: "Sign", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: resp, Err: inner},
	}}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want retry.Class
	}{
		{"throttling", httpErr(400, "ThrottlingException"), retry.Throttled},
		{"limit exceeded", httpErr(400, "LimitExceededException"), retry.Throttled},
		{"429 without a code", httpErr(429, "UnknownError"), retry.Throttled},
		{"internal", httpErr(500, "KMSInternalException"), retry.Transient},
		{"internal as 503", httpErr(503, "KMSInternalException"), retry.Transient},
		{"dependency timeout", httpErr(503, "DependencyTimeoutException"), retry.Transient},
		{"key unavailable", httpErr(500, "KeyUnavailableException"), retry.Transient},
		{"502 from a proxy", httpErr(502, "UnknownError"), retry.Transient},
		{"connection refused", &smithy.OperationError{Err: &smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Err: errors.New("refused")}}}, retry.Transient},
		{"truncated response", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), retry.Transient},
		{"not found", httpErr(400, "NotFoundException"), retry.Final},
		{"disabled", httpErr(400, "DisabledException"), retry.Final},
		{"access denied", httpErr(400, "AccessDeniedException"), retry.Final},
		{"validation", httpErr(400, "ValidationException"), retry.Final},
		{"bad response", &smithy.DeserializationError{Err: errors.New("bad json")}, retry.Final},
		{"deadline", &smithy.OperationError{Err: &smithyhttp.RequestSendError{Err: context.DeadlineExceeded}}, retry.Interrupted},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), retry.Interrupted},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("%s: classify = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	backoff := (&Backend{}).retryPolicy().Backoff
	for attempt := 1; attempt <= 70; attempt++ {
		ceiling := backoffCap
		if attempt <= 7 {
			ceiling = backoffBase << (attempt - 1)
		}
		var maxSeen time.Duration
		for range 200 {
			d := backoff.Pause(attempt)
			if d <= 0 || d > ceiling {
				t.Fatalf("backoff(%d) = %v, want in (0, %v]", attempt, d, ceiling)
			}
			maxSeen = max(maxSeen, d)
		}
		// Full jitter spreads over the whole range, not just its top.
		if maxSeen < ceiling/2 {
			t.Errorf("backoff(%d) never above %v in 200 draws (ceiling %v)", attempt, maxSeen, ceiling)
		}
	}
}
