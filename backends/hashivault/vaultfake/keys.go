package vaultfake

import (
	"crypto"
	"strconv"
	"sync"
	"time"
)

// keyStore holds the Transit keys by name. Key material is immutable once
// made; the version bounds and flags change under mu.
type keyStore struct {
	mu   sync.Mutex
	keys map[string]*transitKey
}

// transitKey is one key ring, with Vault's version bounds: versions below
// minAvailable are gone (trimmed), minEncryption (0: none) is the oldest
// that may sign, minDecryption the oldest that may verify.
type transitKey struct {
	name                 string
	typ                  keyType
	versions             map[int]*keyVersion
	latest               int
	minAvailable         int
	minDecryption        int
	minEncryption        int
	deletionAllowed      bool
	exportable           bool
	allowPlaintextBackup bool
}

type keyVersion struct {
	signer  crypto.Signer // nil for a symmetric type
	public  string        // as formatPublic renders it; "" when signer is nil
	created time.Time
}

func newKeyStore() *keyStore { return &keyStore{keys: map[string]*transitKey{}} }

func newVersion(kt keyType) (*keyVersion, error) {
	signer, err := kt.generate()
	if err != nil {
		return nil, err
	}
	v := &keyVersion{signer: signer, created: time.Now()}
	if signer != nil {
		if v.public, err = formatPublic(signer.Public()); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (ks *keyStore) exists(name string) bool {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	_, ok := ks.keys[name]
	return ok
}

// create makes key name with version 1 and returns its description, and
// whether it made it: creating a key that exists changes nothing, as in
// Vault.
func (ks *keyStore) create(name string, kt keyType, exportable, backup bool) (map[string]any, bool, error) {
	if d, ok := ks.describe(name); ok {
		return d, false, nil
	}
	v, err := newVersion(kt)
	if err != nil {
		return nil, false, err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if k, ok := ks.keys[name]; ok { // made while this one was generated
		return k.describeLocked(), false, nil
	}
	k := &transitKey{
		name: name, typ: kt, versions: map[int]*keyVersion{1: v}, latest: 1,
		minDecryption: 1, exportable: exportable, allowPlaintextBackup: backup,
	}
	ks.keys[name] = k
	return k.describeLocked(), true, nil
}

// rotate adds a version to key name and returns its description.
func (ks *keyStore) rotate(name string) (map[string]any, int, error) {
	ks.mu.Lock()
	k, ok := ks.keys[name]
	ks.mu.Unlock()
	if !ok {
		return nil, 0, userError("key not found")
	}
	v, err := newVersion(k.typ)
	if err != nil {
		return nil, 0, err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k.latest++
	k.versions[k.latest] = v
	return k.describeLocked(), k.latest, nil
}

// describe returns key name's description, as keys/NAME reads.
func (ks *keyStore) describe(name string) (map[string]any, bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k, ok := ks.keys[name]
	if !ok {
		return nil, false
	}
	return k.describeLocked(), true
}

// signingVersion returns the version of key name that signs a request for
// version ver (0: the latest), with Vault's checks and words.
func (ks *keyStore) signingVersion(name string, ver int) (keyType, *keyVersion, int, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k, ok := ks.keys[name]
	if !ok {
		return keyType{}, nil, 0, userError("signing key not found")
	}
	if !k.typ.signing() {
		return keyType{}, nil, 0, userError("key type %s does not support signing", k.typ.name)
	}
	switch {
	case ver == 0:
		ver = k.latest
	case ver < 0:
		return keyType{}, nil, 0, userError("requested version for signing is negative")
	case ver > k.latest:
		return keyType{}, nil, 0, userError("requested version for signing is higher than the latest key version")
	case k.minEncryption > 0 && ver < k.minEncryption:
		return keyType{}, nil, 0, userError("requested version for signing is less than the minimum encryption key version")
	}
	v, ok := k.versions[ver]
	if !ok {
		return keyType{}, nil, 0, userError("no such key version")
	}
	return k.typ, v, ver, nil
}

// public returns version ver of key name's public key.
func (ks *keyStore) public(name string, ver int) (crypto.PublicKey, bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k, ok := ks.keys[name]
	if !ok {
		return nil, false
	}
	v, ok := k.versions[ver]
	if !ok || v.signer == nil {
		return nil, false
	}
	return v.signer.Public(), true
}

// describeLocked is Vault's formatKeyPolicy: the key's settings and, per
// version left, its public key (asymmetric types) or creation time in
// Unix seconds (symmetric ones). The caller holds keyStore.mu.
func (k *transitKey) describeLocked() map[string]any {
	d := map[string]any{
		"name":                   k.name,
		"type":                   k.typ.name,
		"derived":                false,
		"deletion_allowed":       k.deletionAllowed,
		"min_available_version":  k.minAvailable,
		"min_decryption_version": k.minDecryption,
		"min_encryption_version": k.minEncryption,
		"latest_version":         k.latest,
		"exportable":             k.exportable,
		"allow_plaintext_backup": k.allowPlaintextBackup,
		"supports_encryption":    k.typ.encryption(),
		"supports_decryption":    k.typ.encryption(),
		"supports_signing":       k.typ.signing(),
		"supports_derivation":    k.typ.derivation(),
		"auto_rotate_period":     0,
		"imported_key":           false,
	}
	if !k.typ.signing() {
		keys := map[string]int64{}
		for n, v := range k.versions {
			keys[strconv.Itoa(n)] = v.created.Unix()
		}
		d["keys"] = keys
		return d
	}
	keys := map[string]map[string]any{}
	for n, v := range k.versions {
		keys[strconv.Itoa(n)] = map[string]any{
			"name":          k.typ.versionName(),
			"public_key":    v.public,
			"creation_time": v.created,
		}
	}
	d["keys"] = keys
	return d
}

// validKeyName is Vault's GenericNameRegex: word characters, with "-",
// "." and "@" inside. A name that fails it matches no route.
func validKeyName(name string) bool {
	word := func(c byte) bool {
		return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	if name == "" || !word(name[0]) || !word(name[len(name)-1]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !word(c) && c != '-' && c != '.' && c != '@' {
			return false
		}
	}
	return true
}
