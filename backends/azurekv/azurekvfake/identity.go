package azurekvfake

import (
	"crypto/subtle"
	"net/http"
	"strconv"
)

// identityPath is where the token endpoint listens; App Service's own is
// http://127.0.0.1:PORT/msi/token too.
const identityPath = "/msi/token"

// appServiceAPIVersion is the only version of the App Service identity
// protocol MSAL speaks (the 2017-09-01 one used a "secret" header).
const appServiceAPIVersion = "2019-08-01"

// identity is the App Service managed-identity token endpoint: MSAL Go
// (under azidentity.ManagedIdentityCredential) picks it when both
// IDENTITY_ENDPOINT and IDENTITY_HEADER are set, and sends
//
//	GET IDENTITY_ENDPOINT?api-version=2019-08-01&resource=RESOURCE[&client_id=…|&mi_res_id=…|&object_id=…]
//	X-IDENTITY-HEADER: IDENTITY_HEADER
//
// MSAL reads both variables when it asks for a token, not when the
// credential is made. It is served over plain HTTP as App Service serves
// it: MSAL takes the URL as given, and the credential's pipeline has no
// bearer-token policy to insist on HTTPS.
type identity struct {
	header string // the secret X-IDENTITY-HEADER
	tokens *tokens
	faults *faults
}

// tokenResponse is App Service's answer. expires_on is a string of Unix
// seconds, which is what MSAL parses first.
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	ExpiresOn   string `json:"expires_on"`
	Resource    string `json:"resource"`
	TokenType   string `json:"token_type"`
	ClientID    string `json:"client_id"`
}

// systemClientID stands for the client ID of the system-assigned identity.
const systemClientID = "00000000-0000-0000-0000-0000000051d0"

// identityError is App Service's error shape.
type identityError struct {
	StatusCode int    `json:"statusCode"`
	Message    string `json:"message"`
}

func (id *identity) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		writeJSON(w, status, identityError{StatusCode: status, Message: msg})
	}
	if r.URL.Path != identityPath && r.URL.Path != identityPath+"/" {
		fail(http.StatusNotFound, "azurekvfake: the token endpoint is "+identityPath)
		return
	}
	if r.Method != http.MethodGet {
		fail(http.StatusMethodNotAllowed, "azurekvfake: the token endpoint takes GET")
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-IDENTITY-HEADER")), []byte(id.header)) != 1 {
		fail(http.StatusUnauthorized, "Unauthorized: the X-IDENTITY-HEADER header is missing or wrong.")
		return
	}
	q := r.URL.Query()
	if v := q.Get("api-version"); v != appServiceAPIVersion {
		fail(http.StatusBadRequest, "api-version "+strconv.Quote(v)+" is not supported; use "+appServiceAPIVersion+".")
		return
	}
	resource := q.Get("resource")
	if resource == "" {
		fail(http.StatusBadRequest, "The resource query parameter is missing.")
		return
	}
	clientID := q.Get("client_id")
	if clientID == "" {
		// The system-assigned identity, or a user-assigned one named by
		// mi_res_id or object_id: the fake grants any identity a token.
		clientID = systemClientID
	}
	o := id.faults.count("Token")
	tok, exp := id.tokens.issue(resource, o.tokenTTL())
	writeJSON(w, http.StatusOK, tokenResponse{
		AccessToken: tok,
		ExpiresOn:   strconv.FormatInt(exp.Unix(), 10),
		Resource:    resource,
		TokenType:   "Bearer",
		ClientID:    clientID,
	})
}
