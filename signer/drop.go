package signer

import (
	"fmt"

	"github.com/cardsign/cardsign/card"
)

// DropSignatures returns a signed card without the signatures whose
// protected header names a kid for which drop reports true. A registry that
// learns of a revoked key serves its cards without that key's signatures at
// once, before they are signed again: the other signatures cover canonical bytes, which the signatures
// member is not part of, so they still verify. A card that drops nothing is
// returned as it is; one that does is rendered again, indented like a card
// Sign returns. A signature whose header cannot be read is kept (drop
// cannot judge it, and verifiers refuse it anyway).
func DropSignatures(signed []byte, drop func(kid string) bool) ([]byte, error) {
	// The card was read under the daemon's limits before it was signed;
	// signing adds its signatures (a few levels deep, a few KiB).
	v, err := card.Parse(signed, card.Limits{MaxBytes: len(signed), MaxDepth: 1 << 10})
	if err != nil {
		return nil, fmt.Errorf("signer: drop signatures: %w", err)
	}
	sigs, ok := v.Get("signatures")
	if !ok || sigs.Kind != card.Array {
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
func keepSignatures(sigs []card.Value, drop func(kid string) bool) []card.Value {
	var keep []card.Value
	for _, s := range sigs {
		kid := ""
		if p, ok := s.Get("protected"); ok && p.Kind == card.String {
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
