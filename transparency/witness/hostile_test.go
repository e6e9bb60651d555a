package witness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/witnesstest"
	"github.com/cardsign/cardsign/transparency"
)

// A log forked under the same origin and key (a split view) is refused by
// the witnesses that saw the first tree: each reports a conflict, nothing
// is stored, and the status keeps the alarm.
func TestForkIsAConflict(t *testing.T) {
	ctx := context.Background()
	key := logKey(t)
	l := newLog(t, key, "")
	_, eps, p := witnesses(t, l, 3, 2)
	l.grow(t, 10)
	if err := collector(t, l, newCosigStore(t), eps, p, Options{}).Round(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		size  int
		known int64 // the ConflictError's Known
	}{
		{"a larger fork", 12, 10},           // 409 (10), then the proof from 10 fails: 422
		{"a fork of the same size", 10, 10}, // 409 (10), then the roots differ: 422
		{"a smaller fork", 8, 10},           // 409 (10): the witness knows more than the fork's tree
	} {
		t.Run(tc.name, func(t *testing.T) {
			fork := newLog(t, key, "-fork")
			fork.grow(t, tc.size)
			st, obs := newCosigStore(t), newObserver()
			c := collector(t, fork, st, eps, p, Options{Observer: obs})
			err := c.Round(ctx)
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("the fork's round: %v, want a conflict", err)
			}
			if cs := st.all(t); len(cs) != 0 {
				t.Fatalf("the fork's cosignatures were stored: %+v", cs)
			}
			conflicts := obs.conflictsOf()
			if len(conflicts) != 3 {
				t.Fatalf("%d conflicts reported, want 3: %+v", len(conflicts), conflicts)
			}
			for i, s := range c.Status() {
				if s.Conflict == nil || s.Conflict.Witness != s.Name || s.Conflict.Known != tc.known || s.Size != 0 {
					t.Fatalf("witness %d's status: %+v (conflict %+v)", i+1, s, s.Conflict)
				}
			}
			var ce *ConflictError
			if !errors.As(err, &ce) || !strings.Contains(ce.Error(), "another tree") {
				t.Fatalf("the conflict's error: %v", err)
			}
		})
	}
	// The first log goes on being witnessed.
	l.grow(t, 5)
	st := newCosigStore(t)
	if err := collector(t, l, st, eps, p, Options{}).Round(ctx); err != nil {
		t.Fatal(err)
	}
	checkWitnessed(t, l, st, p, 15)
}

// A witness answering garbage, a forged or misplaced cosignature, an
// endless body, a hang, an error, a redirect, a bad 409 is refused or
// failed; none of its answers is stored; the real witnesses proceed.
func TestHostileWitness(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, logKey(t), "")
	_, real, _ := witnesses(t, l, 2, 2)
	l.grow(t, 7)
	evil := witnesstest.NewKey(t, "witness.example/evil")
	other := witnesstest.NewKey(t, "witness.example/evil") // the same name, another key
	for _, tc := range []struct {
		name     string
		answer   func(t *testing.T, w http.ResponseWriter, r *http.Request, text string)
		conflict bool
		want     string // in the error
	}{
		{"garbage", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			io.WriteString(w, "hello\n")
		}, false, "not cosignature lines"},
		{"another witness's line", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			w.Write(witnesstest.NewKey(t, "witness.example/w1").Cosign(t, text))
		}, false, "not by the witness asked"},
		{"the name with another key", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			w.Write(other.Cosign(t, text))
		}, false, "no cosignature under its key"},
		{"a cosignature of another checkpoint", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			w.Write(evil.Cosign(t, strings.Replace(text, "\n7\n", "\n6\n", 1)))
		}, false, "does not verify"},
		{"a valid line and a forged one", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			good := evil.Cosign(t, text)
			bad := evil.Cosign(t, text+"x\n")
			w.Write(append(good, bad...))
		}, false, "does not verify"},
		{"an endless body", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			line := evil.Cosign(t, text)
			for r.Context().Err() == nil {
				if _, err := w.Write(line); err != nil {
					return
				}
			}
		}, false, "more than 16384 bytes"},
		{"a hang", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			<-r.Context().Done()
		}, false, "deadline exceeded"},
		{"a hang after the headers", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, false, "deadline exceeded"},
		{"a server error", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			http.Error(w, "database \x00 is locked", http.StatusInternalServerError)
		}, false, `status 500: "database \x00 is locked\n"`},
		{"a redirect", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			http.Redirect(w, r, "http://127.0.0.1:1/add-checkpoint", http.StatusTemporaryRedirect)
		}, false, "status 307"},
		{"a 409 without its content type", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			http.Error(w, "3", http.StatusConflict)
		}, false, "without the Content-Type text/x.tlog.size"},
		{"a 409 without a size", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			w.Header().Set("Content-Type", "text/x.tlog.size")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, "-3\n")
		}, false, "does not carry a size"},
		{"a 409 beyond the log", func(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
			w.Header().Set("Content-Type", "text/x.tlog.size")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, "1000\n")
		}, true, "knows size 1000, larger than the log's 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				_, cp, ok := bytes.Cut(body, []byte("\n\n"))
				text, _, ok2 := bytes.Cut(cp, []byte("\n\n"))
				if r.URL.Path != "/add-checkpoint" || !ok || !ok2 {
					http.Error(w, "bad request", http.StatusBadRequest)
					return
				}
				tc.answer(t, w, r, string(text)+"\n")
			}))
			t.Cleanup(srv.Close)
			eps := append(slices.Clone(real), endpoint(t, evil.VKey, srv.URL))
			p, err := transparency.NewWitnessPolicy([]string{real[0].Key, real[1].Key, evil.VKey}, 2)
			if err != nil {
				t.Fatal(err)
			}
			st, obs := newCosigStore(t), newObserver()
			c := collector(t, l, st, eps, p, Options{Observer: obs, RequestTimeout: 300 * time.Millisecond})
			err = c.Round(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"witness.example/evil"`) {
				t.Fatalf("the round: %v; want an error about %q with %q", err, "witness.example/evil", tc.want)
			}
			if errors.Is(err, ErrConflict) != tc.conflict {
				t.Fatalf("the round: %v; conflict %v, want %v", err, errors.Is(err, ErrConflict), tc.conflict)
			}
			if got := st.of(7); !slices.Equal(got, []string{"witness.example/w1", "witness.example/w2"}) {
				t.Fatalf("cosignatures of 7 by %v, want the real witnesses' only", got)
			}
			checkWitnessed(t, l, st, p, 7)
			if len(st.all(t)) != 2 {
				t.Fatalf("stored %+v", st.all(t))
			}
			if s := c.Status()[2]; s.Size != 0 || s.LastError == "" || (s.Conflict != nil) != tc.conflict {
				t.Fatalf("the hostile witness's status: %+v", s)
			}
			for _, a := range obs.answersOf() {
				if a.witness == "witness.example/evil" && a.err == nil {
					t.Fatalf("a hostile answer was reported as a cosignature: %+v", a)
				}
			}
		})
	}
}
