package webtrust

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
)

// release is an accepted manifest's issuedAt and the version it states.
type release struct {
	issued  time.Time
	version int64 // 0: none
}

// reportOf is a report of accepted entries, one per release.
func reportOf(ids []string, rels []release) *CatalogReport {
	r := &CatalogReport{Report: &aicatalog.Report{Catalog: aicatalog.Result{Accepted: true}}}
	for i, id := range ids {
		r.Entries = append(r.Entries, aicatalog.EntryResult{Index: i, Identifier: id,
			Result: aicatalog.Result{Accepted: true, Signer: "did:web:a.example", IssuedAt: rels[i].issued}})
		r.Releases = append(r.Releases, Release{Version: rels[i].version, HasVersion: rels[i].version != 0})
	}
	return r
}

func TestStateRollback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	const a, b = "urn:air:a.example:a2a:alpha", "urn:air:a.example:a2a:beta"
	s, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	first := reportOf([]string{a, b}, []release{{t0, 3}, {issued: t0}})
	s.Apply(first)
	if !first.OK() {
		t.Fatalf("first run refused: %+v", first.Entries)
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", st.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".state.json.*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	for _, tc := range []struct {
		name string
		id   string
		rel  release
		want string // "" = accepted
	}{
		{"same release again", a, release{t0, 3}, ""},
		{"older version", a, release{t0.Add(time.Hour), 2}, "release version 2, older than version 3"},
		{"older manifest, same version", a, release{t0.Add(-time.Hour), 3}, "issued at 2026-11-28T09:00:00Z, older than"},
		{"older manifest, no version", b, release{issued: t0.Add(-time.Second)}, "older than the one issued at 2026-11-28T10:00:00Z"},
		{"newer manifest", b, release{issued: t0.Add(time.Hour)}, ""},
		{"unknown identifier", "urn:air:a.example:a2a:gamma", release{issued: t0.Add(-48 * time.Hour)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := LoadState(path) // as saved after the first run
			if err != nil {
				t.Fatal(err)
			}
			r := reportOf([]string{tc.id}, []release{tc.rel})
			s.Apply(r)
			e := r.Entries[0]
			if tc.want == "" {
				if !e.Accepted {
					t.Fatalf("refused: %+v", e.Reasons)
				}
				return
			}
			if e.Accepted || len(e.Reasons) != 1 || e.Reasons[0].Code != ReasonRollback || !strings.Contains(e.Reasons[0].Detail, tc.want) {
				t.Fatalf("reasons %+v, want rollback: %q", e.Reasons, tc.want)
			}
		})
	}

	// A newer release is remembered; the older one is then a rollback.
	s, _ = LoadState(path)
	s.Apply(reportOf([]string{a}, []release{{t0.Add(time.Hour), 4}}))
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	s, _ = LoadState(path)
	if seen, ok := s.Seen(a); !ok || seen.Version != 4 || !seen.IssuedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("remembered %+v", seen)
	}
	r := reportOf([]string{a}, []release{{t0, 3}})
	s.Apply(r)
	if r.OK() {
		t.Error("version 3 accepted after version 4")
	}
	// A refused entry is not remembered.
	refused := reportOf([]string{b}, []release{{issued: t0.Add(24 * time.Hour)}})
	refused.Entries[0].Accepted = false
	s.Apply(refused)
	if seen, _ := s.Seen(b); !seen.IssuedAt.Equal(t0) {
		t.Errorf("a refused entry moved the state to %v", seen.IssuedAt)
	}
}

func TestLoadStateRefusesGarbage(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"not JSON":      "{",
		"duplicate key": `{"entries":{},"entries":{}}`,
		"no entries":    `{}`,
		"bad time":      `{"entries":{"x":{"issuedAt":"noon"}}}`,
		"bad version":   `{"entries":{"x":{"issuedAt":"2026-11-28T10:00:00Z","version":"3"}}}`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadState(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
