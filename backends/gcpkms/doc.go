// Package gcpkms is the key backend for Google Cloud KMS: keys are
// CryptoKeyVersions of ASYMMETRIC_SIGN CryptoKeys, and their private halves
// never leave Cloud KMS (software or HSM protection alike).
//
// The backend needs configuration and a client connection, so the daemon
// adds its constructor to its registry with that configuration:
//
//	reg := backends.NewRegistry()
//	reg.Add(gcpkms.Scheme, gcpkms.Constructor, backends.Config{Settings: gcpkms.Config{CryptoKey: "projects/p/locations/europe-west1/keyRings/cardsign/cryptoKeys/signing"}})
//	defer reg.Close()
//
// Credentials come from Config.ClientOptions, else the standard chain
// (GOOGLE_APPLICATION_CREDENTIALS, the metadata server, gcloud's ADC).
// Config.Endpoint overrides the address (Private Service Connect, or a test
// fake such as package gcpkmsfake with Config.Insecure).
//
// # URIs
//
//	gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K/cryptoKeyVersions/N
//
// The path is the version's resource name; nothing else (no query) is
// accepted.
//
// # Algorithms
//
// The JOSE alg comes from the version's algorithm: EC_SIGN_P256_SHA256 is
// ES256, EC_SIGN_P384_SHA384 ES384, RSA_SIGN_PKCS1_{2048,3072,4096}_SHA256
// RS256, RSA_SIGN_PSS_{2048,3072,4096}_SHA256 PS256 (salt = digest length)
// and EC_SIGN_ED25519 EdDSA. Others (secp256k1, SHA-512 RSA, post-quantum)
// are refused with *UnsupportedAlgorithmError. Cloud KMS has no P-521, so
// no ES512. EC and RSA versions sign a digest computed locally; Ed25519 signs
// the message itself (Cloud KMS's pure EdDSA), sent as data.
//
// # Integrity
//
// Requests carry digest_crc32c or data_crc32c. Responses are checked:
// verified_digest_crc32c / verified_data_crc32c must be true, the signature
// must match signature_crc32c, and the response must name the key version
// asked for; public keys are checked against pem_crc32c and their name. A
// failure is an *IntegrityError; a response damaged in transit is retried
// once, a wrong name never. jose.Sign, above the backend, also verifies
// every signature with the stored public key.
//
// # Retries, rate limit and metrics
//
// The backend owns retrying; the client library's retry settings are
// cleared. RESOURCE_EXHAUSTED, UNAVAILABLE and DEADLINE_EXCEEDED (of one
// attempt, bounded by Config.AttemptTimeout) are retried with exponential
// backoff and full jitter (50ms doubling to 2s), within the caller's
// deadline: when the next wait would pass it, the backend gives up at once
// with an *UnavailableError, which matches backends.ErrUnavailable. A
// context without a deadline is given 30s. A token bucket per key version
// (Config.RateLimit, default 100/s) paces every attempt, and its wait honours
// the deadline too. Stats counts attempts, throttling, retries, failures and
// attempt latency for /metrics.
//
// # Rotation and revocation
//
// Create adds a version to Config.CryptoKey, whose version template must
// make the requested alg (*AlgorithmMismatchError otherwise), and waits until
// it is ENABLED. Disable sets a version to DISABLED, for on_revoke: disable.
// Public keys are read once at Open and kept; Cloud KMS stops serving the
// public key of a disabled version, which is why cardsign stores JWKs
// itself.
package gcpkms
