package webtrust

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/cardsign/cardsign/strictjson"
)

// maxStateBytes caps a state file: about 200 bytes per identifier.
const maxStateBytes = 16 << 20

// State is what a stateful consumer remembers between verifications: per
// entry identifier, the newest release it accepted. A correctly signed but
// older manifest (a replayed catalog, a rolled-back mirror) is then refused
// with reason rollback, which signatures alone cannot do.
type State struct {
	path    string
	entries map[string]Seen
}

// Seen is the newest accepted release of one identifier: its manifest's
// signed issuedAt and, when the manifest states one, the registry version.
type Seen struct {
	IssuedAt   time.Time
	Version    int64
	HasVersion bool
}

// LoadState reads the state file at path; a missing file is an empty
// state (the first run).
func LoadState(path string) (*State, error) {
	s := &State{path: path, entries: map[string]Seen{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	doc, err := strictjson.ParseAs(data, strictjson.Limits{MaxBytes: maxStateBytes}, "state file", "a state file is a JSON object")
	if err != nil {
		return nil, fmt.Errorf("state %s: %w", path, err)
	}
	ents, ok := doc.Get("entries")
	if !ok || ents.Kind != strictjson.Object {
		return nil, fmt.Errorf("state %s: entries: want an object", path)
	}
	for _, m := range ents.Obj {
		var e Seen
		at, ok, err := m.Val.GetString("issuedAt")
		if err == nil && ok {
			e.IssuedAt, err = time.Parse(time.RFC3339, at)
		}
		if err != nil || !ok {
			return nil, fmt.Errorf("state %s: entries[%s].issuedAt: want an RFC 3339 time", path, strictjson.QuoteForMessage(m.Key))
		}
		if v, ok := m.Val.Get("version"); ok {
			if e.Version, err = strconv.ParseInt(v.Str, 10, 64); err != nil || v.Kind != strictjson.Number {
				return nil, fmt.Errorf("state %s: entries[%s].version: want an integer", path, strictjson.QuoteForMessage(m.Key))
			}
			e.HasVersion = true
		}
		s.entries[m.Key] = e
	}
	return s, nil
}

// Seen returns what the state holds for identifier.
func (s *State) Seen(identifier string) (Seen, bool) {
	e, ok := s.entries[identifier]
	return e, ok
}

// Apply refuses with reason rollback every accepted entry older than the
// release remembered for its identifier (a lower registry version, or a
// manifest issued earlier), and remembers the others.
func (s *State) Apply(r *CatalogReport) {
	for i := range r.Entries {
		e := &r.Entries[i]
		rel := r.Releases[i]
		if !e.Accepted || e.IssuedAt.IsZero() {
			continue
		}
		old, had := s.entries[e.Identifier]
		if had {
			switch {
			case old.HasVersion && rel.HasVersion && rel.Version < old.Version:
				refuse(&e.Result, ReasonRollback, fmt.Sprintf("release version %d, older than version %d accepted before", rel.Version, old.Version))
				continue
			case e.IssuedAt.Before(old.IssuedAt):
				refuse(&e.Result, ReasonRollback, fmt.Sprintf("manifest issued at %s, older than the one issued at %s accepted before",
					e.IssuedAt.UTC().Format(time.RFC3339), old.IssuedAt.UTC().Format(time.RFC3339)))
				continue
			}
		}
		s.entries[e.Identifier] = Seen{IssuedAt: e.IssuedAt, Version: rel.Version, HasVersion: rel.HasVersion}
	}
}

// Save writes the state atomically (a temporary file renamed over it),
// readable by its owner only.
func (s *State) Save() error {
	ids := make([]string, 0, len(s.entries))
	for id := range s.entries {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	ents := strictjson.ObjectValue()
	for _, id := range ids {
		e := s.entries[id]
		v := strictjson.ObjectValue(strictjson.Member{Key: "issuedAt", Val: strictjson.StringValue(e.IssuedAt.UTC().Format(time.RFC3339))})
		if e.HasVersion {
			v.Obj = append(v.Obj, strictjson.Member{Key: "version", Val: strictjson.IntValue(e.Version)})
		}
		ents.Obj = append(ents.Obj, strictjson.Member{Key: id, Val: v})
	}
	data := append(strictjson.ObjectValue(strictjson.Member{Key: "entries", Val: ents}).Indent(), '\n')
	tmp, err := os.CreateTemp(filepath.Dir(s.path), "."+filepath.Base(s.path)+".*")
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("state: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}
