package aicatalog

import (
	"testing"
)

func TestVerifyCatalogPositiveControl(t *testing.T) {
	f := newFixture(t)
	f.rootPost = reverseAll
	f.entries[0].post = reverseManifests
	rep := f.run()
	if !rep.OK() {
		t.Fatalf("refused: %+v", rep)
	}
	if rep.Catalog.Signer != registryDID {
		t.Errorf("catalog signer %q", rep.Catalog.Signer)
	}
	if len(rep.Entries) != 2 {
		t.Fatalf("%d entries", len(rep.Entries))
	}
	// entries[0]'s manifests were reversed: assessor first.
	for _, e := range rep.Entries {
		for _, m := range e.Manifests {
			if !m.Accepted || len(m.Reasons) > 0 {
				t.Errorf("entry %d manifest %d: %+v", e.Index, m.Index, m)
			}
		}
	}
	if m := rep.Entries[0].Manifests; m[0].Signer != assessorDID || m[0].Publisher || !m[1].Publisher {
		t.Errorf("entry 0 manifests: %+v", m)
	}
	for did, n := range f.resolver.calls {
		if n != 1 {
			t.Errorf("%s resolved %d times, want once per verification", did, n)
		}
	}
}
