package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// resolverRow is what cardsign's portability line says of @a2a-js/sdk's
// resolver path: "✔", "✘ (SDK bug a2a-js#663)", or "" when the line lacks it.
func resolverRow(line string) string {
	_, row, ok := strings.Cut(line, "@a2a-js/sdk resolver ")
	if !ok {
		return ""
	}
	if strings.HasPrefix(row, "✔") {
		return "✔"
	}
	end := strings.Index(row, ")")
	if end < 0 {
		return row
	}
	return row[:end+1]
}

// TestInteropJSResolver (issue 24 #21): an A2A client of @a2a-js/sdk that
// fetches a card with the SDK's own DefaultAgentCardResolver and checks it
// with verifyAgentCardSignature fails on every card with security schemes,
// whoever signed it: the resolver's conversion loses securitySchemes before
// the verifier canonicalizes (a2a-js#663). cardsign sign, verify and lint
// say so per card, and what they say is what the real resolver does, card
// by card, fetching each over loopback HTTP; and so for cards a2a-python
// signed.
func TestInteropJSResolver(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, dir, "keygen", "--alg", "ES256", "--out", "key")
	jwksFile := filepath.Join(dir, "jwks.json")
	writeFile(t, jwksFile, []byte(mustRun(t, dir, "jwks", "--key", "file:key").Stdout))
	predicted := map[string]string{}
	for _, c := range interopCards {
		src := filepath.Join(repoRoot, "testdata", "cards", c.file)
		r := mustRun(t, dir, append(append([]string{"sign", "--key", "file:key"}, c.extra...), src)...)
		out := "signed-" + c.file
		writeFile(t, filepath.Join(dir, out), []byte(r.Stdout))
		row := resolverRow(r.Stderr)
		if row != "✔" && row != "✘ (SDK bug a2a-js#663)" {
			t.Fatalf("sign %s: the portability line does not report the resolver path: %q\n%s", c.file, row, r.Stderr)
		}
		if v := mustRun(t, dir, "verify", "--jwks", "jwks.json", out); resolverRow(v.Stdout) != row {
			t.Fatalf("verify %s says %q of the resolver, sign said %q:\n%s", out, resolverRow(v.Stdout), row, v.Stdout)
		}
		lint := cardsign(t, dir, nil, append(append([]string{"lint"}, c.extra...), src)...)
		if got := resolverRow(lint.Stdout); got != row {
			t.Fatalf("lint %s says %q of the resolver, sign said %q:\n%s", c.file, got, row, lint.Stdout)
		}
		predicted["/"+out] = row
	}
	if predicted["/signed-security.json"] != "✘ (SDK bug a2a-js#663)" || predicted["/signed-unicode.json"] != "✔" {
		t.Fatalf("want a card of each kind (security.json with schemes, unicode.json without): %v", predicted)
	}

	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	checkResolver(t, jwksFile, srv.URL, predicted)

	// Cards signed by another signer fail that path alike: two that
	// a2a-python 1.1.0 signed, one with security schemes and one without.
	vectors := filepath.Join(repoRoot, "testdata", "vectors", "a2a-python-1.1.0")
	byPython := map[string]string{}
	for _, name := range []string{"a_ascii_basic", "f_security_empty"} {
		v := mustRun(t, dir, "verify", "--revocations", "none", "--jwks", filepath.Join(vectors, "jwks.json"), filepath.Join(vectors, name+".signed.json"))
		byPython["/"+name+".signed.json"] = resolverRow(v.Stdout)
	}
	if byPython["/f_security_empty.signed.json"] != "✘ (SDK bug a2a-js#663)" || byPython["/a_ascii_basic.signed.json"] != "✔" {
		t.Fatalf("cardsign verify of a2a-python's cards: %v", byPython)
	}
	vsrv := httptest.NewServer(http.FileServer(http.Dir(vectors)))
	defer vsrv.Close()
	checkResolver(t, filepath.Join(vectors, "jwks.json"), vsrv.URL, byPython)
}

// checkResolver has @a2a-js/sdk's resolver fetch each card under baseURL
// (the keys of predicted are their paths) and verify it with the keys in
// jwksFile, and checks that it accepts exactly the cards predicted "✔".
func checkResolver(t *testing.T, jwksFile, baseURL string, predicted map[string]string) {
	t.Helper()
	jsVerifier(t) // the harness is installed
	var paths []string
	for p := range predicted {
		paths = append(paths, p)
	}
	cmd := exec.Command("node", append([]string{filepath.Join(repoRoot, "testdata", "interop", "js", "resolve.mjs"), jwksFile, baseURL}, paths...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run() // exit 1 when any card fails; the lines say which
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r struct {
			Path  string `json:"path"`
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("resolver output %q: %v (stderr: %s)", line, err, stderr.String())
		}
		seen++
		t.Logf("%s: @a2a-js/sdk resolver ok=%v %s; cardsign: %s", r.Path, r.OK, r.Error, predicted[r.Path])
		if want := predicted[r.Path] == "✔"; r.OK != want {
			t.Errorf("%s: @a2a-js/sdk's resolver says ok=%v (%s), cardsign predicted %s", r.Path, r.OK, r.Error, predicted[r.Path])
		}
	}
	if seen != len(paths) {
		t.Fatalf("the resolver answered for %d of %d cards; stderr: %s", seen, len(paths), stderr.String())
	}
}
