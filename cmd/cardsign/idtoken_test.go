package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeJWT is shaped like a compact JWS; the client never verifies it.
const fakeJWT = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJyZXBvOmFjbWUvcGF5bWVudHMifQ.c2lnbmF0dXJl"

func clearIDTokenEnv(t *testing.T) {
	t.Helper()
	for _, v := range []string{tokenEnv, idTokenEnv, idTokenFileEnv, idTokenAudienceEnv, actionsRequestURLEnv, actionsRequestTokenEnv, "GITLAB_TOKEN_FOR_TEST"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
}

func TestCheckIDToken(t *testing.T) {
	for _, tt := range []struct {
		tok string
		ok  bool
	}{
		{fakeJWT, true},
		{"", false},
		{"not-a-jwt", false},
		{"eyJhbGciOiJub25lIn0.e30", false}, // two parts
		{"eyJhbGciOiJFUzI1NiJ9.e30.c2ln.ZXh0cmE.bW9yZQ", false}, // JWE-like
		{"eyJhbGciOiJFUzI1NiJ9.e30.c2ln+/=", false},             // not base64url
		{"abc.def.ghi", false},                                  // not a JSON header
	} {
		err := checkIDToken(tt.tok, "test")
		if (err == nil) != tt.ok {
			t.Errorf("checkIDToken(%q) = %v, want ok %v", tt.tok, err, tt.ok)
		}
		if err != nil && tt.tok != "" && strings.Contains(err.Error(), tt.tok) {
			t.Errorf("the error repeats the token: %v", err)
		}
	}
}

// TestGitHubIDToken: the client asks the Actions endpoint for the configured
// audience with the request token, and reads the value; refusals say what
// the job lacks, never the tokens.
func TestGitHubIDToken(t *testing.T) {
	const reqToken = "request-token-secret"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "Bearer "+reqToken:
			w.WriteHeader(http.StatusUnauthorized)
		case r.URL.Query().Get("api-version") != "2.0":
			w.WriteHeader(http.StatusBadRequest)
		case r.URL.Query().Get("audience") == "empty":
			w.Write([]byte(`{"count":0}`))
		default:
			w.Write([]byte(`{"value":"` + fakeJWT + `","aud":"` + r.URL.Query().Get("audience") + `"}`))
		}
	}))
	defer srv.Close()
	url := srv.URL + "/token?api-version=2.0"
	ctx := t.Context()
	tok, err := githubIDToken(ctx, url, reqToken, "cardsign")
	if err != nil || tok != fakeJWT {
		t.Fatalf("githubIDToken = %q, %v", tok, err)
	}
	for name, tc := range map[string]struct{ url, reqToken, aud, want string }{
		"wrong request token": {url, "other", "cardsign", "HTTP 401"},
		"no request token":    {url, "", "cardsign", actionsRequestTokenEnv},
		"no value":            {url, reqToken, "empty", "without a token"},
		"http to a remote":    {"http://example.com/token", reqToken, "cardsign", "not an https URL"},
	} {
		_, err := githubIDToken(ctx, tc.url, tc.reqToken, tc.aud)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to say %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), reqToken) {
			t.Errorf("%s: the error repeats the request token: %v", name, err)
		}
	}

	// Through connFlags.token, as in a workflow with id-token: write: only
	// with an audience (many jobs may mint tokens for other uses), and not
	// when a client certificate is the caller's credential.
	clearIDTokenEnv(t)
	t.Setenv(actionsRequestURLEnv, url)
	t.Setenv(actionsRequestTokenEnv, reqToken)
	cf := &connFlags{cmd: "sign"}
	if got, err := cf.token(env{}); err != nil || got != "" {
		t.Fatalf("token() in GitHub Actions without an audience = %q, %v; want none", got, err)
	}
	t.Setenv(idTokenAudienceEnv, "https://cardsign.example.com")
	if got, err := cf.token(env{}); err != nil || got != fakeJWT {
		t.Fatalf("token() in GitHub Actions = %q, %v", got, err)
	}
	if got, err := (&connFlags{cmd: "sign", certFile: "client.pem"}).token(env{}); err != nil || got != "" {
		t.Fatalf("token() with a client certificate = %q, %v; want none (the certificate is the credential)", got, err)
	}
	// A bearer token in $CARDSIGN_TOKEN still wins.
	t.Setenv(tokenEnv, "static-token")
	if got, _ := cf.token(env{}); got != "static-token" {
		t.Fatalf("token() with $%s = %q", tokenEnv, got)
	}
}

// TestIDTokenSources: the precedence of the credential sources.
func TestIDTokenSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(fakeJWT+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(fakeJWT, "c2lnbmF0dXJl", "b3RoZXI", 1)
	for _, tt := range []struct {
		name    string
		flags   connFlags
		env     map[string]string
		stdin   string
		want    string
		wantErr string
	}{
		{name: "--id-token file", flags: connFlags{idt: idTokenFlags{file: file}}, want: fakeJWT},
		{name: "--id-token -", flags: connFlags{idt: idTokenFlags{file: "-"}}, stdin: fakeJWT, want: fakeJWT},
		{name: "--id-token over $CARDSIGN_TOKEN", flags: connFlags{idt: idTokenFlags{file: file}}, env: map[string]string{tokenEnv: "static"}, want: fakeJWT},
		{name: "--id-token-env (GitLab)", flags: connFlags{idt: idTokenFlags{envName: "GITLAB_TOKEN_FOR_TEST"}}, env: map[string]string{"GITLAB_TOKEN_FOR_TEST": other}, want: other},
		{name: "--id-token-env unset", flags: connFlags{idt: idTokenFlags{envName: "GITLAB_TOKEN_FOR_TEST"}}, wantErr: "id_tokens"},
		{name: "$CARDSIGN_ID_TOKEN", env: map[string]string{idTokenEnv: other}, want: other},
		{name: "$CARDSIGN_ID_TOKEN_FILE (Kubernetes)", env: map[string]string{idTokenFileEnv: file}, want: fakeJWT},
		{name: "static token first", env: map[string]string{tokenEnv: "static", idTokenEnv: other}, want: "static"},
		{name: "both kinds named", flags: connFlags{tokenFile: file, idt: idTokenFlags{file: file}}, wantErr: "give one"},
		{name: "not a JWT", env: map[string]string{idTokenEnv: "hello"}, wantErr: "not a JWT"},
		{name: "nothing", want: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clearIDTokenEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cf := tt.flags
			cf.cmd = "sign"
			got, err := cf.token(env{stdin: strings.NewReader(tt.stdin), stderr: &bytes.Buffer{}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("token() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
