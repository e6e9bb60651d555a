package card

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cardsign/cardsign/strictjson"
)

// addCardSeeds seeds a fuzz target with the cards under testdata/cards; the
// targets' own corpora live in testdata/fuzz.
func addCardSeeds(f *testing.F) {
	files, err := filepath.Glob("../testdata/cards/*.json")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed cards: %v", err)
	}
	// The a2a-python vectors: non-ASCII text, Struct numbers, key order.
	vectors, err := filepath.Glob(pythonVectors + "/*.input.json")
	if err != nil || len(vectors) == 0 {
		f.Fatalf("no a2a-python vectors: %v", err)
	}
	files = append(files, vectors...)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// FuzzCanonicalize: Load, Lint and Canonical never panic, and canonical
// forms are fixed points: canonicalizing canonical bytes gives them back
// (python-ascii too: Python's output, read back by Python, prints the same).
func FuzzCanonicalize(f *testing.F) {
	addCardSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Load(data, Options{Limits: strictjson.Limits{MaxBytes: 1 << 16, MaxDepth: 32}})
		if err != nil {
			return
		}
		Lint(l.Value)
		StripUnknown(l.Value)
		forms, formsErr := CanonicalForms(l.Value)
		profileErrs := 0
		for _, p := range Profiles() {
			out, err := Canonical(l.Value, p)
			if err != nil {
				if _, ok := err.(*strictjson.Error); !ok {
					t.Fatalf("Canonical returned %T, want *strictjson.Error: %v", err, err)
				}
				profileErrs++
				continue
			}
			if formsErr == nil {
				// CanonicalForms skips the sdk pass when nothing diverges;
				// the independent computation must agree.
				// Likewise python-ascii is the sdk bytes when nothing is
				// written otherwise.
				if want := map[Profile][]byte{ProfileSpec: forms.Spec, ProfileSDK: forms.SDK, ProfilePythonASCII: forms.Python}[p]; !bytes.Equal(want, out) {
					t.Fatalf("CanonicalForms %s = %q, Canonical = %q (divergences %v)", p, want, out, forms.Divergences)
				}
			}
			again, err := Load(out, Options{Limits: strictjson.Limits{MaxBytes: 1 << 20, MaxDepth: 32}})
			if err != nil {
				t.Fatalf("%s canonical bytes do not parse: %q: %v", p, out, err)
			}
			twice, err := Canonical(again.Value, p)
			if err != nil || !bytes.Equal(twice, out) {
				t.Fatalf("%s canonical form is not a fixed point:\n%q\n%q (%v)", p, out, twice, err)
			}
		}
		// CanonicalForms fails exactly when some profile cannot be computed
		// (a proto-name alias of the wrong type is unknown to spec, an error
		// to sdk).
		if (formsErr != nil) != (profileErrs > 0) {
			t.Fatalf("CanonicalForms error %v, but %d profiles failed", formsErr, profileErrs)
		}
	})
}
