package approval

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"strings"

	"github.com/cardsign/cardsign/strictjson"
)

// NewID is "apr_" and 128 random bits in lower-case base32: an id nobody
// guesses, safe in a URL and a shell.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return "apr_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// CheckID refuses what NewID never makes, before the store sees it; field
// names the argument in the error.
func CheckID(field, id string) error {
	rest, ok := strings.CutPrefix(id, "apr_")
	if !ok || len(rest) != 26 || strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz234567") != "" {
		return &InvalidError{Field: field, Reason: fmt.Sprintf("%s is not an approval id (apr_ and 26 of a-z 2-7, as sign printed it)", strictjson.QuoteForMessage(id))}
	}
	return nil
}
