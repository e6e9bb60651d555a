package signer

import (
	"fmt"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/strictjson"
)

// DropSignatures returns a signed card without the signatures whose
// protected header names a kid for which drop reports true. A registry that
// learns of a revoked key serves its cards without that key's signatures at
// once, before they are signed again: the other signatures cover canonical bytes, which the signatures
// member is not part of, so they still verify. A card that drops nothing is
// returned as it is; one that does is rendered again, indented like a card
// Sign returns. A signature whose header cannot be read is kept (drop
// cannot judge it, and verifiers refuse it anyway).
//
// lim is the limits the card was read under before it was signed (the
// daemon's configured card limits): a card within them stays readable here,
// however far they are from the defaults.
func DropSignatures(signed []byte, lim strictjson.Limits, drop func(kid string) bool) ([]byte, error) {
	v, err := card.Parse(signed, signedLimits(lim, len(signed)))
	if err != nil {
		return nil, fmt.Errorf("signer: drop signatures: %w", err)
	}
	sigs, ok := v.Get("signatures")
	if !ok || sigs.Kind != strictjson.Array {
		return signed, nil
	}
	keep := keepSignatures(sigs.Arr, drop)
	if len(keep) == len(sigs.Arr) {
		return signed, nil
	}
	return withSignatures(v, keep).AppendIndent(make([]byte, 0, len(signed))), nil
}

// keepSignatures returns the signature objects of sigs but those whose
// protected header names a kid for which drop reports true (sigs itself
// when none does). A signature whose header cannot be read is kept.
func keepSignatures(sigs []strictjson.Value, drop func(kid string) bool) []strictjson.Value {
	var keep []strictjson.Value
	for _, s := range sigs {
		kid := ""
		if p, ok := s.Get("protected"); ok && p.Kind == strictjson.String {
			if h, err := parseHeader(p.Str); err == nil {
				kid = h.kid
			}
		}
		if kid != "" && drop(kid) {
			continue
		}
		keep = append(keep, s)
	}
	if len(keep) == len(sigs) {
		return sigs
	}
	return keep
}

// signedLimits are the limits for reading back a card that was read under
// lim and then signed: the bytes are our own, and signing added to them.
// Mapping a v0.3 card adds at most one value per object of two or more
// (an interface's protocolVersion, a security scheme's wrapper), so at most
// doubles the values; the signatures add a few levels, a few values each
// and one array (more items than the card's own arrays when it kept
// signatures).
func signedLimits(lim strictjson.Limits, size int) strictjson.Limits {
	values, items := lim.MaxValues, lim.MaxItems
	if values <= 0 {
		values = card.DefaultMaxValues
	}
	if items <= 0 {
		items = card.DefaultMaxItems
	}
	return strictjson.Limits{
		MaxBytes:  max(size, lim.MaxBytes),
		MaxDepth:  1 << 10,
		MaxValues: 2*values + signedAllowance,
		MaxItems:  items + signedAllowance,
	}
}

// signedAllowance is room for the signatures signing adds, past the
// card's limits.
const signedAllowance = 1024
