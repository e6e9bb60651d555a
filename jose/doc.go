// Package jose holds the JOSE details of cardsign in one place: the signature
// algorithms (RFC 7518, RFC 8037), how a crypto.Signer is driven for each of
// them (digest or whole message, DER to raw r||s, PSS salt length), how a
// signature is verified, and JSON Web Keys (RFC 7517) with their RFC 7638
// thumbprints.
//
// Backends only ever see a crypto.Signer; everything that makes a signature a
// JWS signature happens here, so a new backend cannot get it subtly wrong.
//
// The package is deliberately small and strict: it supports exactly the
// algorithms cardsign signs with, it never marshals private key members except
// through MarshalPrivateJWK (for key files), and Sign never returns a
// signature that it has not verified with the signer's public key.
package jose
