// Package awskmsfake is a test double of AWS KMS that speaks its wire
// protocol (JSON 1.1: POST /, X-Amz-Target: TrentService.OPERATION,
// Content-Type application/x-amz-json-1.1, errors as HTTP 4xx/5xx with
// {"__type": ..., "message": ...}) on a loopback TCP listener, so that the
// real aws-sdk-go-v2 KMS client, in this process or in a separate daemon
// process, can talk to it:
//
//	srv, err := awskmsfake.Start(awskmsfake.Options{})
//	defer srv.Close()
//	keyARN, err := srv.CreateKey("ECC_NIST_P256")
//	// point the client at srv.URL() with any static credentials, region us-east-1
//
// It implements Sign, GetPublicKey, DescribeKey, CreateKey, CreateAlias,
// UpdateAlias and DisableKey with real keys (crypto/ecdsa, crypto/rsa,
// crypto/ed25519) for the KeySpecs ECC_NIST_P256, ECC_NIST_P384,
// ECC_NIST_P521, RSA_2048, RSA_3072, RSA_4096 and ECC_NIST_EDWARDS25519,
// plus SYMMETRIC_DEFAULT keys (ENCRYPT_DECRYPT, no key material) to test
// refusals. Keys are named like real ones
// (arn:aws:kms:us-east-1:111122223333:key/UUID) and may be referred to by
// key ID, key ARN, alias/NAME or alias ARN where KMS allows it.
//
// Requests must carry a SigV4 Authorization header (AWS4-HMAC-SHA256 with
// Credential, SignedHeaders and Signature) and X-Amz-Date; the signature is
// not verified. Header values are never echoed in responses.
//
// Faults can be injected at any time: a latency before every answer
// (SetLatency), a fraction of requests throttled (SetThrottleRate), a
// request quota on Sign answered with ThrottlingException as AWS answers
// one (SetSignQuota, counted by Throttled), the next
// N requests failing with HTTP 503 KMSInternalException (SetUnavailable),
// and Sign and GetPublicKey answering with another key's ID
// (SetWrongKeyID). Disabled reports what DisableKey did, and Calls counts
// requests per operation.
package awskmsfake
