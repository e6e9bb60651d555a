package file

import (
	"bytes"
	"crypto"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/pemkey"
	"github.com/cardsign/cardsign/strictjson"
)

// parseKey turns the bytes of a key file into a Handle. Every error names the
// file and what is wrong with it, never the bytes.
func parseKey(path string, data []byte) (backends.Handle, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return backends.Handle{}, fmt.Errorf("file: key file %s is empty", path)
	}
	if trimmed[0] == '{' {
		return parseJWK(path, trimmed)
	}
	s, err := parsePEM(path, data)
	if err != nil {
		return backends.Handle{}, err
	}
	return backends.Handle{Signer: s}, nil
}

func parseJWK(path string, data []byte) (backends.Handle, error) {
	priv, err := jose.PrivateMembers(data)
	if err != nil {
		// The strict parser's messages quote member names, bytes and numbers
		// of the file: say which rule and where instead.
		var je *strictjson.Error
		if errors.As(err, &je) {
			at := ""
			if je.Offset >= 0 {
				at = fmt.Sprintf(" at byte %d", je.Offset)
			}
			return backends.Handle{}, fmt.Errorf("file: key file %s is not valid JSON (rule %s%s); want a PEM private key or one private JWK object", path, je.Rule, at)
		}
		return backends.Handle{}, fmt.Errorf("file: key file %s: not a private JWK: %s", path, withoutContent(err))
	}
	if len(priv) == 0 {
		return backends.Handle{}, fmt.Errorf("file: key file %s holds a public JWK only; a private key is needed", path)
	}
	s, pub, err := jose.ParsePrivateJWK(data)
	if err != nil {
		return backends.Handle{}, fmt.Errorf("file: key file %s: not a usable private JWK: %s", path, withoutContent(err))
	}
	// ParsePrivateJWK has checked that "alg" is supported and fits the key.
	return backends.Handle{Signer: s, Alg: jose.Alg(pub.Alg), KID: pub.Kid}, nil
}

// parsePEM reads exactly one unencrypted private key block. Text before the
// first block is tolerated (openssl writes "Bag Attributes" there); a second
// key block, or anything but whitespace after the last block, is refused:
// which of two keys signs should never be a guess.
func parsePEM(path string, data []byte) (crypto.Signer, error) {
	var (
		key  *pem.Block
		rest = data
	)
	for {
		b, r := pem.Decode(rest)
		if b == nil {
			break
		}
		rest = r
		if b.Type == "EC PARAMETERS" { // openssl ecparam -genkey writes it; SEC 1 keys name their curve anyway
			continue
		}
		if key != nil {
			return nil, fmt.Errorf("file: key file %s has more than one PEM block (types: %s, then %s); keep exactly one private key per file", path, pemType(key.Type), pemType(b.Type))
		}
		key = b
	}
	if key == nil {
		return nil, fmt.Errorf("file: key file %s holds neither a PEM private key nor a JSON private JWK", path)
	}
	defer clear(key.Bytes)
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("file: key file %s has unexpected data after its PEM block", path)
	}
	if key.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(key.Headers["Proc-Type"], "ENCRYPTED") {
		return nil, fmt.Errorf("file: key file %s is encrypted; this backend reads unencrypted keys only (protect the file with mode 0600, or use a PKCS#11 or KMS backend)", path)
	}
	switch key.Type {
	case "PUBLIC KEY", "RSA PUBLIC KEY", "EC PUBLIC KEY", "CERTIFICATE":
		return nil, fmt.Errorf("file: key file %s holds public-only material (PEM %q); a private key is needed", path, key.Type)
	}
	if !pemkey.Supported(key.Type) {
		return nil, fmt.Errorf("file: key file %s has an unsupported PEM block type: %s; want PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY", path, pemType(key.Type))
	}
	s, err := pemkey.Parse(key.Type, key.Bytes)
	var cannotSign *pemkey.CannotSignError
	switch {
	case errors.As(err, &cannotSign):
		return nil, fmt.Errorf("file: key file %s holds a %T, which cannot sign JWS", path, cannotSign.Key)
	case err != nil:
		// x509's errors can quote what they found (an algorithm OID):
		// name the format expected and, when the bytes are a key of
		// another format, that format, but nothing of the bytes.
		hint := ""
		if other := pemkey.FormatOf(key.Bytes, key.Type); other != "" {
			hint = fmt.Sprintf(" (its bytes are a %q key: fix the label)", other)
		}
		return nil, fmt.Errorf("file: key file %s: the PEM %q block is not a valid key in that format%s", path, key.Type, hint)
	}
	return s, nil
}

// A key file may be any file the daemon can read, named by a caller who
// cannot read it: messages about its content use a fixed vocabulary only,
// and quote a name the file holds only when it is in that vocabulary.

// knownPEMTypes are PEM labels (RFC 7468 and common OpenSSL/OpenSSH ones)
// that may be quoted in messages.
var knownPEMTypes = []string{
	"PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY", "EC PARAMETERS", "ENCRYPTED PRIVATE KEY",
	"PUBLIC KEY", "RSA PUBLIC KEY", "EC PUBLIC KEY", "CERTIFICATE", "TRUSTED CERTIFICATE",
	"CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST", "X509 CRL", "DSA PRIVATE KEY",
	"OPENSSH PRIVATE KEY", "SSH2 ENCRYPTED PRIVATE KEY", "PGP PRIVATE KEY BLOCK", "PGP PUBLIC KEY BLOCK",
	"DH PARAMETERS", "X9.42 DH PARAMETERS", "PKCS7", "CMS", "ATTRIBUTE CERTIFICATE",
}

// pemType quotes a PEM label when it is a known one.
func pemType(t string) string {
	if slices.Contains(knownPEMTypes, t) {
		return fmt.Sprintf("%q", t)
	}
	return "an unknown one (not shown)"
}

// joseVocabulary is what jose errors may quote from a JWK without revealing
// anything: member names and the registered values of kty, crv and alg.
var joseVocabulary = []string{
	"kty", "crv", "x", "y", "d", "n", "e", "p", "q", "dp", "dq", "qi", "oth", "k", "kid", "alg", "use", "key_ops", "x5c", "x5t", "x5u",
	"EC", "OKP", "RSA", "oct",
	"P-256", "P-384", "P-521", "Ed25519", "Ed448", "X25519", "X448", "secp256k1",
	"ES256", "ES384", "ES512", "ES256K", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA",
	"HS256", "HS384", "HS512", "none", "sig", "enc",
}

// quoted matches what %q and encoding/json put in quotes.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)

// withoutContent is err's message with every quoted string that is not in
// joseVocabulary replaced: jose reports unsupported values and duplicate
// member names by quoting them, which for a file the caller cannot read
// would hand its content back.
func withoutContent(err error) string {
	msg := strings.ReplaceAll(err.Error(), "jose: ", "")
	return quoted.ReplaceAllStringFunc(msg, func(q string) string {
		if slices.Contains(joseVocabulary, q[1:len(q)-1]) {
			return q
		}
		return "(value not shown)"
	})
}
