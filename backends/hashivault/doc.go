// Package hashivault is the key backend for the Transit secrets engine of
// HashiCorp Vault and OpenBao: keys are versions of Transit keys, and their
// private halves never leave Vault (exportable is false on every key the
// backend creates).
//
// It speaks to Vault through OpenBao's API client
// (github.com/openbao/openbao/api/v2), which talks to HashiCorp Vault as
// well: the Transit and auth endpoints it uses are the same.
//
//	reg := backends.NewRegistry()
//	reg.Add(hashivault.Scheme, hashivault.Constructor, backends.Config{Settings: hashivault.Config{
//		Address: "https://vault.example:8200", Key: "cardsign",
//		Auth: hashivault.Auth{Method: hashivault.AuthAppRole, RoleID: roleID, SecretID: secretID}}})
//
// # URIs
//
//	hashivault://KEY/VERSION[?alg=PS256]
//
// cosign's scheme name, so users recognise it. The address, namespace and
// mount come from the configuration, never from the URI, so a URI cannot
// send the backend's token elsewhere. A URI without a version opens the
// latest version and pins it for as long as the key stays open; cardsignd
// imports only URIs with a version, and Create returns them: Transit's
// rotation moves "latest", and a signature must be made with the version
// whose public key was published (cosign#1351).
//
// # Algorithms
//
// ecdsa-p256, -p384 and -p521 keys sign ES256, ES384 and ES512; rsa-2048,
// -3072 and -4096 keys RS256 (pkcs1v15) or, with ?alg=PS256, PS256 (pss,
// salt_length "hash", as RFC 7518 wants); ed25519 keys EdDSA. ECDSA and RSA
// sign a digest computed here (prehashed=true), so the message never
// leaves the process; Ed25519 has no prehashed form and sends the JWS
// signing input. ECDSA asks for marshaling_algorithm=jws, which returns
// r||s (Vault PR #6077); the signer returns DER, as crypto.Signer promises.
// Every signature must carry the version asked for ("vault:vN:").
//
// # Authentication
//
// Token (a file, or BAO_TOKEN / VAULT_TOKEN), AppRole (role ID and secret
// ID) or Kubernetes (a role and the pod's service account token, read at
// every login). The backend logs in at its first call, renews a renewable
// token at two thirds of its lease, and logs in again when renewal is
// refused, the max TTL nears, or Vault refuses the token (a 403 whose token
// lookup-self also fails; a 403 to a token Vault still honours is the
// policy's answer, returned as a *DeniedError without a login).
// Namespaces (Vault Enterprise, OpenBao) apply to Transit and the logins.
//
// # Retries, rate limit and metrics
//
// As the other KMS backends (backends/internal/retry): the client's own
// retries are off; 429 is throttling, 503 (sealed, standby) and 412 are
// retried, as are 5xx and broken connections for requests that can be
// repeated (not a rotation); full jitter from 50ms to 2s within the
// caller's deadline (30s without one); a token bucket per key
// (Config.RateLimit, default 100/s).
//
// # Rotation and revocation
//
// Create rotates Config.Key (creating it, of the type the alg needs, the
// first time) and returns the new version's URI. Transit cannot disable a
// single version, so the backend is not a backends.Disabler:
// on_revoke: disable logs that it cannot, and a revoked version stays
// usable at Vault until an operator trims the key (min_available_version).
package hashivault
