// Package azurekv is the key backend for Azure Key Vault and Managed HSM:
// keys are key versions, and their private halves never leave the vault
// (software-protected, or HSM-protected with Config.HSM).
//
// It speaks to Key Vault through the Azure SDK for Go (azkeys, with
// credentials from azidentity: environment, workload identity, managed
// identity).
//
//	reg := backends.NewRegistry()
//	reg.Add(azurekv.Scheme, azurekv.Constructor, backends.Config{Settings: azurekv.Config{
//		Key: "azurekv://myvault.vault.azure.net/keys/cardsign"}})
//
// # URIs
//
//	azurekv://VAULT.vault.azure.net/keys/NAME/VERSION[?alg=PS256]
//
// The host is the vault's (or the Managed HSM's); it must be one of
// Config.AllowedHosts (Azure's Key Vault domains by default), checked
// before any request, so that a URI cannot make the backend send its
// access token to another host. A URI without a version opens the current
// version and pins it for as long as the key stays open; cardsignd imports
// only URIs with a version, and Create returns them.
//
// # Algorithms
//
// EC keys (EC or EC-HSM) on P-256, P-384 and P-521 sign ES256, ES384 and
// ES512; RSA keys RS256 or, with ?alg=PS256, PS256. Key Vault has no
// Ed25519. Key Vault signs a digest computed here and returns ECDSA
// signatures as raw r||s, which the signer returns as DER, as crypto.Signer
// promises (sigstore/sigstore#2354 is what happens otherwise). Every
// response must name the key version asked for.
//
// # Retries, rate limit and metrics
//
// As the other KMS backends (backends/internal/retry): the SDK's retries
// are off (MaxRetries -1); 429 is throttling, 503, 408 and other 5xx and
// broken connections are retried (CreateKey only after 429 and 503: it may
// otherwise have made a version); full jitter from 50ms to 2s within the
// caller's deadline (30s without one); a token bucket per key version
// (Config.RateLimit, default 100/s). The credential's failures are not
// retried here: azidentity retries its own endpoint.
//
// # Rotation and revocation
//
// Create adds a version to Config.Key (CreateKey, key_ops sign and verify)
// and returns its URI. Disable sets a version's enabled attribute to false,
// for on_revoke: disable; a disabled version refuses to sign (403, an error
// matching backends.ErrKeyDisabled).
package azurekv
