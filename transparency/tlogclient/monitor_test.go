package tlogclient_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/memlog"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/tlogclient"
	"golang.org/x/mod/sumdb/tlog"
)

// runMonitor runs a monitor once and returns its events and progress.
func runMonitor(t *testing.T, c *tlogclient.Client, state string, watch ...string) ([]tlogclient.Event, string, error) {
	t.Helper()
	var events []tlogclient.Event
	var progress bytes.Buffer
	m := &tlogclient.Monitor{Client: c, StatePath: state, Watch: watch, Progress: &progress,
		Emit: func(e tlogclient.Event) error { events = append(events, e); return nil }}
	err := m.Run(t.Context())
	// Every event encodes as one JSON object.
	for _, e := range events {
		b, jerr := json.Marshal(e)
		var m map[string]any
		if jerr != nil || json.Unmarshal(b, &m) != nil || m["event"] != e.Kind {
			t.Fatalf("event %+v encodes as %s, %v", e, b, jerr)
		}
	}
	return events, progress.String(), err
}

// matched returns the indexes of the entry events and checks the last
// event is the checkpoint.
func matched(t *testing.T, events []tlogclient.Event) []int64 {
	t.Helper()
	if len(events) == 0 || events[len(events)-1].Kind != tlogclient.EventCheckpoint {
		t.Fatalf("events %+v do not end with the checkpoint", events)
	}
	var out []int64
	for _, e := range events[:len(events)-1] {
		if e.Kind != tlogclient.EventEntry {
			t.Fatalf("event %+v", e)
		}
		out = append(out, e.Index)
	}
	return out
}

func TestMonitor(t *testing.T) {
	l, keys := memlog.NewTest(t, 300)
	srv := memlog.NewSwapServer(t, l.Handler())
	c := &tlogclient.Client{URL: srv.URL, Keys: keys}
	state := filepath.Join(t.TempDir(), "state.json")

	// First run: trust on first use, every leaf walked. Leaf i is the entry
	// of record i+1: card agent-(i+1) at a(i+1).example.com.
	events, progress, err := runMonitor(t, c, state, "agent-7", "A42.Example.COM", "agent-29?", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := matched(t, events), []int64{6, 41, 289, 290, 291, 292, 293, 294, 295, 296, 297, 298}; !reflect.DeepEqual(got, want) {
		t.Errorf("first run matched leaves %v, want %v", got, want)
	}
	if ev := events[0]; ev.Entry.Card.Name != "agent-7" || !reflect.DeepEqual(ev.Matched, []string{"agent-7"}) {
		t.Errorf("first match %+v", ev)
	}
	if ev := events[1]; !reflect.DeepEqual(ev.Matched, []string{"A42.Example.COM"}) {
		t.Errorf("host match %+v", ev)
	}
	if cp := events[len(events)-1]; cp.PreviousSize != -1 || cp.Checkpoint.Size != 300 || cp.Matches != 12 {
		t.Errorf("checkpoint event %+v", cp)
	}
	if !strings.Contains(progress, "trusting the log's checkpoint of 300 leaves") || !strings.Contains(progress, "on first use") {
		t.Errorf("first run progress %q: it must say it trusts on first use", progress)
	}
	st, err := os.Stat(state)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, %v", st, err)
	}
	saved, err := tlogclient.LoadState(state)
	if err != nil || saved.Size != 300 || saved.Origin != memlog.TestOrigin || !strings.Contains(saved.Checkpoint, "\n300\n") {
		t.Fatalf("state %+v, %v", saved, err)
	}

	// Nothing new: the checkpoint again, no entries.
	events, _, err = runMonitor(t, c, state, "agent-7")
	if err != nil || len(matched(t, events)) != 0 || events[0].PreviousSize != 300 {
		t.Fatalf("second run: %+v, %v", events, err)
	}

	// Incremental: only the new leaves are walked; globs on hosts.
	l.AppendN(t, 500, "")
	events, _, err = runMonitor(t, c, state, "agent-7", "*.example.org", "a777.example.com")
	if err != nil {
		t.Fatal(err)
	}
	got := matched(t, events)
	if len(got) != 500 || got[0] != 300 || got[499] != 799 {
		t.Errorf("*.example.org matched %d leaves from %v, want the 500 new ones", len(got), got[:min(3, len(got))])
	}
	if ev := events[776-300]; !reflect.DeepEqual(ev.Matched, []string{"*.example.org", "a777.example.com"}) {
		t.Errorf("leaf 776 matched %v", ev.Matched)
	}
	if cp := events[len(events)-1]; cp.PreviousSize != 300 || cp.Checkpoint.Size != 800 {
		t.Errorf("checkpoint event %+v", cp)
	}

	// Bad watches are refused before anything is fetched.
	if _, _, err := runMonitor(t, c, state, ""); err == nil {
		t.Error("an empty watch was accepted")
	}
}

// TestMonitorAlarms: a fork, a rollback, tampered data or a bad entry is
// an alarm event and an *AlarmError, and the state file is left exactly as
// it was, so the next run raises the alarm again.
func TestMonitorAlarms(t *testing.T) {
	l, keys := memlog.NewTest(t, 300)
	fork := l.Fork()
	l.AppendN(t, 100, "")
	fork.AppendN(t, 150, "evil-")
	sameSize := l.Fork()
	sameSize.AppendN(t, 1, "evil-")
	badEntry := l.Fork()
	if err := badEntry.Append([]byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	misplaced := l.Fork()
	if err := misplaced.Append(memlog.Entries(0, 1, "")...); err != nil { // record 1's entry as leaf 400
		t.Fatal(err)
	}
	tamperedEntry := l.Fork()
	tamperedEntry.AppendN(t, 10, "")
	tamperedEntry.SetEntry(405, memlog.Entries(404, 1, "evil-")[0])
	tamperedTile := l.Fork()
	tamperedTile.AppendN(t, 10, "")
	tamperedTile.SetHash(tlog.StoredHashIndex(0, 405), tlog.Hash{1})
	rolledBack := l.Fork()
	if err := rolledBack.RollBack(350); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		serve interface{ Handler() http.Handler }
		want  transparency.AlarmKind
	}{
		{"fork", fork, transparency.AlarmInconsistent},
		{"rollback", rolledBack, transparency.AlarmRollback},
		{"bad entry", badEntry, transparency.AlarmBadEntry},
		{"entry of another leaf", misplaced, transparency.AlarmBadEntry},
		{"tampered entry", tamperedEntry, transparency.AlarmTampered},
		{"tampered tile", tamperedTile, transparency.AlarmTampered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := memlog.NewSwapServer(t, l.Handler())
			c := &tlogclient.Client{URL: srv.URL, Keys: keys}
			state := filepath.Join(t.TempDir(), "state.json")
			if _, _, err := runMonitor(t, c, state); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(state)
			srv.Set(tc.serve.Handler())
			for range 2 {
				events, _, err := runMonitor(t, c, state, "agent-1")
				var a *transparency.AlarmError
				if !errors.As(err, &a) || a.Kind != tc.want {
					t.Fatalf("%v, want a %s alarm", err, tc.want)
				}
				if last := events[len(events)-1]; last.Kind != tlogclient.EventAlarm || last.Alarm != a {
					t.Fatalf("events %+v do not end with the alarm", events)
				}
				if after, _ := os.ReadFile(state); !bytes.Equal(after, before) {
					t.Fatal("the state file changed on an alarm")
				}
			}
			// The honest log again: consistent with the state.
			srv.Set(l.Handler())
			if _, _, err := runMonitor(t, c, state); err != nil {
				t.Fatal(err)
			}
		})
	}

	// A fork of the same size as the state.
	srv := memlog.NewSwapServer(t, l.Handler())
	c := &tlogclient.Client{URL: srv.URL, Keys: keys}
	state := filepath.Join(t.TempDir(), "state.json")
	l.AppendN(t, 1, "")
	if _, _, err := runMonitor(t, c, state); err != nil {
		t.Fatal(err)
	}
	srv.Set(sameSize.Handler()) // 401 leaves too, a different 401st
	_, _, err := runMonitor(t, c, state)
	var a *transparency.AlarmError
	if !errors.As(err, &a) || a.Kind != transparency.AlarmFork || !strings.Contains(a.Error(), "two signed checkpoints of 401 leaves") {
		t.Fatalf("same-size fork: %v", err)
	}
	b, _ := json.Marshal(tlogclient.Event{Kind: tlogclient.EventAlarm, Origin: memlog.TestOrigin, Alarm: a})
	for _, want := range []string{`"alarm":"fork"`, `"old_size":401`, `"new_size":401`, `"old_checkpoint":"cardsign.test/log\n401\n`} {
		if !bytes.Contains(b, []byte(strings.ReplaceAll(want, "\n", `\n`))) {
			t.Errorf("alarm JSON %s lacks %s", b, want)
		}
	}
}

func TestStateFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.json")
	if s, err := tlogclient.LoadState(path); s != nil || err != nil {
		t.Fatalf("missing state: %v, %v", s, err)
	}
	want := tlogclient.State{Origin: memlog.TestOrigin, Size: 9, Root: tlog.Hash{3}, Checkpoint: "note\n"}
	if err := tlogclient.SaveState(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := tlogclient.LoadState(path)
	if err != nil || got.Origin != want.Origin || got.Size != 9 || got.Root != want.Root || got.Checkpoint != "note\n" {
		t.Fatalf("%+v, %v", got, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	for _, bad := range []string{`{`, `{"origin":"","size":1}`, `{"origin":"o","size":-1}`, `{"origin":"o","size":1,"extra":1}`} {
		os.WriteFile(path, []byte(bad), 0o600)
		if _, err := tlogclient.LoadState(path); err == nil || !strings.Contains(err.Error(), "remove it to start over") {
			t.Errorf("state %s: %v", bad, err)
		}
	}
}
