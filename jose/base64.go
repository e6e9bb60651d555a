package jose

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// b64 encodes as JOSE base64url: URL alphabet, no padding (RFC 7515 §2).
func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// DecodeBase64URL decodes JOSE base64url strictly: no padding, no line breaks (which
// encoding/base64 would skip), no non-zero trailing bits. Each key value then
// has exactly one encoding, so a thumbprint cannot be changed by re-encoding.
func DecodeBase64URL(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("base64url value contains a line break")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not unpadded base64url: %w", err)
	}
	return b, nil
}
