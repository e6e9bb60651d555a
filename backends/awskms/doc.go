// Package awskms is the key backend for asymmetric AWS KMS keys, through
// github.com/aws/aws-sdk-go-v2/service/kms. Private keys never leave KMS;
// Create makes new ones there.
//
// The backend needs configuration (Region, endpoint, KeySpec, alias), so it
// is not registered from an init function; the daemon does
//
//	reg := backends.NewRegistry()
//	reg.Add(awskms.Scheme, awskms.Constructor, backends.Config{Settings: awskms.Config{Region: "eu-west-1", Alias: "alias/cardsign"}})
//	defer reg.Close()
//
// Credentials come from the standard AWS chain (environment, shared config
// and credentials files, SSO, web identity, ECS, IMDS) unless
// Config.AWSConfig supplies them. Config.Endpoint points the client at a
// VPC endpoint or a test fake (see package awskmsfake).
//
// # URIs
//
//	awskms:///1234abcd-12ab-34cd-56ef-1234567890ab                            key ID, in Config.Region
//	awskms:///arn:aws:kms:eu-west-1:111122223333:key/1234abcd-…               key ARN, in its own Region
//	awskms:///alias/cardsign                                                  alias, in Config.Region
//	awskms:///arn:aws:kms:eu-west-1:111122223333:alias/cardsign               alias ARN
//	awskms:///arn:aws:kms:eu-west-1:111122223333:key/1234abcd-…?alg=PS256     an RSA key signing PS256
//
// The authority is empty (three slashes). The only query parameter is alg;
// it must be an alg the key's KeySpec can sign, and only matters for RSA
// keys. Open resolves an alias to the key it names at that moment and signs
// with that key's ARN from then on; Disable refuses aliases.
//
// # Algorithms
//
//	KeySpec                          alg      KMS SigningAlgorithm        MessageType
//	ECC_NIST_P256                    ES256    ECDSA_SHA_256               DIGEST
//	ECC_NIST_P384                    ES384    ECDSA_SHA_384               DIGEST
//	ECC_NIST_P521                    ES512    ECDSA_SHA_512               DIGEST
//	RSA_2048, RSA_3072, RSA_4096     RS256    RSASSA_PKCS1_V1_5_SHA_256   DIGEST
//	  (with ?alg=PS256)              PS256    RSASSA_PSS_SHA_256          DIGEST
//	ECC_NIST_EDWARDS25519            EdDSA    ED25519_SHA_512             RAW
//
// EC and RSA keys sign the digest jose.Sign computed. Ed25519 signs the
// whole JWS signing input, which KMS accepts as a RAW message of at most
// MaxRawMessage (4096) bytes: a larger card fails with a
// *MessageTooLargeError before any request is made. Other KeySpecs
// (secp256k1, SM2, ML-DSA, HMAC, symmetric) and keys whose KeyUsage is not
// SIGN_VERIFY are refused with an *UnsupportedKeyError, keys not Enabled
// with a *KeyStateError, unknown keys with a *KeyNotFoundError.
//
// # Integrity
//
// Open checks that DescribeKey and GetPublicKey agree on the key and its
// KeySpec and that the public key fits the alg; the public key is read once,
// there. Every Sign response must name the key ARN asked for and the
// signing algorithm asked for, else the signature is discarded
// (*KeyIDMismatchError). jose.Sign verifies every signature with the public
// key before it is used.
//
// # Retries and rate limits
//
// The SDK's retryer is turned off (aws.NopRetryer): its client-wide retry
// token bucket fails requests with "retry quota exceeded" once a burst of
// throttling drains it. The backend retries instead, with exponential
// backoff and full jitter (25 ms doubling to 2 s), on ThrottlingException,
// LimitExceededException, KMSInternalException, DependencyTimeoutException,
// KeyUnavailableException, HTTP 429 and 5xx, and transport errors, for as
// long as the caller's deadline allows (30 s without one). A pause that
// would end past the deadline is not taken: the call fails at once with an
// *UnavailableError (errors.Is backends.ErrUnavailable and
// context.DeadlineExceeded). CreateKey is retried only after throttling,
// which KMS answers without acting.
//
// Each key has a token bucket of Config.RateLimit signatures per second
// (default 100, burst a tenth of that), shared by every handle of the key;
// every attempt, retries included, takes a token, and the wait honours the
// context. Stats exposes counters (attempts, throttles, retries, failures,
// signatures, per-request latency) for the daemon's metrics.
//
// # Permissions
//
// Open needs kms:DescribeKey and kms:GetPublicKey, signing kms:Sign, Create
// kms:CreateKey (and kms:UpdateAlias, kms:CreateAlias on the alias and both
// keys when Config.Alias is set), Disable kms:DisableKey.
package awskms
