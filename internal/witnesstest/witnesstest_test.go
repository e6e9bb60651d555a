package witnesstest

import (
	"crypto/rand"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// A witness starts, registers a log, and keeps its key, port and state
// across a crash.
func TestStartRestart(t *testing.T) {
	w := Start(t, "witness.example/w1")
	if _, err := fnote.NewVerifierForCosignatureV1(w.VKey); err != nil {
		t.Fatalf("vkey %q: %v", w.VKey, err)
	}
	if !strings.HasPrefix(w.VKey, "witness.example/w1+") {
		t.Fatalf("vkey %q is not named after the witness", w.VKey)
	}
	const origin = "example.com/log"
	if got := w.Size(origin); got != -1 {
		t.Fatalf("size of an unregistered log: %d", got)
	}
	_, logKey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	w.AddLog(origin, logKey)
	if got := w.Size(origin); got != 0 {
		t.Fatalf("size of a new log: %d", got)
	}
	url, vkey := w.URL, w.VKey
	w.Kill()
	w.Restart()
	if w.URL != url || w.VKey != vkey || w.Size(origin) != 0 {
		t.Fatalf("after a restart: %s %s size %d; want %s %s size 0", w.URL, w.VKey, w.Size(origin), url, vkey)
	}
}

func TestVKeyOf(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`time=2026-01-01T00:00:00Z level=INFO msg="verifier key" vkey=w.example+12345678+AQID`, "w.example+12345678+AQID"},
		{`time=x level=INFO msg="verifier key" vkey="w example+12345678+AQID" other=1`, "w example+12345678+AQID"},
		{`time=x level=INFO msg="found key" fingerprint=SHA256:abc`, ""},
	} {
		got, ok := vkeyOf(tc.line)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("vkeyOf(%q) = %q, %v; want %q", tc.line, got, ok, tc.want)
		}
	}
}
