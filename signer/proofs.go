package signer

import (
	"fmt"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
)

// Proofs returns the inclusion proof (transparency.HeaderMember of the
// unprotected header) of each signature of the signed card, "" for a
// signature without one.
func Proofs(signed []byte, lim strictjson.Limits) ([]string, error) {
	v, err := card.Parse(signed, signedLimits(lim, len(signed)))
	if err != nil {
		return nil, fmt.Errorf("signer: proofs: %w", err)
	}
	sigs, ok := v.Get("signatures")
	if !ok || sigs.Kind != strictjson.Array {
		return nil, nil
	}
	out := make([]string, len(sigs.Arr))
	for i, s := range sigs.Arr {
		if h, ok := s.Get("header"); ok && h.Kind == strictjson.Object {
			if p, ok := h.Get(transparency.HeaderMember); ok && p.Kind == strictjson.String {
				out[i] = p.Str
			}
		}
	}
	return out, nil
}

// ReplaceProofs returns the signed card with the inclusion proof of each
// signature i for which proofs[i] is not "" replaced by proofs[i]. Nothing
// signed changes (the unprotected header is outside the signature); the
// card is rendered again as Sign renders it, so a card as cardsign signed
// it differs only in the proofs, and one laid out otherwise (compacted by
// a registry, say) also in its whitespace.
func ReplaceProofs(signed []byte, lim strictjson.Limits, proofs []string) ([]byte, error) {
	v, err := card.Parse(signed, signedLimits(lim, len(signed)))
	if err != nil {
		return nil, fmt.Errorf("signer: replace proofs: %w", err)
	}
	sigs, ok := v.Get("signatures")
	if !ok || sigs.Kind != strictjson.Array || len(sigs.Arr) != len(proofs) {
		return nil, fmt.Errorf("signer: replace proofs: %d proofs for a card of %d signatures", len(proofs), len(sigs.Arr))
	}
	out := make([]strictjson.Value, len(sigs.Arr))
	for i, s := range sigs.Arr {
		out[i] = s
		if proofs[i] == "" {
			continue
		}
		members := make([]strictjson.Member, 0, len(s.Obj)+1)
		placed := false
		for _, m := range s.Obj {
			if m.Key == "header" && m.Val.Kind == strictjson.Object {
				hm := make([]strictjson.Member, 0, len(m.Val.Obj))
				for _, h := range m.Val.Obj {
					if h.Key == transparency.HeaderMember {
						h = strictjson.Member{Key: h.Key, Val: strictjson.StringValue(proofs[i])}
						placed = true
					}
					hm = append(hm, h)
				}
				m = strictjson.Member{Key: m.Key, Val: strictjson.ObjectValue(hm...)}
			}
			members = append(members, m)
		}
		if !placed {
			return nil, fmt.Errorf("signer: replace proofs: signature %d carries no %s to replace", i, transparency.HeaderMember)
		}
		out[i] = strictjson.ObjectValue(members...)
	}
	return withSignatures(v, out).AppendIndent(make([]byte, 0, len(signed)+512)), nil
}
