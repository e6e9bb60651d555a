// Package backends is the contract between cardsign and the places keys live
// (files, PKCS#11 tokens, cloud KMS), and a registry of them by URI scheme.
//
// A backend turns a key URI such as "file:/etc/cardsign/k.pem" or
// "gcpkms://projects/…/cryptoKeyVersions/1" into a crypto.Signer, plus what
// it knows of the key's JOSE alg and kid. Everything JOSE-specific (digest or
// message, DER to r||s, PSS salt) lives once in package jose, above the
// backends, so a backend only has to sign what it is given.
//
// Backends register themselves from an init function and are linked in with
// a blank import, the database/sql pattern:
//
//	import _ "github.com/cardsign/cardsign/backends/file"
//
//	key, err := backends.Open(ctx, "file:/etc/cardsign/k.pem", backends.OpenOptions{})
package backends
