package tlogclient_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/cardsign/cardsign/internal/memlog"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/tlogclient"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// checkpointOf is l's served checkpoint, verified.
func checkpointOf(t *testing.T, l *memlog.Log, keys []note.Verifier) transparency.Checkpoint {
	t.Helper()
	_, signed, _ := l.Checkpoint(t.Context())
	cp, err := transparency.OpenCheckpoint(signed, keys)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func TestConsistent(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	l, keys := memlog.NewTestWith(t, memlog.TestOrigin, key)
	cps := map[int]transparency.Checkpoint{0: checkpointOf(t, l, keys)}
	for _, n := range []int{1, 255, 1, 300, 1000} {
		l.AppendN(t, n, "")
		cps[int(l.Len())] = checkpointOf(t, l, keys)
	}
	// The fork shares the first 557 leaves, then diverges.
	fork := l.Fork()
	l.AppendN(t, 100, "")
	fork.AppendN(t, 100, "fork-")
	at1657, fork1657 := checkpointOf(t, l, keys), checkpointOf(t, fork, keys)
	fork.AppendN(t, 50, "fork-")
	fork1707 := checkpointOf(t, fork, keys)
	// The same origin under another key is another log; another origin
	// under the same key, too.
	otherOrigin, otherKeys := memlog.NewTestWith(t, "other.test/log", key)
	otherOrigin.AppendN(t, 557, "")
	keys = append(keys, otherKeys...)

	srv := memlog.NewSwapServer(t, l.Handler())
	c := &tlogclient.Client{URL: srv.URL, Keys: keys}
	ctx := t.Context()
	for _, tc := range []struct {
		name     string
		old, new transparency.Checkpoint
		serve    *memlog.Log
		want     transparency.AlarmKind // "" for consistent
	}{
		{"same", cps[557], cps[557], l, ""},
		{"from empty", cps[0], cps[1557], l, ""},
		{"one leaf on", cps[256], cps[257], l, ""},
		{"across tiles", cps[1], cps[1557], l, ""},
		{"full tile to partial", cps[256], cps[557], l, ""},
		{"to the latest", cps[557], at1657, l, ""},
		{"fork of the same size", at1657, fork1657, fork, transparency.AlarmFork},
		{"fork, larger", at1657, fork1707, fork, transparency.AlarmInconsistent},
		{"rollback", cps[1557], cps[557], l, transparency.AlarmRollback},
		{"rollback to empty", cps[1], cps[0], l, transparency.AlarmRollback},
		{"origin change", cps[557], checkpointOf(t, otherOrigin, keys), otherOrigin, transparency.AlarmOrigin},
	} {
		srv.Set(tc.serve.Handler())
		err := transparency.Consistent(ctx, c, tc.old, tc.new)
		var a *transparency.AlarmError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.As(err, &a) || a.Kind != tc.want):
			t.Errorf("%s: %v, want a %s alarm", tc.name, err, tc.want)
		case tc.want != "" && (a.Old.Size != tc.old.Size || a.New.Size != tc.new.Size):
			t.Errorf("%s: the alarm names checkpoints %d and %d", tc.name, a.Old.Size, a.New.Size)
		}
	}

	// A server whose tiles do not match its checkpoint: tampered, not a
	// failure to check.
	tampered := l.Fork()
	tampered.SetHash(tlog.StoredHashIndex(8, 2), tlog.Hash{7})
	srv.Set(tampered.Handler())
	var a *transparency.AlarmError
	if err := transparency.Consistent(ctx, c, cps[557], at1657); !errors.As(err, &a) || a.Kind != transparency.AlarmTampered {
		t.Errorf("tampered tile: %v", err)
	}
	// A server that is down: an error, not an alarm.
	srv.Close()
	if err := transparency.Consistent(ctx, c, cps[557], at1657); err == nil || errors.As(err, &a) {
		t.Errorf("server down: %v, want an error that is not an alarm", err)
	}
}

// TestConsistentBadURL: a log that cannot be read is a failure to check,
// never an alarm.
func TestConsistentBadURL(t *testing.T) {
	l, keys := memlog.NewTest(t, 10)
	old := checkpointOf(t, l, keys)
	l.AppendN(t, 10, "")
	cur := checkpointOf(t, l, keys)
	var a *transparency.AlarmError
	for _, u := range []string{"", "ftp://x/", "http://127.0.0.1:1/log/"} {
		err := transparency.Consistent(t.Context(), &tlogclient.Client{URL: u, Keys: keys}, old, cur)
		if err == nil || errors.As(err, &a) {
			t.Errorf("URL %q: %v, want an error that is not an alarm", u, err)
		}
	}
}
