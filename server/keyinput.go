package server

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Key RPC inputs end up in the JWKS, the revocation document, logs and the
// CLI's output, read by programs that trust them to be short and printable.
// These checks run before anything is stored.

// MaxKIDLength bounds a kid. An RFC 7638 thumbprint (the default kid) is 43
// characters; a KMS key name used as a kid stays well under this.
const MaxKIDLength = 128

// checkKID refuses a kid that is empty, longer than MaxKIDLength or holds a
// character outside [A-Za-z0-9._:-]: it is published in the JWKS, printed by
// verifiers and matched byte for byte, so it must not carry control
// characters, spaces or look-alike Unicode.
func checkKID(field, kid string) error {
	if kid == "" {
		return &InvalidArgumentError{Field: field, Reason: "a kid is required"}
	}
	if len(kid) > MaxKIDLength {
		return &InvalidArgumentError{Field: field, Reason: fmt.Sprintf("a kid is at most %d characters, not %d", MaxKIDLength, len(kid))}
	}
	for i, r := range kid {
		if !kidChar(r) {
			return &InvalidArgumentError{Field: field, Reason: fmt.Sprintf("character %q at offset %d is not allowed: a kid holds only A-Z a-z 0-9 . _ : -", r, i)}
		}
	}
	return nil
}

func kidChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-'
}

// MaxPrepublish bounds RotateKey's prepublish period: a year is already far
// longer than any JWKS cache, and the bound keeps seconds from overflowing a
// time.Duration (about 292 years).
const MaxPrepublish = 366 * 24 * time.Hour

// revocationReasons are the codes a revocation reason starts with, after the
// reason codes of RFC 5280 §5.3.1 that apply to a signing key.
var revocationReasons = [...]string{"unspecified", "key-compromise", "superseded", "cessation-of-operation", "affiliation-changed", "privilege-withdrawn"}

// MaxReasonNote bounds the free text after a reason code. Every revocation
// stays in the revocation document for good, and verifiers read that document
// whole (at most 1 MiB): a short note keeps thousands of revocations in it.
const MaxReasonNote = 200

// checkReason normalises a revocation reason: a code from revocationReasons,
// optionally followed by ": " and a note of at most MaxReasonNote printable
// characters. An empty reason is "unspecified".
func checkReason(reason string) (string, error) {
	if reason == "" {
		return "unspecified", nil
	}
	code, note, hasNote := strings.Cut(reason, ":")
	known := false
	for _, c := range revocationReasons {
		known = known || code == c
	}
	if !known {
		// Free text (`--reason "key compromise"`, as scripts wrote it
		// before the codes): kept as the note of "unspecified", so a
		// revocation during an incident is not refused over its wording.
		code, note, hasNote = "unspecified", reason, true
	}
	if !hasNote {
		return code, nil
	}
	note = strings.TrimSpace(note)
	switch {
	case note == "":
		return code, nil
	case !utf8.ValidString(note):
		return "", &InvalidArgumentError{Field: "reason", Reason: "the note is not valid UTF-8"}
	case utf8.RuneCountInString(note) > MaxReasonNote:
		return "", &InvalidArgumentError{Field: "reason", Reason: fmt.Sprintf("the note is at most %d characters, not %d", MaxReasonNote, utf8.RuneCountInString(note))}
	}
	for _, r := range note {
		if !unicode.IsPrint(r) {
			return "", &InvalidArgumentError{Field: "reason", Reason: fmt.Sprintf("the note holds %q: only printable characters and spaces are allowed", r)}
		}
	}
	return code + ": " + note, nil
}
