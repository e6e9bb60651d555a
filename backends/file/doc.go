// Package file is the key backend for private keys in local files, for the
// URI scheme "file". A program adds it to its registry:
//
//	reg.Add(file.Scheme, file.Constructor, backends.Config{})                                            // any file (the CLI)
//	reg.Add(file.Scheme, file.Constructor, backends.Config{Settings: file.Config{AllowedDirs: dirs}})  // only below dirs
//
// # URIs
//
//	file:relative/path/key.pem   relative to the working directory
//	file:/absolute/path/key.pem
//	file:///absolute/path/key.pem
//
// The path is taken literally (no percent-decoding); file URIs with a host
// are refused.
//
// # Formats
//
// One private key per file, unencrypted:
//
//   - PEM "PRIVATE KEY" (PKCS#8): EC P-256/P-384/P-521, RSA, Ed25519
//   - PEM "EC PRIVATE KEY" (SEC 1), optionally with an "EC PARAMETERS" block
//   - PEM "RSA PRIVATE KEY" (PKCS#1)
//   - a JSON private JWK (RFC 7517); its "alg" and "kid" members become the
//     key's alg and kid
//
// PEM carries no alg, so an RSA key in PEM signs RS256 unless told
// otherwise. That is why Create and Write store a PS256 key as a JWK with
// "alg":"PS256": the file alone then says how it signs.
//
// # Safety
//
// A key file whose mode grants any permission to group or others is refused
// (chmod 600 fixes it), as are encrypted keys, public-only material, files
// with more than one key, anything but a regular file (a FIFO is refused
// without blocking: files are opened O_NONBLOCK and checked with fstat
// before any read), and files over MaxFileSize. Error messages name the file
// and the problem, never its content: not key bytes, and not the PEM
// types, JSON values or member names it holds, unless they are known names
// (a PEM "CERTIFICATE", a JWK kty "oct").
//
// The zero Backend reads any file the process can, as the CLI, run by the
// key's owner, should. New(Config{AllowedDirs}) gives a Backend that
// refuses paths outside those directories after resolving symbolic links;
// the daemon vets imported key URIs with its CheckURI. An opened key's
// signer has a Healthy method that reports its file gone or replaced. New keys are written with O_EXCL and
// mode 0600 from the start, so an existing key is never overwritten and the
// key is never readable by others, not even for a moment.
package file
