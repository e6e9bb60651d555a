package oidc

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cardsign/cardsign/strictjson"
)

// LooksLikeJWT reports whether a bearer value has the shape of a compact JWS:
// three dot-separated base64url segments, the first starting with "eyJ" (the
// encoding of `{"`). It is a cheap routing test, not a check: a value that
// passes goes to Verify rather than to the static token table. Static tokens
// minted by cardsign never contain a dot.
func LooksLikeJWT(bearer string) bool {
	if !strings.HasPrefix(bearer, "eyJ") || strings.Count(bearer, ".") != 2 {
		return false
	}
	for i := 0; i < len(bearer); i++ {
		if c := bearer[i]; c != '.' && !isBase64URL(c) {
			return false
		}
	}
	h, rest, _ := strings.Cut(bearer, ".")
	p, _, _ := strings.Cut(rest, ".")
	return h != "" && p != ""
}

func isBase64URL(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// maxJSONDepth bounds nesting in a header or claim set. Real ID tokens nest
// three levels (Kubernetes); the cap keeps a hostile token from making the
// recursive parser and the flattener go deep.
const maxJSONDepth = 16

// header is what we read from a JOSE header.
type header struct {
	alg string
	kid string
}

// parsed is a token that passed the structural checks, signature unchecked.
type parsed struct {
	header header
	claims map[string]any
}

// parse runs the checks that need neither configuration nor keys: shape,
// encoding, strict JSON, alg family and crit. Its errors say which segment
// failed but never quote it.
func parse(raw string) (*parsed, *Error) {
	switch n := strings.Count(raw, "."); {
	case n == 4:
		return nil, refuse(ReasonJWE, "an encrypted token (JWE, five segments) is not an identity token we accept")
	case n != 2:
		return nil, refuse(ReasonMalformed, "a compact JWS has 3 segments, not %d", n+1)
	}
	segs := strings.SplitN(raw, ".", 3)

	// Header names are compared case-insensitively for duplicates: JSON
	// decoders disagree on case folding ("alg" vs "Alg"), and a header that
	// reads differently to us and to the signature library must not pass.
	hdr, refused := segmentObject(segs[0], "header", true)
	if refused != nil {
		return nil, refused
	}
	if _, ok := hdr["crit"]; ok {
		return nil, refuse(ReasonCrit, `header has "crit": no JWS extension is understood here`)
	}
	var h header
	alg, ok := hdr["alg"].(string)
	switch {
	case !ok:
		return nil, refuse(ReasonAlg, `header has no "alg" string`)
	case !isAsymmetric(alg):
		// Before any issuer lookup or network: "none" and HMAC are never
		// acceptable, whoever the token claims to come from.
		return nil, refuse(ReasonAlg, "algorithm %s is not an allowed asymmetric signature algorithm", safeLabel(alg))
	}
	h.alg = alg
	if v, present := hdr["kid"]; present {
		if h.kid, ok = v.(string); !ok {
			return nil, refuse(ReasonMalformed, `header "kid" is not a string`)
		}
	}

	claims, refused := segmentObject(segs[1], "claims", false)
	if refused != nil {
		return nil, refused
	}
	if _, err := decodeSegment(segs[2]); err != nil {
		return nil, refuse(ReasonMalformed, "signature: %v", err)
	}
	return &parsed{header: h, claims: claims}, nil
}

// segmentObject decodes seg, the token's segment name, and parses it as a
// JSON object (names compared case-insensitively when foldCase).
func segmentObject(seg, name string, foldCase bool) (map[string]any, *Error) {
	b, err := decodeSegment(seg)
	if err != nil {
		return nil, refuse(ReasonMalformed, "%s: %v", name, err)
	}
	obj, err := parseObject(b, foldCase)
	if err != nil {
		return nil, jsonRefusal(name, err)
	}
	return obj, nil
}

func isAsymmetric(alg string) bool { return slices.Contains(asymmetricAlgorithms, alg) }

// safeLabel returns s quoted when it is a short printable ASCII word (an
// algorithm name worth logging) and a placeholder otherwise, so that a
// hostile header cannot put arbitrary text into logs.
func safeLabel(s string) string {
	if len(s) == 0 || len(s) > 16 {
		return "(unprintable)"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return "(unprintable)"
		}
	}
	return fmt.Sprintf("%q", s)
}

// decodeSegment decodes unpadded base64url strictly: padding, the standard
// alphabet, line breaks and non-zero trailing bits are all refused, so that
// one token has exactly one encoding.
func decodeSegment(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, errors.New("not base64url without padding")
	}
	return b, nil
}

var errDuplicate = errors.New("duplicate name")

func jsonRefusal(what string, err error) *Error {
	if errors.Is(err, errDuplicate) {
		return refuse(ReasonDuplicateKey, "%s: %v", what, err)
	}
	return refuse(ReasonMalformed, "%s: %v", what, err)
}

// parseObject decodes a JSON object with cardsign's strict parser: a name
// twice in any object is an error (encoding/json would keep the last one, and
// another parser the first, so a signed token could mean two things), as is
// anything after the object, invalid UTF-8 or a lone surrogate. With foldCase
// two names equal but for case are duplicates too. Numbers stay json.Number,
// so large integers keep their digits. The size is capped by the token's
// (Config.MaxTokenBytes), the nesting by maxJSONDepth.
func parseObject(b []byte, foldCase bool) (map[string]any, error) {
	v, err := strictjson.Parse(b, strictjson.Limits{MaxBytes: len(b), MaxDepth: maxJSONDepth})
	if err != nil {
		return nil, parseError(err)
	}
	if foldCase && hasFoldedDuplicate(v) {
		return nil, errDuplicate
	}
	return toAny(v).(map[string]any), nil
}

// parseError says what kind of JSON a segment is not, without quoting it:
// strictjson's messages name members and values from the token.
func parseError(err error) error {
	var e *strictjson.Error
	if !errors.As(err, &e) {
		return errors.New("invalid JSON")
	}
	switch e.Rule {
	case strictjson.RuleDuplicateKey:
		return errDuplicate
	case strictjson.RuleDepth:
		return fmt.Errorf("JSON nested deeper than %d", maxJSONDepth)
	case strictjson.RuleNotObject:
		return errors.New("not a JSON object")
	case strictjson.RuleTrailingData:
		return errors.New("data after the JSON object")
	}
	return fmt.Errorf("invalid JSON (%s)", e.Rule)
}

// hasFoldedDuplicate reports whether an object in v has two member names
// equal but for case: JSON decoders disagree on case folding.
func hasFoldedDuplicate(v strictjson.Value) bool {
	switch v.Kind {
	case strictjson.Array:
		return slices.ContainsFunc(v.Arr, hasFoldedDuplicate)
	case strictjson.Object:
		folded := make(map[string]bool, len(v.Obj))
		for _, m := range v.Obj {
			k := strings.ToLower(m.Key)
			if folded[k] || hasFoldedDuplicate(m.Val) {
				return true
			}
			folded[k] = true
		}
	}
	return false
}

// toAny turns a parsed value into what encoding/json would decode with
// UseNumber: nil, bool, json.Number, string, []any, map[string]any.
func toAny(v strictjson.Value) any {
	switch v.Kind {
	case strictjson.Bool:
		return v.Bool
	case strictjson.Number:
		return json.Number(v.Str)
	case strictjson.String:
		return v.Str
	case strictjson.Array:
		arr := make([]any, len(v.Arr))
		for i, e := range v.Arr {
			arr[i] = toAny(e)
		}
		return arr
	case strictjson.Object:
		obj := make(map[string]any, len(v.Obj))
		for _, m := range v.Obj {
			obj[m.Key] = toAny(m.Val)
		}
		return obj
	}
	return nil
}
