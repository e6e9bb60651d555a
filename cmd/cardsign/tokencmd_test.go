package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// checkTokenShape checks the shape of a generated token.
func checkTokenShape(t *testing.T, tok string) {
	t.Helper()
	body, ok := strings.CutPrefix(tok, "cst_")
	if !ok {
		t.Fatalf("token %q lacks the cst_ prefix", tok)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(raw) != 32 {
		t.Fatalf("token body is not 32 bytes of unpadded base64url: %d bytes, %v", len(raw), err)
	}
}

func TestTokenNewPrintsConfigWithItsHash(t *testing.T) {
	r := runCLI(t, "token", "new", "--name", "release-pipeline", "--roles", "signer,auditor")
	if r.Code != exitOK {
		t.Fatalf("exit %d, stderr %s", r.Code, r.Stderr)
	}
	tok := strings.TrimSuffix(r.Stdout, "\n")
	checkTokenShape(t, tok)
	want := "auth:\n  tokens:\n    - name: release-pipeline\n      sha256: " + sha256Hex(tok) + "\n      roles: [signer, auditor]\n"
	if r.Stderr != want {
		t.Errorf("config snippet:\n%s\nwant:\n%s", r.Stderr, want)
	}
	if strings.Contains(r.Stderr, tok) {
		t.Error("the config snippet holds the token itself")
	}
	if again := runCLI(t, "token", "new", "--name", "x", "--roles", "admin"); again.Stdout == r.Stdout {
		t.Error("two tokens are equal")
	}
}

func TestTokenNewOutFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "release.token")
	r := runCLI(t, "token", "new", "--name", "ci", "--roles", "signer", "--out", out)
	if r.Code != exitOK || r.Stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.Code, r.Stdout, r.Stderr)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %04o, want 0600", fi.Mode().Perm())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSuffix(string(data), "\n")
	checkTokenShape(t, tok)
	if !strings.Contains(r.Stderr, "      sha256: "+sha256Hex(tok)+"\n") {
		t.Errorf("config snippet does not hold the token's hash:\n%s", r.Stderr)
	}
	if h := runCLI(t, "token", "hash", out); h.Code != exitOK || h.Stdout != sha256Hex(tok)+"\n" {
		t.Errorf("token hash %s: exit %d, %q, stderr %s", out, h.Code, h.Stdout, h.Stderr)
	}

	again := runCLI(t, "token", "new", "--name", "ci", "--roles", "signer", "--out", out)
	if again.Code != exitUsage || !strings.Contains(again.Stderr, "refusing to overwrite "+out) {
		t.Errorf("second --out to the same file: exit %d, stderr %s", again.Code, again.Stderr)
	}
	if after, _ := os.ReadFile(out); string(after) != string(data) {
		t.Error("the existing token file was changed")
	}
}

func TestTokenNewRefusesBadNamesAndRoles(t *testing.T) {
	long := strings.Repeat("a", 65)
	for _, tc := range []struct {
		name, roles, want string
	}{
		{"", "signer", "--name must be 1-64"},
		{long, "signer", "--name must be 1-64"},
		{"has space", "signer", "--name must be 1-64"},
		{"colon:name", "signer", "--name must be 1-64"},
		{"ünicode", "signer", "--name must be 1-64"},
		{"ok", "", "--roles: name at least one role"},
		{"ok", "root", `unknown role "root"`},
		{"ok", "Signer", `unknown role "Signer"`},
		{"ok", "signer,", `unknown role ""`},
		{"ok", "signer,admin,signer", `role "signer" is listed twice`},
	} {
		r := runCLI(t, "token", "new", "--name", tc.name, "--roles", tc.roles)
		if r.Code != exitUsage || !strings.Contains(r.Stderr, tc.want) || r.Stdout != "" {
			t.Errorf("--name %q --roles %q: exit %d, stdout %q, stderr %s; want %q", tc.name, tc.roles, r.Code, r.Stdout, r.Stderr, tc.want)
		}
	}
	if r := runCLI(t, "token", "new", "--name", strings.Repeat("a", 64), "--roles", "signer,admin,auditor"); r.Code != exitOK {
		t.Errorf("64-character name and every role: exit %d, stderr %s", r.Code, r.Stderr)
	}
}

func TestTokenNewQuotesNamesYAMLWouldNotReadAsStrings(t *testing.T) {
	for name, want := range map[string]string{"ci": "ci", "123": `"123"`, "true": `"true"`, "No": `"No"`, "-x": `"-x"`, ".inf": `".inf"`, "a.b_c-d": "a.b_c-d"} {
		r := runCLI(t, "token", "new", "--name", name, "--roles", "signer")
		if !strings.Contains(r.Stderr, "    - name: "+want+"\n") {
			t.Errorf("--name %s: snippet\n%s\nwant name: %s", name, r.Stderr, want)
		}
	}
}

func TestTokenHashAgreesWithSHA256(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{"cst_abc\n", "cst_abc", "cst_abc \r\n\t", "\n  cst_abc\n", "made-elsewhere.token/value=="} {
		file := filepath.Join(dir, "tok")
		writeFile(t, file, []byte(content))
		want := sha256Hex(strings.TrimSpace(content)) + "\n"
		if r := runCLI(t, "token", "hash", file); r.Code != exitOK || r.Stdout != want {
			t.Errorf("hash of file %q: exit %d, %q, want %q (stderr %s)", content, r.Code, r.Stdout, want, r.Stderr)
		}
		r := cardsign(t, dir, []byte(content), "token", "hash")
		if r.Code != exitOK || r.Stdout != want {
			t.Errorf("hash of stdin %q: exit %d, %q, want %q (stderr %s)", content, r.Code, r.Stdout, want, r.Stderr)
		}
	}
	writeFile(t, filepath.Join(dir, "blank"), []byte("\n\n"))
	if r := runCLI(t, "token", "hash", filepath.Join(dir, "blank")); r.Code != exitUsage || !strings.Contains(r.Stderr, "holds no token") {
		t.Errorf("blank file: exit %d, stderr %s", r.Code, r.Stderr)
	}
	if r := runCLI(t, "token", "hash", "a", "b"); r.Code != exitUsage {
		t.Errorf("two files: exit %d", r.Code)
	}
	if r := runCLI(t, "help", "token"); r.Code != exitOK || !strings.Contains(r.Stdout, "cardsign token new --name") {
		t.Errorf("cardsign help token: exit %d, %s", r.Code, r.Stdout)
	}
}
