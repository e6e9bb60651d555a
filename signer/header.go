package signer

import (
	"encoding/base64"

	"github.com/cardsign/cardsign/jose"
)

// b64 is base64url without padding (RFC 7515 §2); Strict refuses encodings
// with stray low bits, so one signature has exactly one text form.
var b64 = base64.RawURLEncoding.Strict()

// protectedHeader serializes {"alg","jku"?,"kid","typ":"JOSE"} with sorted
// keys and no whitespace, so the same key and options always give the same
// `protected` value.
func protectedHeader(alg jose.Alg, kid, jku string) []byte {
	b := make([]byte, 0, 64+len(kid)+len(jku))
	b = append(b, `{"alg":`...)
	b = appendJSONString(b, string(alg))
	if jku != "" {
		b = append(b, `,"jku":`...)
		b = appendJSONString(b, jku)
	}
	b = append(b, `,"kid":`...)
	b = appendJSONString(b, kid)
	b = append(b, `,"typ":"JOSE"}`...)
	return b
}

// signingInput is ASCII(b64url(protected) "." b64url(payload)) (RFC 7515 §5.1).
func signingInput(protectedB64 string, payload []byte) []byte {
	in := make([]byte, 0, len(protectedB64)+1+b64.EncodedLen(len(payload)))
	in = append(in, protectedB64...)
	in = append(in, '.')
	return b64.AppendEncode(in, payload)
}

func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
