// Package backends is the contract between cardsign and the places keys live
// (files, PKCS#11 tokens, cloud KMS), and a registry of them by URI scheme.
//
// A backend turns a key URI such as "file:/etc/cardsign/k.pem" or
// "gcpkms://projects/…/cryptoKeyVersions/1" into a crypto.Signer, plus what
// it knows of the key's JOSE alg and kid. Everything JOSE-specific (digest or
// message, DER to r||s, PSS salt) lives once in package jose, above the
// backends, so a backend only has to sign what it is given.
//
// A Registry maps schemes to constructors, in the manner of smallstep's
// kms/apiv1: each backend package exports a Constructor, and the program
// (the daemon's wiring, the CLI, a test) owns a Registry value and adds the
// constructors it wants with their configuration. Nothing is global, so a
// restricted and an unrestricted file backend can live side by side. A
// backend that a build tag can leave out (CGO_ENABLED=0 or -tags nopkcs11,
// nogcpkms, noawskms) has a stub in its own package for such a build
// (no_pkcs11.go, as smallstep's kms/awskms/no_awskms.go), and binaries add
// it with AddBuilt, which adds Missing(scheme, …) in a build without it, so
// a key URI naming it says what the build lacks.
//
//	reg := backends.NewRegistry()
//	reg.Add(file.Scheme, file.Constructor, backends.Config{})
//	key, err := reg.Open(ctx, "file:/etc/cardsign/k.pem", backends.OpenOptions{})
package backends
