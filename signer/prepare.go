package signer

import (
	"crypto/sha256"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/strictjson"
)

// PrepareOptions control Prepare.
type PrepareOptions struct {
	Card card.Options
	Mode Mode
	// KeepSignatures keeps the card's existing signatures (ours are
	// appended after them); by default they are replaced.
	KeepSignatures bool
	// DropKept, when set, leaves out of the kept signatures those whose
	// protected header names a kid for which it reports true: the daemon's
	// own revoked keys, whose signatures it never serves (DESIGN §11).
	DropKept func(kid string) bool
}

// Prepared is a card parsed, mapped to v1.0, linted and canonicalized: all
// that signing needs except keys. A caller decides on it (the daemon's
// signing policy) before any key is opened or any signature made.
type Prepared struct {
	Loaded   *card.Loaded
	Warnings []card.Finding
	// CanonicalSHA256 is the SHA-256 of the spec-profile canonical bytes:
	// the identity of the card's content for audit records.
	CanonicalSHA256 [32]byte
	// Divergences lists the values the spec and sdk profiles treat
	// differently when the card needed a signature for each.
	Divergences []string
	// PythonDivergences lists what a2a-python ≤ 1.1 writes otherwise than
	// RFC 8785 (non-ASCII text, numbers, key order) when the card needed a
	// python-ascii signature for it.
	PythonDivergences []string
	// Portability says, for each verifier family, which signature covers
	// the bytes it computes.
	Portability []Support

	payloads []payload          // what each key signs, one per profile
	kept     []strictjson.Value // the card's signatures that stay (KeepSignatures)
}

// payload is the canonical bytes of one profile.
type payload struct {
	profile card.Profile
	bytes   []byte
}

// Prepare parses, lints and canonicalizes a card and chooses the profiles
// its signatures cover. A malformed card is refused with a *strictjson.Error, one
// with lint errors with a *card.LintError. It opens no key: a card's faults
// are reported whatever the state of the key backends.
func Prepare(data []byte, opts PrepareOptions) (*Prepared, error) {
	loaded, err := card.Load(data, opts.Card)
	if err != nil {
		return nil, err
	}
	findings := card.Lint(loaded.Value)
	if card.HasErrors(findings) {
		return nil, &card.LintError{Findings: findings}
	}
	p := &Prepared{Loaded: loaded, Warnings: findings}

	forms, err := card.CanonicalForms(loaded.Value)
	if err != nil {
		return nil, err
	}
	p.CanonicalSHA256 = sha256.Sum256(forms.Spec)
	switch opts.Mode {
	case ModeSpec:
		p.payloads = []payload{{card.ProfileSpec, forms.Spec}}
	case ModeSDK:
		p.payloads = []payload{{card.ProfileSDK, forms.SDK}}
	case ModePythonASCII:
		p.payloads = []payload{{card.ProfilePythonASCII, forms.Python}}
	default:
		// One signature per distinct bytes: most cards need one.
		for _, prof := range AutoProfiles(forms) {
			p.payloads = append(p.payloads, payload{prof, formBytes(forms, prof)})
			switch prof {
			case card.ProfileSDK:
				p.Divergences = forms.Divergences
			case card.ProfilePythonASCII:
				p.PythonDivergences = forms.PythonDivergences
			}
		}
	}
	signed := make([]card.Profile, len(p.payloads))
	for i, pl := range p.payloads {
		signed[i] = pl.profile
	}
	p.Portability = Portability(forms, signed)

	if opts.KeepSignatures {
		if old, ok := loaded.Value.Get("signatures"); ok && old.Kind == strictjson.Array {
			p.kept = old.Arr
			if opts.DropKept != nil {
				p.kept = keepSignatures(old.Arr, opts.DropKept)
			}
		}
	}
	return p, nil
}
