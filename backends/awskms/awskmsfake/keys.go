package awskmsfake

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"strings"
	"time"
)

// Key specs and usages, as on the wire.
const (
	usageSign    = "SIGN_VERIFY"
	usageEncrypt = "ENCRYPT_DECRYPT"
	specSymmetic = "SYMMETRIC_DEFAULT"
)

// key is one KMS key of the fake.
type key struct {
	id, arn     string
	spec, usage string
	signer      crypto.Signer // nil for SYMMETRIC_DEFAULT
	pubDER      []byte        // SubjectPublicKeyInfo; nil for SYMMETRIC_DEFAULT
	enabled     bool
	created     time.Time
	description string
}

// KeyInfo describes a key of the fake, for tests.
type KeyInfo struct {
	KeyID, ARN        string
	KeySpec, KeyUsage string
	Description       string
	Enabled           bool
	PublicKey         crypto.PublicKey // nil for SYMMETRIC_DEFAULT keys
}

func (k *key) info() KeyInfo {
	ki := KeyInfo{KeyID: k.id, ARN: k.arn, KeySpec: k.spec, KeyUsage: k.usage, Description: k.description, Enabled: k.enabled}
	if k.signer != nil {
		ki.PublicKey = k.signer.Public()
	}
	return ki
}

// state is the KeyState of k (the fake has no pending states).
func (k *key) state() string {
	if k.enabled {
		return "Enabled"
	}
	return "Disabled"
}

// signingAlgorithms lists what KMS offers for a KeySpec.
func signingAlgorithms(spec string) []string {
	switch spec {
	case "ECC_NIST_P256":
		return []string{"ECDSA_SHA_256"}
	case "ECC_NIST_P384":
		return []string{"ECDSA_SHA_384"}
	case "ECC_NIST_P521":
		return []string{"ECDSA_SHA_512"}
	case "RSA_2048", "RSA_3072", "RSA_4096":
		return []string{
			"RSASSA_PSS_SHA_256", "RSASSA_PSS_SHA_384", "RSASSA_PSS_SHA_512",
			"RSASSA_PKCS1_V1_5_SHA_256", "RSASSA_PKCS1_V1_5_SHA_384", "RSASSA_PKCS1_V1_5_SHA_512",
		}
	case "ECC_NIST_EDWARDS25519":
		return []string{"ED25519_SHA_512", "ED25519_PH_SHA_512"}
	}
	return nil
}

// generate makes the key material of a KeySpec.
func generate(spec string) (crypto.Signer, error) {
	switch spec {
	case "ECC_NIST_P256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECC_NIST_P384":
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECC_NIST_P521":
		return ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "RSA_2048":
		return rsa.GenerateKey(rand.Reader, 2048)
	case "RSA_3072":
		return rsa.GenerateKey(rand.Reader, 3072)
	case "RSA_4096":
		return rsa.GenerateKey(rand.Reader, 4096)
	case "ECC_NIST_EDWARDS25519":
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, err
	}
	return nil, fmt.Errorf("unsupported KeySpec %q", spec)
}

// newKey makes a key as CreateKey does; usage "" picks KMS's default for
// the spec.
func (m *kms) newKey(spec, usage, description string) (*key, *apiError) {
	if spec == "" {
		spec = specSymmetic
	}
	if usage == "" {
		usage = usageEncrypt
		if signingAlgorithms(spec) != nil {
			// KMS defaults to ENCRYPT_DECRYPT and then refuses EC keys
			// without SIGN_VERIFY; a helper that guesses saves tests a line.
			usage = usageSign
		}
	}
	k := &key{spec: spec, usage: usage, enabled: true, created: time.Now(), description: description}
	switch {
	case spec == specSymmetic && usage == usageEncrypt:
	case signingAlgorithms(spec) != nil && usage == usageSign:
		signer, err := generate(spec)
		if err != nil {
			return nil, errorf("KMSInternalException", "key generation failed")
		}
		der, err := x509.MarshalPKIXPublicKey(signer.Public())
		if err != nil {
			return nil, errorf("KMSInternalException", "key generation failed")
		}
		k.signer, k.pubDER = signer, der
	case signingAlgorithms(spec) == nil && spec != specSymmetic:
		return nil, validation("1 validation error detected: Value '%s' at 'keySpec' failed to satisfy constraint: Member must satisfy enum value set (this fake supports ECC_NIST_P256, ECC_NIST_P384, ECC_NIST_P521, RSA_2048, RSA_3072, RSA_4096, ECC_NIST_EDWARDS25519, SYMMETRIC_DEFAULT)", spec)
	default:
		return nil, validation("KeyUsage %s is not compatible with KeySpec %s", usage, spec)
	}
	k.id = newUUID()
	k.arn = fmt.Sprintf("arn:aws:kms:%s:%s:key/%s", m.region, m.account, k.id)
	return k, nil
}

// resolve finds the key a KeyId parameter names: key ID, key ARN, and
// with allowAlias alias/NAME or an alias ARN. m.mu must be held.
func (m *kms) resolve(ref string, allowAlias bool) (*key, *apiError) {
	if ref == "" {
		return nil, validation("1 validation error detected: Value null at 'keyId' failed to satisfy constraint: Member must not be null")
	}
	id := ref
	if rest, ok := strings.CutPrefix(ref, "arn:"); ok {
		parts := strings.SplitN(rest, ":", 5) // partition, service, region, account, resource
		if len(parts) != 5 || parts[1] != "kms" {
			return nil, errorf("InvalidArnException", "Invalid arn %s", ref)
		}
		if parts[2] != m.region || parts[3] != m.account {
			return nil, notFound(ref)
		}
		id = parts[4]
		if kid, ok := strings.CutPrefix(id, "key/"); ok {
			id = kid
		} else if !strings.HasPrefix(id, "alias/") {
			return nil, errorf("InvalidArnException", "Invalid arn %s", ref)
		}
	}
	if strings.HasPrefix(id, "alias/") {
		if !allowAlias {
			return nil, notFound(ref)
		}
		target, ok := m.aliases[id]
		if !ok {
			return nil, errorf("NotFoundException", "Alias %s is not found.", m.aliasARN(id))
		}
		id = target
	}
	k, ok := m.keys[id]
	if !ok {
		return nil, notFound(ref)
	}
	return k, nil
}

func (m *kms) aliasARN(alias string) string {
	return fmt.Sprintf("arn:aws:kms:%s:%s:%s", m.region, m.account, alias)
}

// checkAliasName applies KMS's alias name rules.
func checkAliasName(alias string) *apiError {
	name, ok := strings.CutPrefix(alias, "alias/")
	if !ok || name == "" || len(alias) > 256 {
		return validation("Alias must start with the prefix \"alias/\". Please see https://docs.aws.amazon.com/kms/latest/developerguide/kms-alias.html")
	}
	if strings.HasPrefix(name, "aws/") {
		return errorf("NotAuthorizedException", "Cannot create alias with prefix 'alias/aws/'")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '/' || c == '_' || c == '-') {
			return errorf("InvalidAliasNameException", "Alias %s contains invalid characters", alias)
		}
	}
	return nil
}

// newUUID returns a random (version 4) UUID, as KMS key IDs are.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
