package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gojose "github.com/go-jose/go-jose/v4"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/strictjson"
)

// interopCards are the cards every algorithm signs: non-ASCII text, emoji,
// U+2028, params with numbers, every security scheme, several interfaces,
// a v0.3 card, a card whose profiles diverge, and the spec's own sample.
var interopCards = []struct {
	file  string
	extra []string
}{
	{"unicode.json", nil},
	{"params.json", nil},
	{"security.json", nil},
	{"interfaces.json", nil},
	{"divergent.json", nil},
	{"v03.json", nil},
	{"spec-sample.json", []string{"--strip-unknown"}},
}

// jsVerifier returns the command that runs @a2a-js/sdk's
// verifyAgentCardSignature over cards. The test command installs the
// package; a missing install is a failure, never a skip.
func jsVerifier(t *testing.T) string {
	t.Helper()
	harness := filepath.Join(repoRoot, "testdata", "interop", "js")
	if _, err := os.Stat(filepath.Join(harness, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		t.Fatalf("@a2a-js/sdk is not installed in %s: run scripts/test (it runs npm install there) (%v)", harness, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: run scripts/test, which installs it (%v)", err)
	}
	return filepath.Join(harness, "verify.mjs")
}

type jsResult struct {
	File  string `json:"file"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// verifyJS runs the JS verifier and returns its verdict per file.
func verifyJS(t *testing.T, jwks string, files ...string) map[string]jsResult {
	t.Helper()
	cmd := exec.Command("node", append([]string{jsVerifier(t), jwks}, files...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	_ = cmd.Run() // the exit code is 1 when any card fails; the lines say which
	res := map[string]jsResult{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r jsResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("js verifier output %q: %v (stderr: %s)", line, err, errb.String())
		}
		res[r.File] = r
	}
	if len(res) != len(files) {
		t.Fatalf("js verifier answered for %d of %d cards; stderr: %s", len(res), len(files), errb.String())
	}
	return res
}

// verifyGoJOSE checks that at least one signature of a signed card verifies
// with go-jose's detached verification over cardsign's canonical bytes.
func verifyGoJOSE(t *testing.T, dir, signed string, jwksFile string) {
	t.Helper()
	var set gojose.JSONWebKeySet
	data, err := os.ReadFile(filepath.Join(dir, jwksFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &set); err != nil {
		t.Fatalf("go-jose cannot read the JWKS: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, signed))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Signatures []struct{ Protected, Signature string }
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	payloads := map[string][]byte{}
	for _, p := range []string{"spec", "sdk", "python-ascii"} {
		payloads[p] = []byte(mustRun(t, dir, "canonicalize", "--profile", p, signed).Stdout)
	}
	algs := []gojose.SignatureAlgorithm{gojose.ES256, gojose.ES384, gojose.ES512, gojose.RS256, gojose.PS256, gojose.EdDSA}
	verified := 0
	for _, s := range c.Signatures {
		// Compact serialization with an empty payload part: detached.
		obj, err := gojose.ParseSignedCompact(s.Protected+".."+s.Signature, algs)
		if err != nil {
			t.Fatalf("go-jose cannot parse signature of %s: %v", signed, err)
		}
		kid := obj.Signatures[0].Header.KeyID
		keys := set.Key(kid)
		if len(keys) != 1 {
			t.Fatalf("kid %s: %d keys in JWKS", kid, len(keys))
		}
		for _, p := range payloads {
			if err := obj.DetachedVerify(p, keys[0].Key); err == nil {
				verified++
				break
			}
		}
	}
	if verified == 0 {
		t.Fatalf("go-jose verified no signature of %s", signed)
	}
}

func TestInteropSignedCardsVerifyEverywhere(t *testing.T) {
	for _, alg := range []string{"ES256", "EdDSA", "ES384", "ES512", "RS256", "PS256"} {
		t.Run(alg, func(t *testing.T) {
			dir := t.TempDir()
			mustRun(t, dir, "keygen", "--alg", alg, "--out", "key")
			writeFile(t, filepath.Join(dir, "jwks.json"), []byte(mustRun(t, dir, "jwks", "--key", "file:key").Stdout))
			var signed []string
			for _, c := range interopCards {
				out := "signed-" + c.file
				args := append([]string{"sign", "--key", "file:key"}, c.extra...)
				r := mustRun(t, dir, append(args, filepath.Join(repoRoot, "testdata", "cards", c.file))...)
				writeFile(t, filepath.Join(dir, out), []byte(r.Stdout))
				if c.file == "divergent.json" && strings.Count(r.Stdout, `"protected"`) != 3 {
					t.Fatalf("a divergent card must carry one signature per profile (spec, sdk, python-ascii):\n%s", r.Stdout)
				}
				if c.file == "unicode.json" && !strings.Contains(r.Stdout, "Café Übersetzer 🌍") {
					t.Fatalf("signed card must keep non-ASCII text literal:\n%s", r.Stdout)
				}
				v := mustRun(t, dir, "verify", "--jwks", "jwks.json", out)
				if !strings.Contains(v.Stdout, "valid") {
					t.Fatalf("cardsign verify %s: %s", out, v.Stdout)
				}
				verifyGoJOSE(t, dir, out, "jwks.json")
				signed = append(signed, filepath.Join(dir, out))
			}
			for file, r := range verifyJS(t, filepath.Join(dir, "jwks.json"), signed...) {
				if !r.OK {
					t.Errorf("@a2a-js/sdk rejects %s: %s", filepath.Base(file), r.Error)
				}
			}
		})
	}
}

// mutate parses a signed card, applies f to it, and writes the result.
func mutate(t *testing.T, src, dst string, f func(strictjson.Value) strictjson.Value) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	v, err := card.Parse(data, strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, f(v).Indent())
}

// set returns object v with member key replaced by (or added as) val; a
// zero val (null) removes it.
func set(v strictjson.Value, key string, val strictjson.Value, remove bool) strictjson.Value {
	out := []strictjson.Member{}
	found := false
	for _, m := range v.Obj {
		if m.Key == key {
			found = true
			if remove {
				continue
			}
			m.Val = val
		}
		out = append(out, m)
	}
	if !found && !remove {
		out = append(out, strictjson.Member{Key: key, Val: val})
	}
	return strictjson.ObjectValue(out...)
}

func get(v strictjson.Value, key string) strictjson.Value { x, _ := v.Get(key); return x }

// reorder reverses the member order of every object, recursively.
func reorder(v strictjson.Value) strictjson.Value {
	switch v.Kind {
	case strictjson.Object:
		out := make([]strictjson.Member, len(v.Obj))
		for i, m := range v.Obj {
			out[len(v.Obj)-1-i] = strictjson.Member{Key: m.Key, Val: reorder(m.Val)}
		}
		return strictjson.ObjectValue(out...)
	case strictjson.Array:
		out := make([]strictjson.Value, len(v.Arr))
		for i, e := range v.Arr {
			out[i] = reorder(e)
		}
		return strictjson.ArrayValue(out...)
	}
	return v
}

func TestTamperFailsEverywhereReorderingDoesNot(t *testing.T) {
	for _, alg := range []string{"ES256", "EdDSA"} {
		t.Run(alg, func(t *testing.T) {
			dir := t.TempDir()
			mustRun(t, dir, "keygen", "--alg", alg, "--out", "key")
			jwksFile := filepath.Join(dir, "jwks.json")
			writeFile(t, jwksFile, []byte(mustRun(t, dir, "jwks", "--key", "file:key").Stdout))
			signed := filepath.Join(dir, "signed.json")
			writeFile(t, signed, []byte(mustRun(t, dir, "sign", "--key", "file:key", filepath.Join(repoRoot, "testdata/cards/security.json")).Stdout))

			str := strictjson.StringValue
			tampers := map[string]func(strictjson.Value) strictjson.Value{
				"change name": func(v strictjson.Value) strictjson.Value { return set(v, "name", str("Evil Agent"), false) },
				"change interface url": func(v strictjson.Value) strictjson.Value {
					ifs := get(v, "supportedInterfaces")
					ifs.Arr[0] = set(ifs.Arr[0], "url", str("https://evil.example.com/a2a"), false)
					return set(v, "supportedInterfaces", ifs, false)
				},
				"change nested scope": func(v strictjson.Value) strictjson.Value {
					reqs := get(v, "securityRequirements")
					r0 := reqs.Arr[0]
					schemes := get(r0, "schemes")
					schemes = set(schemes, "oauth", strictjson.ObjectValue(strictjson.Member{Key: "list", Val: strictjson.ArrayValue(str("agent:admin"))}), false)
					reqs.Arr[0] = set(r0, "schemes", schemes, false)
					return set(v, "securityRequirements", reqs, false)
				},
				"flip a boolean": func(v strictjson.Value) strictjson.Value {
					return set(v, "capabilities", set(get(v, "capabilities"), "streaming", strictjson.BoolValue(false), false), false)
				},
				"add a signed field": func(v strictjson.Value) strictjson.Value {
					return set(v, "defaultOutputModes", strictjson.ArrayValue(str("application/json"), str("text/html")), false)
				},
				"add an optional field": func(v strictjson.Value) strictjson.Value {
					return set(v, "capabilities", set(get(v, "capabilities"), "extensions", strictjson.ArrayValue(strictjson.ObjectValue(strictjson.Member{Key: "uri", Val: str("urn:evil")})), false), false)
				},
				"remove a field": func(v strictjson.Value) strictjson.Value { return set(v, "documentationUrl", strictjson.Value{}, true) },
				"remove a scheme": func(v strictjson.Value) strictjson.Value {
					return set(v, "securitySchemes", set(get(v, "securitySchemes"), "mtls", strictjson.Value{}, true), false)
				},
				"add a proto-name alias": func(v strictjson.Value) strictjson.Value {
					// ProtoJSON readers take icon_url for iconUrl when iconUrl is absent.
					return set(set(v, "iconUrl", strictjson.Value{}, true), "icon_url", str("https://evil.example.com/i.png"), false)
				},
				"reorder an array": func(v strictjson.Value) strictjson.Value {
					m := get(v, "defaultInputModes")
					m.Arr[0], m.Arr[1] = m.Arr[1], m.Arr[0]
					return set(v, "defaultInputModes", m, false)
				},
			}
			var files []string
			for name, f := range tampers {
				out := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
				mutate(t, signed, out, f)
				r := cardsign(t, dir, nil, "verify", "--jwks", jwksFile, out)
				if r.Code != exitFail || !strings.Contains(r.Stdout, "invalid") {
					t.Errorf("%s: cardsign verify exit %d, want 1\n%s", name, r.Code, r.Stdout)
				}
				files = append(files, out)
			}
			for file, r := range verifyJS(t, jwksFile, files...) {
				if r.OK {
					t.Errorf("@a2a-js/sdk accepts a tampered card: %s", filepath.Base(file))
				}
			}

			reordered := filepath.Join(dir, "reordered.json")
			mutate(t, signed, reordered, reorder)
			compact := filepath.Join(dir, "compact.json")
			raw, _ := os.ReadFile(signed)
			v, _ := card.Parse(raw, strictjson.Limits{})
			writeFile(t, compact, v.Compact())
			for _, f := range []string{reordered, compact} {
				if r := cardsign(t, dir, nil, "verify", "--jwks", jwksFile, f); r.Code != 0 {
					t.Errorf("%s: formatting must not break the signature: %s", filepath.Base(f), r.Stdout)
				}
			}
			for file, r := range verifyJS(t, jwksFile, reordered, compact) {
				if !r.OK {
					t.Errorf("@a2a-js/sdk rejects %s: %s", filepath.Base(file), r.Error)
				}
			}
		})
	}
}

func TestVerifyKeySelection(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, dir, "keygen", "--out", "a")
	mustRun(t, dir, "keygen", "--out", "b")
	writeFile(t, filepath.Join(dir, "jwks-b.json"), []byte(mustRun(t, dir, "jwks", "--key", "file:b").Stdout))
	card := filepath.Join(repoRoot, "testdata/cards/interfaces.json")
	writeFile(t, filepath.Join(dir, "signed.json"), []byte(mustRun(t, dir, "sign", "--key", "file:a", "--jku", "https://keys.example.com/jwks.json", card).Stdout))

	r := cardsign(t, dir, nil, "verify", "--jwks", "jwks-b.json", "signed.json")
	if r.Code != exitFail || !strings.Contains(r.Stdout, "not in the trusted key set") || !strings.Contains(r.Stdout, "not followed") {
		t.Fatalf("a key outside the trusted set must not verify: exit %d\n%s", r.Code, r.Stdout)
	}
	// Same kid, other key material: the JWKS claims kid a but holds key b.
	jwksB, _ := os.ReadFile(filepath.Join(dir, "jwks-b.json"))
	kidA := strings.TrimSpace(strings.SplitN(strings.SplitN(mustRun(t, dir, "jwks", "--key", "file:a").Stdout, `"kid":"`, 2)[1], `"`, 2)[0])
	kidB := strings.SplitN(strings.SplitN(string(jwksB), `"kid":"`, 2)[1], `"`, 2)[0]
	writeFile(t, filepath.Join(dir, "liar.json"), bytes.ReplaceAll(jwksB, []byte(kidB), []byte(kidA)))
	r = cardsign(t, dir, nil, "verify", "--jwks", "liar.json", "signed.json")
	if r.Code != exitFail || !strings.Contains(r.Stdout, "does not match") {
		t.Fatalf("wrong key under the right kid must fail: exit %d\n%s", r.Code, r.Stdout)
	}
	// Two keys, --all.
	writeFile(t, filepath.Join(dir, "jwks-ab.json"), []byte(mustRun(t, dir, "jwks", "--key", "file:a", "--key", "file:b").Stdout))
	writeFile(t, filepath.Join(dir, "two.json"), []byte(mustRun(t, dir, "sign", "--key", "file:a", "--key", "file:b", card).Stdout))
	mustRun(t, dir, "verify", "--all", "--jwks", "jwks-ab.json", "two.json")
	writeFile(t, filepath.Join(dir, "jwks-a.json"), []byte(mustRun(t, dir, "jwks", "--key", "file:a").Stdout))
	mustRun(t, dir, "verify", "--jwks", "jwks-a.json", "two.json")
	if r := cardsign(t, dir, nil, "verify", "--all", "--jwks", "jwks-a.json", "two.json"); r.Code != exitFail {
		t.Fatalf("--all with one unknown key: exit %d\n%s", r.Code, r.Stdout)
	}
	// Usage and input errors exit 2.
	if r := cardsign(t, dir, nil, "verify", "signed.json"); r.Code != exitUsage {
		t.Fatalf("verify without --jwks: exit %d", r.Code)
	}
	if r := cardsign(t, dir, []byte(`{"name":`), "verify", "--jwks", "jwks-a.json", "-"); r.Code != exitUsage {
		t.Fatalf("verify of malformed input: exit %d", r.Code)
	}
	if r := cardsign(t, dir, nil, "verify", "--jwks", "jwks-a.json", card); r.Code != exitFail || !strings.Contains(r.Stdout, "no signatures") {
		t.Fatalf("verify of an unsigned card: exit %d %s", r.Code, r.Stdout)
	}
}

func TestVerifyJWKSURLAndJKU(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, dir, "keygen", "--out", "a")
	mustRun(t, dir, "keygen", "--out", "b")
	jwksA := mustRun(t, dir, "jwks", "--key", "file:a").Stdout
	writeFile(t, filepath.Join(dir, "jwks-b.json"), []byte(mustRun(t, dir, "jwks", "--key", "file:b").Stdout))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/keys/jwks.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		io.WriteString(w, jwksA)
	}))
	defer srv.Close()
	jku := srv.URL + "/keys/jwks.json"
	writeFile(t, filepath.Join(dir, "signed.json"), []byte(mustRun(t, dir, "sign", "--key", "file:a", "--jku", jku, filepath.Join(repoRoot, "testdata/cards/params.json")).Stdout))

	mustRun(t, dir, "verify", "--jwks", jku, "signed.json") // JWKS by URL
	if r := cardsign(t, dir, nil, "verify", "--jwks", srv.URL+"/missing.json", "signed.json"); r.Code != exitUsage || !strings.Contains(r.Stderr, "404") {
		t.Fatalf("a JWKS URL that answers 404: exit %d %s", r.Code, r.Stderr)
	}
	// jku is a hint, followed only under an allowed prefix.
	if r := cardsign(t, dir, nil, "verify", "--jwks", "jwks-b.json", "signed.json"); r.Code != exitFail {
		t.Fatalf("jku followed without --allow-jku: exit %d\n%s", r.Code, r.Stdout)
	}
	mustRun(t, dir, "verify", "--jwks", "jwks-b.json", "--allow-jku", srv.URL+"/keys/", "signed.json")
	if r := cardsign(t, dir, nil, "verify", "--jwks", "jwks-b.json", "--allow-jku", srv.URL+"/ke", "signed.json"); r.Code != exitFail {
		t.Fatalf("a prefix must match at a path boundary: exit %d\n%s", r.Code, r.Stdout)
	}
	if r := cardsign(t, dir, nil, "sign", "--key", "file:a", "--jku", "http://keys.example.com/jwks.json", filepath.Join(repoRoot, "testdata/cards/params.json")); r.Code != exitUsage {
		t.Fatalf("plain http jku for a remote host must be refused: exit %d", r.Code)
	}
	// A jku under the allowed prefix that redirects elsewhere is not followed.
	redirect := httptest.NewServer(http.RedirectHandler(jku, http.StatusFound))
	defer redirect.Close()
	writeFile(t, filepath.Join(dir, "redirected.json"), []byte(mustRun(t, dir, "sign", "--key", "file:a", "--jku", redirect.URL+"/jwks.json", filepath.Join(repoRoot, "testdata/cards/params.json")).Stdout))
	r := cardsign(t, dir, nil, "verify", "--jwks", "jwks-b.json", "--allow-jku", redirect.URL+"/", "redirected.json")
	if r.Code != exitFail || !strings.Contains(r.Stdout, "redirects are not followed") {
		t.Fatalf("a redirecting jku must not be followed: exit %d\n%s", r.Code, r.Stdout)
	}
}

// TestInteropLifetime: signatures with iat and exp in their protected header
// still verify with @a2a-js/sdk and go-jose (extra protected members, like
// the profile marker), and cardsign verify refuses one past its exp.
func TestInteropLifetime(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, dir, "keygen", "--alg", "ES256", "--out", "key")
	writeFile(t, filepath.Join(dir, "jwks.json"), []byte(mustRun(t, dir, "jwks", "--key", "file:key").Stdout))
	for _, c := range []struct{ file, lifetime string }{{"security.json", "168h"}, {"divergent.json", "168h"}, {"short.json", "1s"}} {
		src := c.file
		if src == "short.json" {
			src = "security.json"
		}
		r := mustRun(t, dir, "sign", "--key", "file:key", "--lifetime", c.lifetime, filepath.Join(repoRoot, "testdata", "cards", src))
		writeFile(t, filepath.Join(dir, "signed-"+c.file), []byte(r.Stdout))
	}
	for _, f := range []string{"signed-security.json", "signed-divergent.json"} {
		if v := mustRun(t, dir, "verify", "--jwks", "jwks.json", f); !strings.Contains(v.Stdout, "valid") {
			t.Fatalf("cardsign verify %s: %s", f, v.Stdout)
		}
		verifyGoJOSE(t, dir, f, "jwks.json")
	}
	for file, r := range verifyJS(t, filepath.Join(dir, "jwks.json"), filepath.Join(dir, "signed-security.json"), filepath.Join(dir, "signed-divergent.json")) {
		if !r.OK {
			t.Errorf("@a2a-js/sdk rejects %s with iat/exp in its protected header: %s", filepath.Base(file), r.Error)
		}
	}
	time.Sleep(2100 * time.Millisecond)
	v := cardsign(t, dir, nil, "verify", "--jwks", "jwks.json", "--clock-skew", "0s", "signed-short.json")
	if v.Code == 0 || !strings.Contains(v.Stdout+v.Stderr, "signature expired at") {
		t.Fatalf("an expired signature: exit %d\n%s%s", v.Code, v.Stdout, v.Stderr)
	}
}
