package registry

import (
	"strconv"
	"strings"

	"github.com/cardsign/cardsign/aicatalog"
)

// The card URL serves the same bytes under two media types: application/json,
// what it always served, and the A2A card type an AI Catalog entry names
// (aicatalog.A2ACardType), for clients that ask for it.

// CardMediaType is the A2A Agent Card's media type.
const CardMediaType = aicatalog.A2ACardType

// maxAcceptRanges bounds the media ranges read from Accept: a header of
// thousands of ranges costs work, and no client needs more than a few.
const maxAcceptRanges = 32

// wantsCardType reports whether the Accept fields ask for CardMediaType:
// they name it (not through a wildcard) with a q above 0, and rate it at
// least as high as application/json (RFC 9110 §12.5.1: the most specific
// range that matches a type gives its q). Anything else, no Accept at all
// included, keeps application/json, so existing clients see no change.
func wantsCardType(fields []string) bool {
	var qCard, qJSON, qAppAny, qAny float64 = -1, -1, -1, -1
	n := 0
	for _, f := range fields {
		for r := range strings.SplitSeq(f, ",") {
			if n++; n > maxAcceptRanges {
				break
			}
			typ, q, ok := mediaRange(r)
			if !ok {
				continue
			}
			set := func(dst *float64) { *dst = max(*dst, q) }
			switch typ {
			case CardMediaType:
				set(&qCard)
			case "application/json":
				set(&qJSON)
			case "application/*":
				set(&qAppAny)
			case "*/*":
				set(&qAny)
			}
		}
	}
	if qCard <= 0 {
		return false
	}
	json := qJSON
	if json < 0 {
		json = qAppAny
	}
	if json < 0 {
		json = qAny
	}
	return qCard >= json
}

// mediaRange reads one media range of Accept: its type, lowercased, and
// its q (1 when absent); ok is false when it is empty or its q is not a
// number between 0 and 1.
func mediaRange(r string) (typ string, q float64, ok bool) {
	params := strings.Split(r, ";")
	typ = strings.ToLower(strings.TrimSpace(params[0]))
	if typ == "" {
		return "", 0, false
	}
	q = 1
	for _, p := range params[1:] {
		name, value, _ := strings.Cut(p, "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || !(v >= 0 && v <= 1) { // NaN too
			return "", 0, false
		}
		q = v
	}
	return typ, q, true
}
