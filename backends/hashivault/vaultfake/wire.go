package vaultfake

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
)

// reply is what a handler answers: Vault's response envelope, or its
// {"errors":[...]} body for a status of 400 and above.
type reply struct {
	status   int // 0 is 200, or 204 when there is neither data nor auth
	data     map[string]any
	auth     map[string]any
	warnings []string
	errors   []string
}

// errorReply is Vault's error body. errors is never null: an unknown key
// reads as 404 {"errors":[]}, which the API client turns into a nil secret.
func errorReply(status int, msgs ...string) reply {
	if msgs == nil {
		msgs = []string{}
	}
	return reply{status: status, errors: msgs}
}

// badRequest is Vault's answer to logical.ErrorResponse: 400 with the
// message.
func badRequest(format string, args ...any) reply {
	return errorReply(http.StatusBadRequest, fmt.Sprintf(format, args...))
}

func permissionDenied() reply { return errorReply(http.StatusForbidden, "permission denied") }

// noHandler is Vault's answer to a path no mount serves.
func noHandler(path string) reply {
	return errorReply(http.StatusNotFound, fmt.Sprintf("no handler for route %q. route entry not found.", path))
}

// vaultError carries a reply through code that returns errors.
type vaultError struct{ r reply }

func (e *vaultError) Error() string { return fmt.Sprint(e.r.status, e.r.errors) }

func userError(format string, args ...any) error {
	return &vaultError{badRequest(format, args...)}
}

// replyFor turns an error into the reply it carries, or a 500 as Vault
// answers its internal errors.
func replyFor(err error) reply {
	if ve, ok := err.(*vaultError); ok {
		return ve.r
	}
	return errorReply(http.StatusInternalServerError, err.Error())
}

// writeReply writes r as Vault does. mountType names the mount that
// answered, as Vault's mount_type field does.
func writeReply(w http.ResponseWriter, r reply, mountType string) {
	w.Header().Set("Content-Type", "application/json")
	status := r.status
	if status >= 400 {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"errors": r.errors})
		return
	}
	if r.data == nil && r.auth == nil && r.warnings == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	body := map[string]any{
		"request_id":     requestID(),
		"lease_id":       "",
		"renewable":      false,
		"lease_duration": 0,
		"data":           r.data,
		"wrap_info":      nil,
		"warnings":       r.warnings,
		"auth":           r.auth,
		"mount_type":     mountType,
	}
	w.WriteHeader(status)
	// A failed write means the client left; there is no one to tell.
	_ = json.NewEncoder(w).Encode(body)
}

// requestID is a random UUID, as Vault gives every request.
func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
