package awskmsfake

import (
	"fmt"
	"net/http"
)

// apiError is a KMS error response: HTTP status and the body's __type and
// message.
type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return e.typ + ": " + e.msg }

// errorf returns a 400 error of type typ, as KMS answers client errors.
func errorf(typ, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: typ, msg: fmt.Sprintf(format, args...)}
}

func notFound(id string) *apiError {
	return errorf("NotFoundException", "Key '%s' does not exist", id)
}

func validation(format string, args ...any) *apiError {
	return errorf("ValidationException", format, args...)
}
