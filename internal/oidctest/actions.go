package oidctest

import (
	"crypto/subtle"
	"maps"
	"net/http"
	"strings"
)

// The environment variables a GitHub Actions job with "permissions:
// id-token: write" gets, and that clients read to ask for an ID token.
const (
	EnvActionsRequestURL   = "ACTIONS_ID_TOKEN_REQUEST_URL"
	EnvActionsRequestToken = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
)

// ActionsTokenURL is the stand-in for ACTIONS_ID_TOKEN_REQUEST_URL. Like
// GitHub's, it already carries a query, so clients append "&audience=X".
func (is *Issuer) ActionsTokenURL() string {
	return is.URL + ActionsTokenPath + "?api-version=2.0"
}

// ActionsRequestToken is the stand-in for ACTIONS_ID_TOKEN_REQUEST_TOKEN.
func (is *Issuer) ActionsRequestToken() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.actionsToken
}

// ActionsEnv returns both variables, for t.Setenv or a child process.
func (is *Issuer) ActionsEnv() map[string]string {
	return map[string]string{
		EnvActionsRequestURL:   is.ActionsTokenURL(),
		EnvActionsRequestToken: is.ActionsRequestToken(),
	}
}

// SetActionsClaims replaces the claims the Actions endpoint mints (default
// GitHubClaims); aud is always the request's audience.
func (is *Issuer) SetActionsClaims(claims map[string]any) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.actionsBase = maps.Clone(claims)
}

// ActionsRequests counts requests to the Actions endpoint.
func (is *Issuer) ActionsRequests() int64 { return is.actionsRequests.Load() }

// serveActionsToken answers like GitHub's ID-token endpoint: with the right
// "Authorization: bearer TOKEN" it returns {"value": JWT}, aud being the
// audience parameter or, without one, the repository owner's URL as GitHub
// defaults it; a missing or wrong request token gets 401.
func (is *Issuer) serveActionsToken(w http.ResponseWriter, r *http.Request) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	want := is.ActionsRequestToken()
	if !ok || !strings.EqualFold(scheme, "bearer") || subtle.ConstantTimeCompare([]byte(token), []byte(want)) != 1 {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	is.mu.Lock()
	claims := maps.Clone(is.actionsBase)
	is.mu.Unlock()
	if claims == nil {
		claims = GitHubClaims("")
	}
	aud := r.URL.Query().Get("audience")
	if aud == "" {
		owner, _ := claims["repository_owner"].(string)
		aud = "https://github.com/" + owner
	}
	claims["aud"] = aud
	writeJSON(w, map[string]any{"count": 1, "value": is.Mint(claims)})
}
