// Package pemkey reads an unencrypted private key from a PEM block, in the
// DER format its label names: "PRIVATE KEY" (PKCS #8), "EC PRIVATE KEY"
// (SEC 1) or "RSA PRIVATE KEY" (PKCS #1).
//
// It reads one block and nothing else: which blocks of a file count, and what
// an error may say about the file, differ between its callers (a signing key
// file never quotes its content; a TLS key file may quote the x509 parser),
// so those rules stay with them.
package pemkey

import (
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
)

// ErrUnsupportedLabel is returned for a label that names none of the formats
// Parse reads (including "ENCRYPTED PRIVATE KEY": encrypted keys are not read).
var ErrUnsupportedLabel = errors.New("pemkey: unsupported PEM label")

// FormatError is a block whose bytes are not a key in the format its label
// names. Err is the x509 parser's error, which can quote what it found (an
// algorithm OID): callers that must not quote a file's content leave it out.
type FormatError struct {
	Label string
	Err   error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("pemkey: PEM %q block is not a valid key in that format: %v", e.Label, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// CannotSignError is a key that parsed but cannot sign (an X25519 key in
// PKCS #8, say). Key is the parsed key, for its type.
type CannotSignError struct {
	Key any
}

func (e *CannotSignError) Error() string {
	return fmt.Sprintf("pemkey: a %T cannot sign", e.Key)
}

// Supported reports whether Parse reads blocks with this label.
func Supported(label string) bool {
	_, ok := parser(label)
	return ok
}

// Parse returns the private key that der holds in the format label names.
// The label is trusted, not guessed around: a PKCS #1 key labelled "PRIVATE
// KEY" is a FormatError (FormatOf tells the caller what it is instead).
func Parse(label string, der []byte) (crypto.Signer, error) {
	parse, ok := parser(label)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnsupportedLabel, label)
	}
	k, err := parse(der)
	if err != nil {
		return nil, &FormatError{Label: label, Err: err}
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, &CannotSignError{Key: k}
	}
	return s, nil
}

// FormatOf returns the label whose format der parses as, trying every label
// but except, or "" when none does: a hint for a key under the wrong label.
func FormatOf(der []byte, except string) string {
	for _, label := range []string{"PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY"} {
		if label == except {
			continue
		}
		if parse, _ := parser(label); parse != nil {
			if _, err := parse(der); err == nil {
				return label
			}
		}
	}
	return ""
}

// parser returns the x509 parser for a label's DER format.
func parser(label string) (func([]byte) (any, error), bool) {
	switch label {
	case "PRIVATE KEY":
		return x509.ParsePKCS8PrivateKey, true
	case "EC PRIVATE KEY":
		return func(b []byte) (any, error) { return x509.ParseECPrivateKey(b) }, true
	case "RSA PRIVATE KEY":
		return func(b []byte) (any, error) { return x509.ParsePKCS1PrivateKey(b) }, true
	}
	return nil, false
}
