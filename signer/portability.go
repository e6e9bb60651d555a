package signer

import (
	"bytes"
	"strings"

	"github.com/cardsign/cardsign/card"
)

// A verifier family accepts a card when one of its signatures verifies over
// the canonical bytes that family computes. The shipped verifiers compute
// three different byte strings between them, and read a v0.3 card each in
// its own way; these are the families cardsign knows, with the profile that
// reproduces each one's bytes and the mapping it applies to a v0.3 card.
var verifierFamilies = [...]struct {
	name    string
	profile card.Profile
	mapping card.Mapping
	// resolver: the bytes of @a2a-js/sdk's resolver path (a2a-js#663),
	// Forms.JSResolver.
	resolver bool
}{
	{"spec", card.ProfileSpec, card.MappingCardsign, false},                 // A2A v1.0 §8.4.1 to the letter
	{"@a2a-js/sdk ≥1.3", card.ProfileSDK, card.MappingJS, false},            // cleanEmpty, then RFC 8785
	{"a2a-python ≥1.2", card.ProfileSDK, card.MappingPython, false},         // after its RFC 8785 fix
	{"a2a-python ≤1.1", card.ProfilePythonASCII, card.MappingPython, false}, // json.dumps, ensure_ascii
	{"@a2a-js/sdk resolver", card.ProfileSDK, card.MappingJS, true},         // DefaultAgentCardResolver, then verifyAgentCardSignature
}

// ReasonJSResolverBug is the Support.Reason of the @a2a-js/sdk resolver
// family for a card whose security schemes that path loses: no signature
// can cover what it computes without leaving the schemes unsigned.
const ReasonJSResolverBug = "SDK bug a2a-js#663"

// Support says whether one verifier family accepts a card.
type Support struct {
	Verifier string       // e.g. "a2a-python ≤1.1"
	Profile  card.Profile // the bytes that verifier computes
	Covered  bool
	// By is the profile of the signature whose bytes are the verifier's,
	// when Covered (the same bytes can serve several families).
	By card.Profile
	// Reason says why not, when !Covered.
	Reason string
}

// Portability reports, for each verifier family, whether a signature over
// one of the signed profiles covers the bytes that family computes.
func Portability(forms *card.Forms, signed []card.Profile) []Support {
	covered := make([]signedForm, len(signed))
	for i, p := range signed {
		covered[i] = signedForm{p, formBytes(forms, p)}
	}
	return portability(func(card.Mapping) *card.Forms { return forms }, covered)
}

// signedForm is the bytes a signature covers and their profile.
type signedForm struct {
	profile card.Profile
	bytes   []byte
}

// portability is Portability over the forms of each mapping's reading of the
// card (one reading for a v1.0 card).
func portability(formsOf func(card.Mapping) *card.Forms, signed []signedForm) []Support {
	out := make([]Support, 0, len(verifierFamilies))
	for _, f := range verifierFamilies {
		s := Support{Verifier: f.name, Profile: f.profile}
		forms := formsOf(f.mapping)
		want := formBytes(forms, f.profile)
		if f.resolver {
			want = forms.JSResolver
		}
		for _, sf := range signed {
			if bytes.Equal(sf.bytes, want) {
				s.Covered, s.By = true, sf.profile
				break
			}
		}
		switch {
		case s.Covered:
		case f.resolver && !bytes.Equal(forms.JSResolver, forms.SDK):
			s.Reason = ReasonJSResolverBug
		default:
			s.Reason = "no signature over " + string(f.profile) + " bytes"
		}
		out = append(out, s)
	}
	return out
}

// AutoProfiles are the profiles Sign signs in ModeAuto: the spec profile,
// then each other profile whose bytes no earlier one has.
func AutoProfiles(forms *card.Forms) []card.Profile {
	out := []card.Profile{card.ProfileSpec}
	for _, p := range []card.Profile{card.ProfileSDK, card.ProfilePythonASCII} {
		seen := false
		for _, q := range out {
			seen = seen || bytes.Equal(formBytes(forms, p), formBytes(forms, q))
		}
		if !seen {
			out = append(out, p)
		}
	}
	return out
}

func formBytes(forms *card.Forms, p card.Profile) []byte {
	switch p {
	case card.ProfileSDK:
		return forms.SDK
	case card.ProfilePythonASCII:
		return forms.Python
	}
	return forms.Spec
}

// FormatPortability renders a report on one line:
// "verifies in: spec ✔  @a2a-js/sdk ≥1.3 ✔  a2a-python ≥1.2 ✔  a2a-python ≤1.1 ✘ (no signature over python-ascii bytes)".
func FormatPortability(prefix string, rows []Support) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i, r := range rows {
		if i > 0 {
			b.WriteString("  ")
		}
		b.WriteString(r.Verifier)
		if r.Covered {
			b.WriteString(" ✔")
			continue
		}
		b.WriteString(" ✘ (" + r.Reason + ")")
	}
	return b.String()
}
