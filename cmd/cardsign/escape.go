package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cardsign/cardsign/signer"
)

// Every string cardsign prints that a caller, a card, a daemon or a log
// supplied goes through this file: an OIDC subject, a card name or a
// revocation reason can hold a newline, an escape sequence or a bidi
// override, and printed raw it would forge output lines or drive the
// terminal. One rule decides what is unsafe (printable reports it), in the
// three shapes output takes: running text (escapeText), a value among
// fields on a line (escapeValue) and JSON (escapeJSON).

// printable reports whether r may reach a terminal as it is: letters,
// marks, numbers, punctuation, symbols and the ASCII space. Controls (C0,
// C1, DEL), format characters (bidi overrides, zero-width ones), line and
// paragraph separators, private-use and unassigned code points are not.
func printable(r rune) bool {
	return r == ' ' || (r != utf8.RuneError && unicode.IsPrint(r))
}

// escapeText makes running text (a reason, an error that quotes a card)
// safe for a terminal: every character that is not printable, and every
// byte of invalid UTF-8, is written as its Go escape; printable text,
// spaces included, is unchanged.
func escapeText(s string) string {
	if allPrintable(s, false) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case printable(r):
			b.WriteString(s[:size])
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[size:]
	}
	return b.String()
}

// allPrintable reports whether every character of s is printable (with
// newlines, the line breaks of JSON text, counted as printable), so that
// the escapers return clean text as it is.
func allPrintable(s string, newlines bool) bool {
	for _, r := range s {
		if !printable(r) && (!newlines || r != '\n') {
			return false
		}
	}
	return true
}

// escapeValue prints one value among others on a line (a caller, a kid, an
// agent id): bare when it is a plain word of printable ASCII, else
// Go-quoted with everything outside printable ASCII escaped, so that a
// space cannot start a forged field and a look-alike letter shows as its
// code point. It is signer.Printable, which the signer's own messages use:
// a kid reads the same in both.
func escapeValue(s string) string { return signer.Printable(s) }

// escapeValues prints a list of values as one field: each escaped, joined
// by commas.
func escapeValues(list []string) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = escapeValue(s)
	}
	return strings.Join(out, ",")
}

// escapeJSON rewrites JSON text (as encoding/json writes it) so that no
// character that is not printable appears raw: encoding/json escapes C0
// controls and U+2028/U+2029 but writes DEL, C1 controls and bidi
// overrides as they are. Outside strings JSON text is ASCII, so every
// character rewritten is inside a string, and a \u escape there decodes to
// the same value: a program reading the line sees no difference.
func escapeJSON(b []byte) []byte {
	if allPrintable(string(b), true) {
		return b
	}
	var out bytes.Buffer
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == '\n' || printable(r):
			out.Write(b[:size])
		case r >= 0x10000:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, r1, r2)
		default: // invalid UTF-8 is written by encoding/json as U+FFFD, never raw
			fmt.Fprintf(&out, `\u%04x`, r)
		}
		b = b[size:]
	}
	return out.Bytes()
}

// isTerminal reports whether w is a character device (a terminal), where a
// document is shown rather than saved.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// showDocument writes a JSON document (a signed card) to w: byte for byte,
// or, for a terminal, with every character escapeJSON escapes as a \u
// escape, so that a card's strings cannot drive the terminal.
func showDocument(w io.Writer, b []byte, terminal bool) {
	if terminal {
		b = escapeJSON(b)
	}
	w.Write(b)
}
