package azurekvfake

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// apiError is an answer in Key Vault's error shape,
// {"error":{"code":…,"message":…,"innererror":{"code":…}}}. azcore takes
// the outer code as ResponseError.ErrorCode, so the code is what callers
// branch on; the inner code only narrows it (KeyDisabled under Forbidden).
type apiError struct {
	status  int
	code    string
	inner   string // "" for none
	message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message) }

func badParameter(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "BadParameter", message: fmt.Sprintf(format, args...)}
}

// keyNotFound is Key Vault's answer for an unknown key, or an unknown
// version of a known one.
func keyNotFound(name, version string) *apiError {
	id := name
	if version != "" {
		id += "/" + version
	}
	return &apiError{status: http.StatusNotFound, code: "KeyNotFound", message: fmt.Sprintf(
		"A key with (name/id) %s was not found in this key vault. If you recently deleted this key you may be able to recover it using the correct recovery command.", id)}
}

// keyDisabled is what Key Vault answers an operation needing the private
// key (sign, decrypt, unwrapKey) on a disabled key version: 403 Forbidden,
// inner code KeyDisabled. Reading the key is still allowed.
func keyDisabled(op string) *apiError {
	return &apiError{status: http.StatusForbidden, code: "Forbidden", inner: "KeyDisabled",
		message: fmt.Sprintf("Operation %s is not allowed on a disabled key.", op)}
}

// opForbidden answers an operation missing from the key's key_ops.
func opForbidden(op string) *apiError {
	return &apiError{status: http.StatusForbidden, code: "Forbidden", inner: "KeyOperationForbidden",
		message: fmt.Sprintf("Operation %s is not permitted on this key.", op)}
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code       string      `json:"code"`
	Message    string      `json:"message"`
	InnerError *innerError `json:"innererror,omitempty"`
}

type innerError struct {
	Code string `json:"code"`
}

func writeError(w http.ResponseWriter, e *apiError) {
	body := errorBody{Error: errorDetail{Code: e.code, Message: e.message}}
	if e.inner != "" {
		body.Error.InnerError = &innerError{Code: e.inner}
	}
	writeJSON(w, e.status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only the fake's own types are encoded, so this is a bug in the fake.
		http.Error(w, "azurekvfake: encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// internal is a failure of the fake itself.
func internal(msg string) *apiError {
	return &apiError{status: http.StatusInternalServerError, code: "InternalServerError", message: "azurekvfake: " + msg}
}
