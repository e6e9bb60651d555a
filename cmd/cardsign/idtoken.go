package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Where a release pipeline's OIDC identity token comes from (README,
// "Pipelines with OIDC identity tokens").
const (
	// idTokenEnv holds the token itself: GitLab CI's id_tokens keyword
	// defines it under this name unless --id-token-env names another.
	idTokenEnv = "CARDSIGN_ID_TOKEN"
	// idTokenFileEnv names a file holding it (a Kubernetes projected
	// service-account token).
	idTokenFileEnv = "CARDSIGN_ID_TOKEN_FILE"
	// idTokenAudienceEnv is the audience requested from GitHub Actions.
	// There is no default: a token is good at every cardsignd whose issuer
	// configuration names its audience, so each deployment names its own
	// (its URL), and setting it is what turns the request on.
	idTokenAudienceEnv = "CARDSIGN_ID_TOKEN_AUDIENCE"
	// defaultProjectedToken is where the Kubernetes examples project the
	// token; read when it exists and nothing else supplied a token.
	defaultProjectedToken = "/var/run/secrets/tokens/cardsign"
	// GitHub Actions sets these in a job with `permissions: id-token: write`.
	actionsRequestURLEnv   = "ACTIONS_ID_TOKEN_REQUEST_URL"
	actionsRequestTokenEnv = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
	// maxIDToken caps an identity token read from anywhere: real ones are
	// one to two KiB.
	maxIDToken = 16 << 10
)

// idTokenFlags are the connection flags that choose an identity token.
type idTokenFlags struct {
	file     string // --id-token FILE|-
	envName  string // --id-token-env NAME
	audience string // --id-token-audience AUD
}

// source is where a bearer credential came from, for errors and the
// one-line notice; never the credential itself.
type credential struct {
	token  string
	source string
}

// idToken finds the caller's OIDC identity token: --id-token, the variable
// --id-token-env names, $CARDSIGN_ID_TOKEN, GitHub Actions' token endpoint
// (only when an audience is given: many jobs may mint tokens for other
// purposes), $CARDSIGN_ID_TOKEN_FILE, then the Kubernetes projected path. It
// returns a zero credential when there is none. Errors name the source, never
// a token.
func (f *idTokenFlags) idToken(ctx context.Context, e env) (credential, error) {
	switch {
	case f.file == "-":
		tok, err := readIDToken(e.stdin, "standard input")
		return credential{tok, "--id-token -"}, err
	case f.file != "":
		tok, err := readIDTokenFile(f.file)
		return credential{tok, "--id-token " + f.file}, err
	case f.envName != "":
		v := strings.TrimSpace(os.Getenv(f.envName))
		if v == "" {
			return credential{}, fmt.Errorf("--id-token-env %s: $%s is empty or unset (GitLab: declare it under id_tokens: in .gitlab-ci.yml, with the audience cardsignd expects)", f.envName, f.envName)
		}
		return credential{v, "$" + f.envName}, checkIDToken(v, "$"+f.envName)
	}
	if v := strings.TrimSpace(os.Getenv(idTokenEnv)); v != "" {
		return credential{v, "$" + idTokenEnv}, checkIDToken(v, "$"+idTokenEnv)
	}
	if reqURL, aud := os.Getenv(actionsRequestURLEnv), orEnv(f.audience, idTokenAudienceEnv); reqURL != "" && aud != "" {
		tok, err := githubIDToken(ctx, reqURL, os.Getenv(actionsRequestTokenEnv), aud)
		return credential{tok, "GitHub Actions (audience " + aud + ")"}, err
	}
	if name := os.Getenv(idTokenFileEnv); name != "" {
		tok, err := readIDTokenFile(name)
		return credential{tok, "$" + idTokenFileEnv}, err
	}
	if _, err := os.Stat(defaultProjectedToken); err == nil {
		tok, err := readIDTokenFile(defaultProjectedToken)
		return credential{tok, defaultProjectedToken}, err
	}
	return credential{}, nil
}

func readIDTokenFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("identity token: %w", err)
	}
	defer f.Close()
	return readIDToken(f, name)
}

func readIDToken(r io.Reader, name string) (string, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxIDToken+1))
	if err != nil {
		return "", fmt.Errorf("identity token from %s: %w", name, err)
	}
	if len(data) > maxIDToken {
		return "", fmt.Errorf("identity token from %s is larger than %d KiB: not an identity token", name, maxIDToken>>10)
	}
	tok := strings.TrimSpace(string(data))
	return tok, checkIDToken(tok, name)
}

// checkIDToken accepts what looks like a compact JWS: three base64url
// segments. The server verifies it; this only catches a wrong file early.
func checkIDToken(tok, source string) error {
	if tok == "" {
		return fmt.Errorf("identity token from %s is empty", source)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || !strings.HasPrefix(tok, "eyJ") {
		return fmt.Errorf("identity token from %s is not a JWT (want three base64url parts separated by dots)", source)
	}
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("identity token from %s is not a JWT (a character outside base64url)", source)
			}
		}
	}
	return nil
}

// githubIDToken asks GitHub Actions' token endpoint for an identity token with
// the given audience, as actions/core's getIDToken does.
func githubIDToken(ctx context.Context, reqURL, reqToken, audience string) (string, error) {
	const what = "GitHub Actions identity token"
	if reqToken == "" {
		return "", fmt.Errorf("%s: $%s is set but $%s is not", what, actionsRequestURLEnv, actionsRequestTokenEnv)
	}
	u, err := url.Parse(reqURL)
	if err != nil {
		return "", fmt.Errorf("%s: $%s is not a URL", what, actionsRequestURLEnv)
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname())) {
		return "", fmt.Errorf("%s: $%s is not an https URL; the request token is not sent in clear text", what, actionsRequestURLEnv)
	}
	q := u.Query()
	q.Set("audience", audience)
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Authorization", "Bearer "+reqToken)
	req.Header.Set("Accept", "application/json")
	// A redirect to another scheme would carry the request token in clear.
	client := &http.Client{CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if r.URL.Scheme != u.Scheme || len(via) >= 5 {
			return fmt.Errorf("redirect to %s refused", r.URL.Scheme+"://"+r.URL.Host)
		}
		return nil
	}}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s: request to %s: %w", what, u.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s answered HTTP %d (the job needs `permissions: id-token: write`)", what, u.Host, resp.StatusCode)
	}
	var out struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Value == "" {
		return "", fmt.Errorf("%s: %s answered without a token (want JSON with a \"value\")", what, u.Host)
	}
	return out.Value, checkIDToken(out.Value, "GitHub Actions")
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

var errIDTokenAndStdin = errors.New("--id-token - and a card on standard input both read standard input: put one of them in a file")
