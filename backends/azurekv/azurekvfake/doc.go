// Package azurekvfake is an in-process Azure Key Vault for tests: the keys
// data plane over HTTPS, with real keys (crypto/ecdsa, crypto/rsa, one
// fresh key per version), and an App Service managed-identity token
// endpoint over HTTP, each on a loopback port, so the real azkeys client
// with an azidentity.ManagedIdentityCredential, in this process or in a
// daemon, can talk to it.
//
//	srv, err := azurekvfake.Start(azurekvfake.Options{})
//	defer srv.Close()
//	t.Setenv("IDENTITY_ENDPOINT", srv.IdentityEndpoint())
//	t.Setenv("IDENTITY_HEADER", srv.IdentityHeader())
//	cred, err := azidentity.NewManagedIdentityCredential(nil)
//	client, err := azkeys.NewClient(srv.URL(), cred, &azkeys.ClientOptions{
//		ClientOptions:                        azcore.ClientOptions{Transport: srv.HTTPClient()},
//		DisableChallengeResourceVerification: true,
//	})
//
// MSAL picks App Service when IDENTITY_ENDPOINT and IDENTITY_HEADER are
// both set (and IDENTITY_SERVER_THUMBPRINT is not), and reads them again
// for every token request, so they must stay set while the client runs.
// DisableChallengeResourceVerification is needed because the challenge
// names https://vault.azure.net and the policy wants the vault's host to
// end in ".vault.azure.net"; 127.0.0.1:PORT never does.
//
// Authentication is Key Vault's challenge protocol. A call without a
// bearer token gets 401 with
//
//	WWW-Authenticate: Bearer authorization="https://login.microsoftonline.com/TenantID", resource="https://vault.azure.net"
//
// and azkeys then asks the credential for https://vault.azure.net/.default
// and sends the call again. Tokens come from the token endpoint only, for
// the resource https://vault.azure.net, and last Options.TokenTTL (an
// hour by default); an expired token or one for another resource gets
// the same challenge. A token this server did not issue gets a CAE claims
// challenge (error="insufficient_claims"), which makes azcore fetch a new
// token past MSAL's token cache: that cache is process-wide, so a client
// may otherwise keep a token from an earlier fake in the same test binary.
//
// It answers CreateKey (POST /keys/NAME/create: kty EC, EC-HSM, RSA,
// RSA-HSM; crv P-256, P-384, P-521; key_size 2048, 3072, 4096; key_ops;
// attributes.enabled; each call a new version, 32 hex digits), GetKey and
// UpdateKey (GET and PATCH /keys/NAME/VERSION, an empty or missing
// version meaning the latest; UpdateKey changes enabled, key_ops and
// tags) and Sign (POST /keys/NAME/VERSION/sign with ES256, ES384, ES512,
// RS256, RS384, RS512, PS256, PS384, PS512; azkeys folds an empty version
// into POST /keys/NAME/sign, which signs with the latest). Every call needs an
// api-version (400 BadParameter without one); any well-formed one is
// accepted. It behaves as Key Vault does where a client depends on it:
// the value signed is the digest, whose length must fit the algorithm; the
// algorithm must fit the key (ES256 only on P-256, and so on); ECDSA
// signatures are raw r ‖ s, not ASN.1; RSA-PSS salts are as long as the
// digest; key material is base64url without padding; names are
// case-insensitive. Errors have Key Vault's shape,
// {"error":{"code":…,"message":…,"innererror":{"code":…}}}, and azcore
// reports the outer code as ResponseError.ErrorCode:
//
//	unknown key or version                404 KeyNotFound
//	Sign with a disabled version          403 Forbidden (innererror KeyDisabled)
//	Sign with "sign" not in key_ops       403 Forbidden (innererror KeyOperationForbidden)
//	bad algorithm, digest, body, name     400 BadParameter
//	no, expired or foreign token          401 Unauthorized, with a challenge
//
// The disabled answer is the one Key Vault gives ("Operation sign is not
// allowed on a disabled key.", 403, code Forbidden, inner code
// KeyDisabled); a disabled key can still be read with GetKey, as in Key
// Vault. P-256K keys, symmetric keys and other operations are not
// implemented.
//
// Faults (Options) can be changed while it runs, with Update: a latency
// before every data-plane answer, a share of calls throttled (429,
// Throttled, Retry-After: 1 or Options.RetryAfter), and the next N calls
// failing with 503 ServiceUnavailable or 500 InternalServerError. Faults
// hit authenticated calls only, so the unauthenticated first call of each
// client, which only elicits the challenge, never uses one up. Calls
// counts the calls per operation, faulted ones included, so a test can
// tell its own retries from hidden ones.
package azurekvfake
