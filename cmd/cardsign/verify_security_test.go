package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// normalizingServer serves JWK Sets the way a real web server routes
// requests: the request path is percent-decoded and cleaned (dot segments
// resolved, slashes merged) before it is looked up. It records every
// request URI it was sent.
type normalizingServer struct {
	*httptest.Server
	mu   sync.Mutex
	uris []string
}

func newNormalizingServer(t *testing.T, docs map[string]string) *normalizingServer {
	t.Helper()
	s := &normalizingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.uris = append(s.uris, r.RequestURI)
		s.mu.Unlock()
		doc, ok := docs[path.Clean(r.URL.Path)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		io.WriteString(w, doc)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *normalizingServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.uris...)
}

// jkuFixture is a trusted key "good" whose JWKS is published under /good/,
// and an attacker key "evil" whose JWKS is published under /evil/ on the
// same host. The verifier trusts neither directly: it trusts a third key's
// JWKS file and follows jku under --allow-jku srv/good/.
type jkuFixture struct {
	dir, trusted string
	srv          *normalizingServer
}

func newJKUFixture(t *testing.T) jkuFixture {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{"good", "evil", "other"} {
		mustRun(t, dir, "keygen", "--out", k)
	}
	srv := newNormalizingServer(t, map[string]string{
		"/good/jwks.json": mustRun(t, dir, "jwks", "--key", "file:good").Stdout,
		"/evil/jwks.json": mustRun(t, dir, "jwks", "--key", "file:evil").Stdout,
	})
	trusted := filepath.Join(dir, "trusted.json")
	writeFile(t, trusted, []byte(mustRun(t, dir, "jwks", "--key", "file:other").Stdout))
	return jkuFixture{dir: dir, trusted: trusted, srv: srv}
}

// sign signs the params card with key under the given jku and returns the
// signed file's path.
func (f jkuFixture) sign(t *testing.T, key, jku string) string {
	t.Helper()
	out := filepath.Join(f.dir, "signed-"+key+".json")
	writeFile(t, out, []byte(mustRun(t, f.dir, "sign", "--key", "file:"+key, "--jku", jku, filepath.Join(repoRoot, "testdata/cards/params.json")).Stdout))
	return out
}

// Issue 10 item 1: a jku under the allowed prefix only as raw text (dot
// segments, encoded dots, encoded slashes, merged slashes) must never fetch
// the attacker's JWKS; the allow-list is checked on the normalized URL.
func TestVerifyJKUDotSegmentsCannotEscapeAllowList(t *testing.T) {
	f := newJKUFixture(t)
	allow := f.srv.URL + "/good/"
	for _, tail := range []string{
		"/good/../evil/jwks.json",
		"/good/%2e%2e/evil/jwks.json",
		"/good/%2E%2E/evil/jwks.json",
		"/good/.%2E/evil/jwks.json",
		"/good/%2e./evil/jwks.json",
		"/good/x/../../evil/jwks.json",
		"/good/..%2fevil/jwks.json",
		"/good/%2e%2e%2Fevil/jwks.json",
		"/good//../evil/jwks.json",
	} {
		t.Run(tail, func(t *testing.T) {
			signed := f.sign(t, "evil", f.srv.URL+tail)
			r := cardsign(t, f.dir, nil, "verify", "--jwks", f.trusted, "--allow-jku", allow, signed)
			if r.Code != exitFail || strings.Contains(r.Stdout, ": valid") {
				t.Fatalf("attacker jku %s: exit %d, want %d\nstdout: %s\nstderr: %s", tail, r.Code, exitFail, r.Stdout, r.Stderr)
			}
			for _, uri := range f.srv.requests() {
				if strings.Contains(uri, "evil") {
					t.Fatalf("the verifier requested %s", uri)
				}
			}
		})
	}
}

// The URL fetched is the normalized one, and a jku that differs from an
// allowed one only in spelling (scheme case, default-free dot segments,
// encoded unreserved characters) is followed.
func TestVerifyJKUFetchesNormalizedURL(t *testing.T) {
	f := newJKUFixture(t)
	for _, tc := range []struct{ jku, want string }{
		{f.srv.URL + "/good/x/../jwks.json", "/good/jwks.json"},
		{f.srv.URL + "/good/./%6Awks.json", "/good/jwks.json"},
		{strings.Replace(f.srv.URL, "http://", "HTTP://", 1) + "/good/jwks.json", "/good/jwks.json"},
	} {
		before := len(f.srv.requests())
		signed := f.sign(t, "good", tc.jku)
		r := cardsign(t, f.dir, nil, "verify", "--jwks", f.trusted, "--allow-jku", f.srv.URL+"/good/", signed)
		if r.Code != exitOK {
			t.Errorf("jku %s: exit %d\nstdout: %s\nstderr: %s", tc.jku, r.Code, r.Stdout, r.Stderr)
			continue
		}
		got := f.srv.requests()[before:]
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("jku %s: requests %q, want exactly [%s]", tc.jku, got, tc.want)
		}
	}
}

// rewriteSignatures replaces the signatures of a signed card file.
func rewriteSignatures(t *testing.T, src, dst string, f func(sigs []any) []any) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	c["signatures"] = f(c["signatures"].([]any))
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, out)
}

// Issue 10 item 8: header values come from the card; printed raw, a kid
// with a newline forges a "valid" line and escape sequences reach the
// terminal.
func TestVerifyEscapesCardSuppliedStrings(t *testing.T) {
	f := newJKUFixture(t)
	signed := f.sign(t, "good", f.srv.URL+"/good/jwks.json")
	forged := "\nsignature[0] kid=good alg=ES256: valid (spec profile)\n\x1b[2K"
	hostile := filepath.Join(f.dir, "hostile.json")
	rewriteSignatures(t, signed, hostile, func(sigs []any) []any {
		s := sigs[0].(map[string]any)
		hdr, _ := json.Marshal(map[string]string{"alg": "ES256\x1b[31m", "kid": "k" + forged, "typ": "JOSE", "jku": f.srv.URL + "/good/\x1b]0;t\x07"})
		s["protected"] = base64.RawURLEncoding.EncodeToString(hdr)
		hdr2, _ := json.Marshal(map[string]string{"alg": "ES256", "kid": "k2" + forged, "typ": "JOSE", "jku": f.srv.URL + "/evil/\u202e"})
		return []any{s, map[string]any{"protected": base64.RawURLEncoding.EncodeToString(hdr2), "signature": s["signature"]}}
	})
	r := cardsign(t, f.dir, nil, "verify", "--jwks", f.trusted, "--allow-jku", f.srv.URL+"/", hostile)
	if r.Code != exitFail {
		t.Fatalf("exit %d, want %d\n%s", r.Code, exitFail, r.Stdout)
	}
	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	// One line per signature, then the portability line, which holds no
	// card text.
	if len(lines) != 3 || !strings.HasPrefix(lines[2], "verifies in: spec ✘") {
		t.Errorf("two signatures printed as %d lines:\n%s", len(lines), r.Stdout)
	}
	for i, l := range lines[:min(len(lines), 2)] {
		if !strings.HasPrefix(l, fmt.Sprintf("signature[%d] kid=", i)) || strings.HasPrefix(l, "signature[0] kid=good") || strings.HasSuffix(l, ": valid (spec profile)") {
			t.Errorf("line %d is forged or out of place: %q", i, l)
		}
	}
	for _, out := range []string{r.Stdout, r.Stderr} {
		if strings.ContainsAny(out, "\x1b\x07\u202e") {
			t.Errorf("control characters reach the terminal: %q", out)
		}
	}
	// Ordinary kids still print bare, as before.
	r = mustRun(t, f.dir, "verify", "--jwks", f.trusted, "--allow-jku", f.srv.URL+"/good/", signed)
	if !strings.HasPrefix(r.Stdout, "signature[0] kid=") || strings.Contains(r.Stdout, `kid="`) {
		t.Errorf("a plain kid must print unquoted: %s", r.Stdout)
	}

	// lint prints card content (paths and values) too.
	odd := filepath.Join(f.dir, "odd.json")
	writeFile(t, odd, []byte(`{"name":"x","description":"d","version":"1","supportedInterfaces":[{"url":"https://a.example/\u001b[31m\nerror forged","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[],"x\u001b[2K\nerror y":1}`))
	for _, args := range [][]string{{"lint", odd}, {"lint", "--strip-unknown", odd}, {"verify", "--jwks", f.trusted, odd}} {
		r = cardsign(t, f.dir, nil, args...)
		for _, out := range []string{r.Stdout, r.Stderr} {
			if strings.ContainsAny(out, "\x1b") {
				t.Errorf("%v: escape sequence in output: %q", args, out)
			}
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "error forged") || strings.HasPrefix(l, "error y") {
					t.Errorf("%v: forged line %q", args, l)
				}
			}
		}
	}
}

// Issue 10 item 9: one JWKS fetch per URL per run, and a cap on the
// number of signatures.
func TestVerifyFetchesEachJKUOnceAndCapsSignatures(t *testing.T) {
	f := newJKUFixture(t)
	signed := f.sign(t, "good", f.srv.URL+"/good/jwks.json")
	many := func(n int) string {
		p := filepath.Join(f.dir, "many.json")
		rewriteSignatures(t, signed, p, func(sigs []any) []any {
			out := make([]any, n)
			for i := range out {
				out[i] = sigs[0]
			}
			return out
		})
		return p
	}
	before := len(f.srv.requests())
	r := cardsign(t, f.dir, nil, "verify", "--all", "--jwks", f.trusted, "--allow-jku", f.srv.URL+"/good/", many(10))
	if r.Code != exitOK {
		t.Fatalf("10 signatures: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if n := len(f.srv.requests()) - before; n != 1 {
		t.Errorf("10 signatures with one jku: %d fetches, want 1", n)
	}

	before = len(f.srv.requests())
	r = cardsign(t, f.dir, nil, "verify", "--jwks", f.trusted, "--allow-jku", f.srv.URL+"/good/", many(17))
	if r.Code != exitUsage || !strings.Contains(r.Stderr, "signatures") || !strings.Contains(r.Stderr, "16") || !strings.Contains(r.Stderr, "--max-signatures") {
		t.Errorf("17 signatures: exit %d, want %d and an error naming signatures, 16 and --max-signatures\n%s", r.Code, exitUsage, r.Stderr)
	}
	if n := len(f.srv.requests()) - before; n != 0 {
		t.Errorf("a card over the signature cap was still checked: %d fetches", n)
	}
	mustRun(t, f.dir, "verify", "--max-signatures", "17", "--jwks", f.trusted, "--allow-jku", f.srv.URL+"/good/", many(17))
	if r := cardsign(t, f.dir, nil, "verify", "--max-signatures", "0", "--jwks", f.trusted, signed); r.Code != exitUsage {
		t.Errorf("--max-signatures 0: exit %d", r.Code)
	}
}

// The whole run is bounded by --max-time: a JWKS server that never answers
// stops it with an error naming the flag.
func TestVerifyMaxTimeBoundsRun(t *testing.T) {
	dir := t.TempDir()
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	defer hang.CloseClientConnections()
	card := filepath.Join(dir, "card.json")
	writeFile(t, card, []byte(`{"name":"x"}`))
	r := runCLI(t, "verify", "--max-time", "50ms", "--timeout", "1h", "--jwks", hang.URL+"/jwks.json", card)
	if r.Code == exitOK || !strings.Contains(r.Stderr, "--max-time") {
		t.Fatalf("exit %d, stderr %s; want a failure naming --max-time", r.Code, r.Stderr)
	}
}

// Local documents are read with the same cap as fetched ones; a device
// that never ends is refused instead of read until memory runs out. The
// child runs under a memory limit so a regression fails instead of
// exhausting the machine.
func TestVerifyLocalDocumentsAreBounded(t *testing.T) {
	f := newJKUFixture(t)
	signed := f.sign(t, "good", f.srv.URL+"/good/jwks.json")
	for _, args := range [][]string{
		{"verify", "--jwks", f.trusted, "--revocations", "/dev/zero", signed},
		{"verify", "--jwks", "/dev/zero", signed},
		{"verify", "--jwks", f.trusted, "--revocations", f.dir, signed},
	} {
		cmd := exec.Command("sh", "-c", `ulimit -v 2000000 && exec "$@"`, "sh", cardsignBin)
		cmd.Args = append(cmd.Args, args...)
		cmd.Dir = f.dir
		out, _ := cmd.CombinedOutput()
		code := cmd.ProcessState.ExitCode()
		if code != exitUsage || strings.Contains(string(out), "out of memory") || !strings.Contains(string(out), "regular file") {
			t.Errorf("%v: exit %d, want %d and a refusal naming a regular file\n%.2000s", args, code, exitUsage, out)
		}
	}
}

func TestEscapeTextAndPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"kid abc is not in the trusted key set", "kid abc is not in the trusted key set"},
		{"a\nb", `a\nb`},
		{"\x1b[31mred", `\x1b[31mred`},
		{"caf\u00e9 \u202e", `café \u202e`},
		{"bad \xff byte", `bad \xff byte`},
		{"tab\there", `tab\there`},
	} {
		if got := escapeText(tc.in); got != tc.want {
			t.Errorf("escapeText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "-"},
		{"3kPq-_Zx", "3kPq-_Zx"},
		{"ES256", "ES256"},
		{"a b", `"a b"`},
		{"k\n", `"k\n"`},
		{"k\u00e9", `"k\u00e9"`},
	} {
		if got := orDash(tc.in); got != tc.want {
			t.Errorf("orDash(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
