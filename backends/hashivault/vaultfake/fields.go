package vaultfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// maxRequestSize is Vault's default max_request_size.
const maxRequestSize = 32 << 20

// fields is a request's JSON body. Vault's framework converts a field's
// value to the field's type leniently ("2" is an int, "true" a bool), and
// so do the getters, so a client sending strings works here as it does
// there.
type fields map[string]any

func parseFields(w http.ResponseWriter, r *http.Request) (fields, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestSize))
	if err != nil {
		return nil, &vaultError{errorReply(http.StatusRequestEntityTooLarge, err.Error())}
	}
	f := fields{}
	if len(bytes.TrimSpace(body)) == 0 {
		return f, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&f); err != nil {
		return nil, userError("failed to parse JSON input: %v", err)
	}
	return f, nil
}

func convError(name string, v any, err error) error {
	return userError("error converting input %v for field %q: %v", v, name, err)
}

// str returns the string field name, and whether it was given.
func (f fields) str(name string) (string, bool, error) {
	switch v := f[name].(type) {
	case nil:
		return "", false, nil
	case string:
		return v, true, nil
	case json.Number:
		return v.String(), true, nil
	case bool:
		return strconv.FormatBool(v), true, nil
	default:
		return "", false, convError(name, v, fmt.Errorf("expected a string, got %T", v))
	}
}

// integer returns the int field name, and whether it was given.
func (f fields) integer(name string) (int, bool, error) {
	var s string
	switch v := f[name].(type) {
	case nil:
		return 0, false, nil
	case json.Number:
		s = v.String()
	case string:
		s = v
	default:
		return 0, false, convError(name, v, fmt.Errorf("expected an integer, got %T", v))
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, false, convError(name, s, err)
	}
	return n, true, nil
}

// boolean returns the bool field name, and whether it was given.
func (f fields) boolean(name string) (bool, bool, error) {
	switch v := f[name].(type) {
	case nil:
		return false, false, nil
	case bool:
		return v, true, nil
	case string:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, false, convError(name, v, err)
		}
		return b, true, nil
	case json.Number:
		return v.String() != "0", true, nil
	default:
		return false, false, convError(name, v, fmt.Errorf("expected a bool, got %T", v))
	}
}

// seconds returns the duration field name, given in seconds or as a Go
// duration ("1h"), as Vault's TypeDurationSecond fields are.
func (f fields) seconds(name string) (time.Duration, bool, error) {
	if s, ok := f[name].(string); ok {
		if d, err := time.ParseDuration(s); err == nil {
			return d, true, nil
		}
	}
	n, ok, err := f.integer(name)
	return time.Duration(n) * time.Second, ok, err
}
