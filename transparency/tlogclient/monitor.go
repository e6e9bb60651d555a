package tlogclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cardsign/cardsign/glob"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cardsign/cardsign/transparency"
)

// State is what a monitor remembers between runs: the last checkpoint it
// proved consistent and walked. It is the monitor's own file (mode 0600),
// trusted as written: the next checkpoint must extend it.
type State struct {
	Origin     string    `json:"origin"`
	Size       int64     `json:"size"`
	Root       tlog.Hash `json:"root"`       // base64, as in the checkpoint
	Checkpoint string    `json:"checkpoint"` // the signed note, kept as evidence
	Saved      time.Time `json:"saved"`
}

// maxStateBytes bounds a state file: a checkpoint and a few fields.
const maxStateBytes = 1 << 20

// checkpoint is the state as the checkpoint it records.
func (s State) checkpoint() transparency.Checkpoint {
	return transparency.Checkpoint{Origin: s.Origin, Size: s.Size, Root: s.Root, Note: []byte(s.Checkpoint)}
}

// LoadState reads a monitor's state file; a file that does not exist is
// no state (nil, nil): the first run.
func LoadState(path string) (*State, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("monitor state: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return nil, fmt.Errorf("monitor state %s: %w", path, err)
	}
	if len(b) > maxStateBytes {
		return nil, fmt.Errorf("monitor state %s is over %d bytes: not a state file", path, maxStateBytes)
	}
	var s State
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("monitor state %s: %v (remove it to start over, trusting the log's next checkpoint)", path, err)
	}
	if s.Origin == "" || s.Size < 0 {
		return nil, fmt.Errorf("monitor state %s has no origin or a negative size (remove it to start over, trusting the log's next checkpoint)", path)
	}
	return &s, nil
}

// SaveState writes s to path atomically (a temporary file in the same
// directory, synced, renamed over path), mode 0600: a crash leaves the old
// state or the new, never half of one.
func SaveState(path string, s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("monitor state: %w", err)
	}
	b = append(b, '\n')
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("monitor state: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename, nothing to remove
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("monitor state: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("monitor state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("monitor state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("monitor state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("monitor state: %w", err)
	}
	// The rename itself is durable once the directory is synced; best
	// effort, as some file systems cannot sync a directory.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Event kinds a monitor reports.
const (
	EventEntry      = "entry"
	EventAlarm      = "alarm"
	EventCheckpoint = "checkpoint"
)

// Event is one thing a monitor run reports: an entry matching a watch, an
// alarm, or (last, when the run succeeded) the checkpoint now saved.
type Event struct {
	Kind   string // EventEntry, EventAlarm or EventCheckpoint
	Origin string

	// EventEntry: the leaf, its entry and the watches it matched.
	Index   int64
	Entry   transparency.Entry
	Matched []string

	// EventAlarm.
	Alarm *transparency.AlarmError

	// EventCheckpoint: the checkpoint saved, the size it moved from (-1 on
	// a first run) and how many entries matched in between.
	Checkpoint   transparency.Checkpoint
	PreviousSize int64
	Matches      int
}

// MarshalJSON encodes e as one flat JSON object, as a SIEM ingests it:
// "event" names the kind, and the members are the kind's.
func (e Event) MarshalJSON() ([]byte, error) {
	m := map[string]any{"event": e.Kind, "origin": e.Origin}
	switch e.Kind {
	case EventEntry:
		m["index"] = e.Index
		m["seq"] = e.Entry.Seq
		m["time"] = e.Entry.Time
		m["outcome"] = e.Entry.Outcome
		m["caller"] = e.Entry.Caller
		m["card_name"] = e.Entry.Card.Name
		m["card_version"] = e.Entry.Card.Version
		m["card_sha256"] = e.Entry.Card.SHA256
		m["hosts"] = orEmpty(e.Entry.Card.Hosts)
		m["kid"] = e.Entry.KID
		m["alg"] = e.Entry.Alg
		m["profile"] = e.Entry.Profile
		m["signature"] = e.Entry.Signature
		m["record"] = e.Entry.Record
		m["watch"] = orEmpty(e.Matched)
	case EventAlarm:
		if a := e.Alarm; a != nil {
			m["alarm"] = string(a.Kind)
			m["message"] = a.Error()
			if a.Old.Note != nil || a.Old.Size != 0 {
				m["old_size"], m["old_root"], m["old_checkpoint"] = a.Old.Size, a.Old.Root.String(), string(a.Old.Note)
			}
			m["new_size"], m["new_root"], m["new_checkpoint"] = a.New.Size, a.New.Root.String(), string(a.New.Note)
		}
	case EventCheckpoint:
		m["size"] = e.Checkpoint.Size
		m["root"] = e.Checkpoint.Root.String()
		m["previous_size"] = e.PreviousSize
		m["first_run"] = e.PreviousSize < 0
		m["matches"] = e.Matches
		m["checkpoint"] = string(e.Checkpoint.Note)
	}
	return json.Marshal(m)
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Monitor follows a log: each Run proves the log's new checkpoint
// consistent with the one saved in StatePath, walks the new leaves and
// reports the entries that match Watch.
type Monitor struct {
	Client    *Client
	StatePath string
	// Watch holds card names and hosts: an entry matches a watch that its
	// card name matches (exactly, or as a glob pattern with * and ?), or
	// that names one of its hosts (compared in lower case; a pattern with
	// * or ? is matched against each host, e.g. "*.example.com").
	Watch []string
	// Salts are agents' log salts (AgentSalt, served to their readers):
	// a sealed entry (a private agent's) matches a watch it commits to
	// under one of them, exactly (no pattern can match a commitment).
	Salts [][]byte
	// Emit receives every event of a run, in order; an error ends the run
	// (and the state is not saved).
	Emit func(Event) error
	// Progress, if not nil, receives human lines about the run: the first
	// run's trust on first use, and a long walk's progress.
	Progress io.Writer
}

// progressEvery is how often a long walk says how far it got.
const progressEvery = 2 * time.Second

// Run runs the monitor once. It returns an *AlarmError, after emitting it,
// when the log forked, rolled back, changed origin or served data its
// checkpoint contradicts; the state file is then left as it was, so the
// next run raises the alarm again. Any other error is a failure to check
// (also leaving the state alone). On success the new checkpoint is saved.
func (m *Monitor) Run(ctx context.Context) error {
	for _, w := range m.Watch {
		if !glob.Valid(w) {
			return fmt.Errorf("watch %q: want a card name or host, non-empty UTF-8", w)
		}
	}
	prev, err := LoadState(m.StatePath)
	if err != nil {
		return err
	}
	cp, err := m.Client.Checkpoint(ctx)
	if err != nil {
		return err
	}
	alarm := func(a *transparency.AlarmError) error {
		if err := m.Emit(Event{Kind: EventAlarm, Origin: cp.Origin, Alarm: a}); err != nil {
			return err
		}
		return a
	}
	from, prevSize := int64(0), int64(-1)
	if prev != nil {
		if err := transparency.Consistent(ctx, m.Client, prev.checkpoint(), cp); err != nil {
			var a *transparency.AlarmError
			if errors.As(err, &a) {
				return alarm(a)
			}
			return err
		}
		from, prevSize = prev.Size, prev.Size
	} else {
		m.progress("no state in %s: trusting the log's checkpoint of %d leaves (root %s) on first use, and walking all of them", m.StatePath, cp.Size, cp.Root)
	}
	matches := 0
	last, reported := time.Now(), false
	hr := m.Client.HashReader(ctx, cp.Tree())
	err = m.Client.Walk(ctx, cp.Tree(), hr, from, cp.Size, func(index int64, b []byte) error {
		e, err := transparency.ParseEntry(b)
		if err != nil {
			return &transparency.AlarmError{Kind: transparency.AlarmBadEntry, New: cp, Detail: fmt.Sprintf("leaf %d is in the tree but is not a cardsign entry", index), Err: err}
		}
		if e.Index() != index {
			return &transparency.AlarmError{Kind: transparency.AlarmBadEntry, New: cp, Detail: fmt.Sprintf("leaf %d holds the entry of audit record %d (leaf %d)", index, e.Seq, e.Index())}
		}
		if matched := m.matches(e); len(matched) > 0 {
			matches++
			if err := m.Emit(Event{Kind: EventEntry, Origin: cp.Origin, Index: index, Entry: e, Matched: matched}); err != nil {
				return err
			}
		}
		if now := time.Now(); now.Sub(last) >= progressEvery {
			last, reported = now, true
			m.progress("walked %d of %d new leaves (%d%%), %d matching", index+1-from, cp.Size-from, (index+1-from)*100/(cp.Size-from), matches)
		}
		return nil
	})
	if err != nil {
		var a *transparency.AlarmError
		var te *transparency.TamperError
		switch {
		case errors.As(err, &a):
			return alarm(a)
		case errors.As(err, &te):
			return alarm(&transparency.AlarmError{Kind: transparency.AlarmTampered, New: cp, Detail: "walking the new leaves", Err: err})
		}
		return fmt.Errorf("walk leaves %d to %d: %w", from, cp.Size-1, err)
	}
	if reported {
		m.progress("walked %d new leaves, %d matching", cp.Size-from, matches)
	}
	if err := SaveState(m.StatePath, State{Origin: cp.Origin, Size: cp.Size, Root: cp.Root, Checkpoint: string(cp.Note), Saved: time.Now().UTC()}); err != nil {
		return err
	}
	return m.Emit(Event{Kind: EventCheckpoint, Origin: cp.Origin, Checkpoint: cp, PreviousSize: prevSize, Matches: matches})
}

// matches returns the watches e matches.
func (m *Monitor) matches(e transparency.Entry) []string {
	var out []string
	for _, w := range m.Watch {
		if transparency.MatchesWatch(e, w) || transparency.MatchesSealed(e, w, m.Salts) {
			out = append(out, w)
		}
	}
	return out
}

func (m *Monitor) progress(format string, args ...any) {
	if m.Progress != nil {
		fmt.Fprintf(m.Progress, format+"\n", args...)
	}
}
