//go:build cgo && !nopkcs11

package pkcs11

import (
	"errors"
	"fmt"
	"testing"

	p11 "github.com/miekg/pkcs11"
)

func TestErrorClasses(t *testing.T) {
	wrapped := func(rv uint) error { return fmt.Errorf("C_Sign: %w", p11.Error(rv)) }
	tests := []struct {
		name                   string
		err                    error
		dead, unreachable, pin bool
	}{
		{"session handle invalid", wrapped(p11.CKR_SESSION_HANDLE_INVALID), true, true, false},
		{"session closed", wrapped(p11.CKR_SESSION_CLOSED), true, true, false},
		{"object handle invalid", wrapped(p11.CKR_OBJECT_HANDLE_INVALID), true, true, false},
		{"key handle invalid", wrapped(p11.CKR_KEY_HANDLE_INVALID), true, true, false},
		{"not logged in", wrapped(p11.CKR_USER_NOT_LOGGED_IN), true, true, false},
		{"device error", wrapped(p11.CKR_DEVICE_ERROR), true, true, false},
		{"device removed", wrapped(p11.CKR_DEVICE_REMOVED), true, true, false},
		{"token not present", wrapped(p11.CKR_TOKEN_NOT_PRESENT), true, true, false},
		{"not initialized", wrapped(p11.CKR_CRYPTOKI_NOT_INITIALIZED), true, true, false},
		{"stale sessions", fmt.Errorf("x: %w", errStale), true, true, false},
		{"token not answering", fmt.Errorf("x: %w", errGone), true, true, false},
		{"down, retrying", errDown, true, true, false},
		{"general error", wrapped(p11.CKR_GENERAL_ERROR), false, true, false},
		{"slot id invalid", wrapped(p11.CKR_SLOT_ID_INVALID), false, true, false},
		{"token not found", &TokenNotFoundError{}, false, true, false},
		{"mechanism invalid", wrapped(p11.CKR_MECHANISM_INVALID), false, false, false},
		{"data length", wrapped(p11.CKR_DATA_LEN_RANGE), false, false, false},
		{"PIN incorrect", wrapped(p11.CKR_PIN_INCORRECT), false, false, true},
		{"PIN locked", wrapped(p11.CKR_PIN_LOCKED), false, false, true},
		{"not a PKCS#11 error", errors.New("boom"), false, false, false},
		{"nil", nil, false, false, false},
	}
	for _, tt := range tests {
		if got := deadSession(tt.err); got != tt.dead {
			t.Errorf("%s: deadSession = %v", tt.name, got)
		}
		if got := unreachable(tt.err); got != tt.unreachable {
			t.Errorf("%s: unreachable = %v", tt.name, got)
		}
		if got := pinRefused(tt.err); got != tt.pin {
			t.Errorf("%s: pinRefused = %v", tt.name, got)
		}
	}
}
