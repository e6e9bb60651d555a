package azurekvfake

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Resource is the audience Key Vault names in its challenge and the only
// one whose tokens the vault accepts. The challenge policy of azkeys asks
// the credential for Resource+"/.default", and ManagedIdentityCredential
// strips the "/.default" again before the token request.
const Resource = "https://vault.azure.net"

// TenantID is the tenant named in the challenge's authorization URL. The
// challenge policy passes it on as TokenRequestOptions.TenantID, which
// ManagedIdentityCredential ignores.
const TenantID = "00000000-0000-0000-0000-00000000f4ce"

// tokens are the access tokens the identity endpoint issued. They are
// opaque random strings: Key Vault clients never look inside a token.
type tokens struct {
	mu     sync.Mutex
	issued map[string]token
}

type token struct {
	resource string
	expires  time.Time
}

// issue makes a token for resource that lasts ttl, forgetting the tokens
// that have expired so a long test does not grow the map without end.
func (t *tokens) issue(resource string, ttl time.Duration) (string, time.Time) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	tok := "azurekvfake." + base64.RawURLEncoding.EncodeToString(b)
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.issued {
		if !now.Before(v.expires) {
			delete(t.issued, k)
		}
	}
	exp := now.Add(ttl)
	t.issued[tok] = token{resource: resource, expires: exp}
	return tok, exp
}

// refusal is why a data-plane request was not authorized.
type refusal int

const (
	authorized refusal = iota
	noToken
	unknownToken
	expiredToken
	wrongAudience
)

// check looks at the Authorization header of a data-plane request.
func (t *tokens) check(r *http.Request) refusal {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return noToken
	}
	t.mu.Lock()
	v, ok := t.issued[tok]
	t.mu.Unlock()
	switch {
	case !ok:
		return unknownToken
	case !time.Now().Before(v.expires):
		return expiredToken
	case strings.TrimSuffix(v.resource, "/") != Resource:
		return wrongAudience
	}
	return authorized
}

// challenge answers an unauthorized request with 401 and the challenge
// that tells the client what to do next.
//
// A request without a token, or with an expired one or one for another
// audience, gets Key Vault's own challenge, in the form the keyvault
// challenge policy parses (space-separated key="value" pairs, commas
// allowed): it asks the credential for a token of scope
// Resource+"/.default" and sends the request again, with its body.
//
// A token this server never issued gets a Continuous Access Evaluation
// claims challenge instead, as Key Vault sends for a revoked token. That
// is the only answer that makes the client get a new token at once:
// MSAL's managed-identity token cache is process-wide, so a client of
// this server can hold a still-valid token from an earlier fake in the
// same test binary, and a plain challenge would only hand it back. With
// claims, azcore asks again and MSAL bypasses its cache.
func challenge(w http.ResponseWriter, why refusal) {
	var msg string
	switch why {
	case noToken:
		msg = "AKV10000: Request is missing a Bearer or PoP token."
	case unknownToken:
		msg = "AKV10032: Invalid issuer. The token was not issued by this azurekvfake server."
	case expiredToken:
		msg = "The access token has expired."
	case wrongAudience:
		msg = fmt.Sprintf("AKV10022: Invalid audience. Expected %s.", Resource)
	}
	if why == unknownToken {
		claims := fmt.Sprintf(`{"access_token":{"nbf":{"essential":true,"value":"%d"}}}`, time.Now().Unix())
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(
			`Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", error="insufficient_claims", claims="%s"`,
			base64.StdEncoding.EncodeToString([]byte(claims))))
	} else {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(
			`Bearer authorization="https://login.microsoftonline.com/%s", resource="%s"`, TenantID, Resource))
	}
	writeError(w, &apiError{status: http.StatusUnauthorized, code: "Unauthorized", message: msg})
}
