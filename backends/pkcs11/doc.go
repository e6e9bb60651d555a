// Package pkcs11 is the key backend for PKCS#11 tokens: hardware HSMs,
// cloud HSMs with a PKCS#11 module, and SoftHSM2. Private keys never leave
// the token; Create generates them inside it.
//
// The backend needs configuration (module allow-list, PIN), so the daemon
// adds its constructor to its registry with that configuration:
//
//	reg := backends.NewRegistry()
//	reg.Add(pkcs11.Scheme, pkcs11.Constructor, backends.Config{Settings: pkcs11.Config{DefaultModule: "/usr/lib/softhsm/libsofthsm2.so", PIN: pin, Token: "cardsign"}})
//	defer reg.Close()
//
// # URIs (RFC 7512)
//
//	pkcs11:token=cardsign;object=signing-2025;id=%9A%1B...?module-path=/usr/lib/x/p11.so&pin-source=/run/secrets/pin
//
// token, serial or slot-id (and manufacturer, model, slot-*, library-*)
// select the token; exactly one initialized token must match. object
// (CKA_LABEL) and/or id (CKA_ID) select the private key; type may only be
// "private". module-path must be in Config.AllowedModules or be
// Config.DefaultModule, which is used when it is absent; module-name is
// refused. The PIN comes from pin-value, or the file pin-source (one
// trailing newline dropped), or Config.PIN. A pin-source file must be a
// regular file of at most 1 KiB inside one of Config.PINSourceDirs (after
// symbolic links are resolved); with none configured pin-source is refused.
// A process that trusts every URI it is given (a CLI run by the key's
// owner) can allow "/". Unknown path attributes are
// refused rather than ignored. PINs never appear in errors or logs; URIs in
// errors are redacted.
//
// # Algorithms
//
// ES256/ES384/ES512 (CKM_ECDSA, P-256/384/521), RS256 (CKM_RSA_PKCS with a
// DigestInfo), PS256 (CKM_RSA_PKCS_PSS, salt = hash length) and EdDSA
// (CKM_EDDSA, Ed25519). The alg is derived from the key object: the curve,
// or for RSA the CKA_ALLOWED_MECHANISMS that Create sets (PSS only means
// PS256; otherwise RS256).
//
// # Why miekg/pkcs11 and not crypto11
//
// Everything, ECDSA and RSA included, goes through github.com/miekg/pkcs11
// directly, with one C_Initialize per module owned by the Backend. crypto11
// (v1.5.0 here) keeps a process-global, reference-counted module table and
// calls C_Initialize/C_Finalize itself, failing on
// CKR_CRYPTOKI_ALREADY_INITIALIZED; Ed25519, which crypto11 lacks, needs a
// miekg handle on the same library anyway. Two owners of one library's
// initialization cannot recover correctly: re-configuring a crypto11
// Context after its token died closes the last reference and finalizes the
// library under the Ed25519 sessions, and re-configuring after those
// re-initialized fails. crypto11 also returns dead sessions to its pool and
// its Close waits on them. Driving the sessions here makes recovery one
// state machine (token.go) over one initialization. crypto11 remains the
// benchmark's in-process reference.
//
// # Sessions and recovery
//
// Each token has a pool of read-only sessions (Config.PoolSize, capped by
// the token's ulMaxSessionCount) plus an anchor session that holds the
// login. A dead-session error (CKR_SESSION_HANDLE_INVALID,
// CKR_SESSION_CLOSED, CKR_OBJECT_HANDLE_INVALID, CKR_KEY_HANDLE_INVALID,
// CKR_USER_NOT_LOGGED_IN, CKR_DEVICE_ERROR, CKR_DEVICE_REMOVED,
// CKR_TOKEN_NOT_PRESENT, CKR_CRYPTOKI_NOT_INITIALIZED) makes one goroutine
// re-initialize the token: wait for sessions in use, C_CloseAllSessions,
// find the token again by serial, open and log in; keys find their object
// handle again by CKA_ID on next use; the failed signature is retried once.
// If the token cannot be reached that way, the module is re-initialized
// (C_Finalize, C_Initialize): SoftHSM only sees a token directory that came
// back after that, and network HSM modules often need it to reconnect. It
// closes the sessions of every token of the module in this process (they
// recover the same way) and of any other user of the library in the process.
//
// Re-initializations are at most one per 500ms, and the pause doubles up to
// 10s while they fail. In between, signing fails at once with
// *UnavailableError (gRPC UNAVAILABLE) and Healthy reports it; Healthy also
// retries, so the token comes back without traffic and without a restart.
// A PIN refused during recovery is not retried (HSMs lock PINs after a few
// failures); the token stays unavailable until restart.
package pkcs11
