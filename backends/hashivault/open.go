//go:build !novault

package hashivault

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strconv"

	"github.com/openbao/openbao/api/v2"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// keyInfo is what Vault says of a Transit key.
type keyInfo struct {
	keyType      string
	latest       int
	minAvailable int
	signing      bool
	publics      map[string]any // version → {"public_key": …}
}

// Open reads the Transit key (GET MOUNT/keys/NAME), settles the version
// (the URI's, else the latest, pinned from then on: a rotation at Vault
// never changes what an opened key signs with), the JOSE alg from the key
// type and ?alg=, and the version's public key. Handle.KID is "": the
// registry uses the RFC 7638 thumbprint.
func (b *Backend) Open(ctx context.Context, uri string) (backends.Handle, error) {
	ref, err := parseURI(uri)
	if err != nil {
		return backends.Handle{}, err
	}
	if b.closed.Load() {
		return backends.Handle{}, &UnavailableError{Op: "open", Key: ref.name, Err: ErrClosed}
	}
	ki, err := b.readKey(ctx, ref.name)
	if err != nil {
		return backends.Handle{}, err
	}
	if !ki.signing {
		return backends.Handle{}, &UnsupportedKeyError{Key: ref.name, Reason: fmt.Sprintf("a %s key does not sign", ki.keyType)}
	}
	version := ref.version
	if version == 0 {
		version = ki.latest
	}
	sch, err := schemeFor(ki.keyType, ref.alg)
	if err != nil {
		return backends.Handle{}, &UnsupportedKeyError{Key: ref.name, Reason: err.Error()}
	}
	pub, err := ki.publicKey(ref.name, version)
	if err != nil {
		return backends.Handle{}, err
	}
	if err := jose.CheckKey(sch.alg, pub); err != nil {
		return backends.Handle{}, &UnsupportedKeyError{Key: ref.name, Reason: fmt.Sprintf("version %d's public key does not fit its type %s: %v", version, ki.keyType, err)}
	}
	s := &signer{b: b, name: ref.name, version: version, scheme: sch, pub: pub, limiter: b.limits.Key(ref.name)}
	b.log.Debug("hashivault: key opened", "key", ref.name, "version", version, "alg", sch.alg, "type", ki.keyType)
	return backends.Handle{Signer: s, Alg: sch.alg}, nil
}

// readKey reads a Transit key's description.
func (b *Backend) readKey(ctx context.Context, name string) (keyInfo, error) {
	path := b.cfg.Mount + "/keys/" + name
	var sec *api.Secret
	err := b.do(ctx, call{op: "read key", key: path, idempotent: true, authed: true}, func(ctx context.Context) error {
		var err error
		sec, err = b.client.Logical().ReadWithContext(ctx, path)
		return err
	})
	if err != nil {
		return keyInfo{}, b.fail("read key", path, err)
	}
	if sec == nil || sec.Data == nil {
		return keyInfo{}, &KeyNotFoundError{Key: name, Reason: fmt.Sprintf("no such key at mount %s", b.cfg.Mount)}
	}
	d := sec.Data
	ki := keyInfo{}
	ki.keyType, _ = d["type"].(string)
	ki.signing, _ = d["supports_signing"].(bool)
	ki.publics, _ = d["keys"].(map[string]any)
	ki.latest = toInt(d["latest_version"])
	ki.minAvailable = toInt(d["min_available_version"])
	if ki.keyType == "" || ki.latest < 1 || ki.publics == nil {
		return keyInfo{}, &UnsupportedKeyError{Key: name, Reason: "Vault's description of the key lacks its type, latest_version or keys"}
	}
	return ki, nil
}

// publicKey returns version's public key: PEM for ECDSA and RSA keys,
// base64 for Ed25519, as Transit gives them.
func (ki keyInfo) publicKey(name string, version int) (crypto.PublicKey, error) {
	if version > ki.latest {
		return nil, &KeyNotFoundError{Key: name, Version: version, Reason: fmt.Sprintf("the latest version is %d", ki.latest)}
	}
	if version < ki.minAvailable {
		return nil, &KeyNotFoundError{Key: name, Version: version, Reason: fmt.Sprintf("it was trimmed: the oldest version left is %d", ki.minAvailable)}
	}
	entry, _ := ki.publics[strconv.Itoa(version)].(map[string]any)
	text, _ := entry["public_key"].(string)
	if text == "" {
		return nil, &KeyNotFoundError{Key: name, Version: version, Reason: "Vault lists no public key for it"}
	}
	if ki.keyType == "ed25519" {
		raw, err := base64.StdEncoding.DecodeString(text)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			return nil, &UnsupportedKeyError{Key: name, Reason: fmt.Sprintf("version %d's Ed25519 public key is not 32 bytes of base64", version)}
		}
		return ed25519.PublicKey(raw), nil
	}
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil, &UnsupportedKeyError{Key: name, Reason: fmt.Sprintf("version %d's public key is not PEM", version)}
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, &UnsupportedKeyError{Key: name, Reason: fmt.Sprintf("version %d's public key: %v", version, err)}
	}
	return pub, nil
}

// toInt reads a JSON number as the API client decodes it (json.Number),
// or a float64; 0 when it is neither.
func toInt(v any) int {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			return 0
		}
		return int(i)
	case float64:
		return int(n)
	case int:
		return n
	}
	return 0
}
