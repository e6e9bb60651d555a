// Package gcpkmsfake is an in-process Cloud KMS for tests: a
// kmspb.KeyManagementServiceServer with real keys (crypto/ecdsa, crypto/rsa,
// crypto/ed25519, one fresh key per CryptoKeyVersion), served over plaintext
// gRPC on a loopback TCP port, so the real cloud.google.com/go/kms client in
// this process, or a daemon in another one, can talk to it.
//
//	srv, err := gcpkmsfake.Start(gcpkmsfake.Options{Latency: 20 * time.Millisecond})
//	defer srv.Close()
//	version, err := srv.AddKey("projects/p/locations/global/keyRings/r/cryptoKeys/k", kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
//	// point the backend at srv.Addr() with Insecure set
//
// It answers the calls the gcpkms backend makes: GetCryptoKey,
// GetCryptoKeyVersion, GetPublicKey, AsymmetricSign, CreateCryptoKeyVersion
// and UpdateCryptoKeyVersion (state only). It behaves as Cloud KMS does where
// the backend depends on it: PEM public keys with pem_crc32c; request
// checksums verified (a mismatch is INVALID_ARGUMENT) and acknowledged with
// verified_digest_crc32c / verified_data_crc32c; signature_crc32c and the
// key version name in every signature response; ECDSA signatures in ASN.1
// DER; RSA-PSS with a salt as long as the digest; Ed25519 signing the data,
// never a digest; disabled or destroyed versions refusing to sign or to give
// their public key (FAILED_PRECONDITION); key rings created implicitly.
//
// Faults (Options) can be changed while it runs, with Update: a latency
// before every answer, a share of calls throttled with RESOURCE_EXHAUSTED,
// the next N calls failing with UNAVAILABLE, and corrupted integrity fields.
// Calls counts the calls per method, faulted ones included, so a test can
// tell its own retries from hidden ones.
package gcpkmsfake
