// Package vaultfake is an in-process HashiCorp Vault / OpenBao for tests:
// an HTTP server on a loopback port that answers the part of Vault's API a
// signing client uses, with real keys (crypto/ecdsa, crypto/rsa,
// crypto/ed25519, one fresh key per Transit key version), so the real
// client (github.com/openbao/openbao/api/v2) in this process, or a daemon in
// another one, can talk to it.
//
//	srv, err := vaultfake.Start(vaultfake.Options{})
//	defer srv.Close()
//	srv.CreateKey("cards", "ecdsa-p256")
//	srv.AddAppRole("role-id", "secret-id", time.Hour, "signer")
//	// point the client at srv.URL(); log in, or use srv.RootToken()
//
// It answers, under /v1/:
//
//   - Transit (mount Options.Mount, "transit"): keys/NAME (read, create),
//     keys/NAME/rotate, keys/NAME/trim, keys/NAME/config, and
//     sign/NAME[/HASH]: hash_algorithm, prehashed, signature_algorithm
//     (RSA; "pss" by default, as Vault), salt_length ("auto": as long as
//     the key allows, Go's rsa.PSSSaltLengthAuto, Vault's default; "hash":
//     as long as the digest; or a number), marshaling_algorithm ("asn1", or
//     "jws": ECDSA r||s, and base64url without padding for every type),
//     key_version. Ed25519 signs the input itself; hash_algorithm is
//     ignored for it (recent Vaults refuse sha2-512 there, which would
//     ask for Ed25519ph). The responses and the error messages are Vault's
//     (builtin/logical/transit, sdk/helper/keysutil): creating a key that
//     exists answers its description with a warning, an unknown key reads
//     as 404 {"errors":[]}, versions below min_encryption_version cannot
//     sign, trimming needs min_encryption_version and
//     min_decryption_version set at or above the new minimum.
//   - Token auth: every call but a login needs X-Vault-Token (or
//     Authorization: Bearer) naming a live token the fake issued, else 403
//     "permission denied". auth/token/lookup-self and auth/token/renew-self
//     answer as Vault does; renewals are capped by Options.TokenMaxTTL.
//   - AppRole (auth/approle/login: role_id, secret_id) and Kubernetes
//     (auth/kubernetes/login: role, jwt; the JWT is compared, not
//     reviewed) logins, which issue renewable tokens; the mounts' paths
//     are options.
//   - ACL policies (AddPolicy): exact paths and trailing-"*" prefixes, the
//     most specific rule wins, "deny" overrides, as in Vault. Every token
//     but the root one also has the "default" policy, which allows
//     lookup-self and renew-self, as Vault's does.
//   - A namespace (Options.Namespace): requests address it with
//     X-Vault-Namespace, a path prefix (/v1/NS/transit/...), or a header
//     naming a parent and the rest as a path prefix, as Vault joins them.
//     A request that does not is refused as Vault refuses it: a login is
//     404 "no handler for route" (the auth mount is not there); a call
//     with a token the fake issued is 403 (tokens belong to the namespace
//     they were made in); the root token, which belongs to the root
//     namespace, may look itself up, and gets 404 on Transit.
//
// Where the fake is stricter than Vault, to catch a client's mistake that
// Vault would let through: a prehashed input whose length is not the
// hash's is refused with 400 (Vault signs ECDSA with it, and fails RSA with
// 500), and prehashed=true on an Ed25519 key is refused with 400 (Vault
// signs the bytes as the message).
//
// Faults (Options) can be changed while it runs, with Update: a latency
// before every answer, a share of calls throttled with 429 and
// Retry-After, the next N calls answering 503 "Vault is sealed" or 500.
// They apply to Transit calls only unless Options.AuthFaults is set, so a
// test can fault signing without failing the login before it. Calls
// counts the calls per operation, faulted and refused ones included, so a
// test can tell its own retries from the API client's hidden ones.
package vaultfake
