package vaultfake

// The version bounds of a key: trim and config move them, with Vault's
// rules, so that a client sees the same refusals it would see there.

// trim deletes the versions of key name below min, with Vault's rules:
// never back, and not past min_encryption_version or
// min_decryption_version, which must both be set.
func (ks *keyStore) trim(name string, min int) (map[string]any, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k, ok := ks.keys[name]
	if !ok {
		return nil, userError("invalid key name")
	}
	switch {
	case min < k.minAvailable:
		return nil, userError("minimum available version cannot be decremented")
	case k.minEncryption == 0:
		return nil, userError("minimum available version cannot be set when minimum encryption version is not set")
	case k.minDecryption == 0:
		return nil, userError("minimum available version cannot be set when minimum decryption version is not set")
	case min > k.minEncryption:
		return nil, userError("minimum available version cannot be greater than minmum encryption version")
	case min > k.minDecryption:
		return nil, userError("minimum available version cannot be greater than minimum decryption version")
	case min < 0:
		return nil, userError("minimum available version cannot be negative")
	case min == 0:
		return nil, userError("minimum available version should be positive")
	}
	k.minAvailable = min
	for v := range k.versions {
		if v < min {
			delete(k.versions, v)
		}
	}
	return k.describeLocked(), nil
}

// keyConfig is a keys/NAME/config request; nil fields are not changed.
type keyConfig struct {
	minDecryption, minEncryption *int
	deletionAllowed, exportable  *bool
	allowPlaintextBackup         *bool
}

// configure applies c to key name with Vault's rules, all or nothing, and
// returns the key's description and a warning.
func (ks *keyStore) configure(name string, c keyConfig) (map[string]any, string, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k, ok := ks.keys[name]
	if !ok {
		return nil, "", userError("no existing key named %s could be found", name)
	}
	next := *k
	var warning string
	if c.minDecryption != nil {
		v := *c.minDecryption
		switch {
		case v < 0:
			return nil, "", userError("min decryption version cannot be negative")
		case v == 0:
			v = 1
			warning = "since Vault 0.3, transit key numbering starts at 1; forcing minimum to 1"
		case v > k.latest:
			return nil, "", userError("cannot set min decryption version of %d, latest key version is %d", v, k.latest)
		}
		next.minDecryption = v
	}
	if c.minEncryption != nil {
		v := *c.minEncryption
		switch {
		case v < 0:
			return nil, "", userError("min encryption version cannot be negative")
		case v > k.latest:
			return nil, "", userError("cannot set min encryption version of %d, latest key version is %d", v, k.latest)
		}
		next.minEncryption = v
	}
	if next.minEncryption > 0 && next.minEncryption < next.minDecryption {
		return nil, "", userError("cannot set min encryption/decryption values; min encryption version of %d must be greater than or equal to min decryption version of %d", next.minEncryption, next.minDecryption)
	}
	if next.minAvailable > next.minEncryption {
		return nil, "", userError("min encryption version should not be less than min available version")
	}
	if next.minAvailable > next.minDecryption {
		return nil, "", userError("min decryption version should not be less then min available version")
	}
	if c.deletionAllowed != nil {
		next.deletionAllowed = *c.deletionAllowed
	}
	// Exportable and plaintext backup cannot be unset once set.
	if c.exportable != nil && *c.exportable {
		next.exportable = true
	}
	if c.allowPlaintextBackup != nil && *c.allowPlaintextBackup {
		next.allowPlaintextBackup = true
	}
	*k = next
	return k.describeLocked(), warning, nil
}
