package awskmsfake

import "sync"

// kms is the fake's key management proper: the keys and aliases of one
// account in one Region and the KMS operations on them. It knows nothing of
// HTTP or of injected faults, which are Server's, so that the wire
// operations and the Go-side helpers of tests share one locked state.
type kms struct {
	region, account string

	mu       sync.Mutex // guards everything below, and the keys' mutable fields
	keys     map[string]*key
	aliases  map[string]string // alias/NAME → key ID
	disabled map[string]bool   // key IDs DisableKey was called for
}

func newKMS(region, account string) *kms {
	return &kms{
		region:   region,
		account:  account,
		keys:     map[string]*key{},
		aliases:  map[string]string{},
		disabled: map[string]bool{},
	}
}

// add stores a key newKey made.
func (m *kms) add(k *key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys[k.id] = k
}

// setAlias points alias (alias/NAME) at the key keyRef names (key ID or
// ARN), creating or moving it: the CreateAlias helper, which unlike the
// operation does not refuse an alias that exists.
func (m *kms) setAlias(alias, keyRef string) *apiError {
	if aerr := checkAliasName(alias); aerr != nil {
		return aerr
	}
	return m.withKey(keyRef, func(k *key) { m.aliases[alias] = k.id })
}

// disable disables the key keyRef names and records it for lookup. As the
// DisableKey operation, it takes a key ID or key ARN, not an alias.
func (m *kms) disable(keyRef string) *apiError {
	return m.withKey(keyRef, func(k *key) {
		k.enabled = false
		m.disabled[k.id] = true
	})
}

// remove deletes the key keyRef names (key ID or ARN) and the aliases
// naming it.
func (m *kms) remove(keyRef string) *apiError {
	return m.withKey(keyRef, func(k *key) {
		delete(m.keys, k.id)
		for alias, id := range m.aliases {
			if id == k.id {
				delete(m.aliases, alias)
			}
		}
	})
}

// withKey calls change with the key keyRef names, holding m.mu. keyRef is a
// key ID or key ARN, not an alias, as for the KMS operations that change
// keys.
func (m *kms) withKey(keyRef string, change func(k *key)) *apiError {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, aerr := m.resolve(keyRef, false)
	if aerr != nil {
		return aerr
	}
	change(k)
	return nil
}

// lookup describes the key keyRef names (key ID, key ARN or alias) and
// reports whether DisableKey was called for it; ok is false if there is no
// such key.
func (m *kms) lookup(keyRef string) (ki KeyInfo, disabled, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, aerr := m.resolve(keyRef, true)
	if aerr != nil {
		return KeyInfo{}, false, false
	}
	return k.info(), m.disabled[k.id], true
}

// aliasTarget returns the ARN of the key alias (alias/NAME) points to.
func (m *kms) aliasTarget(alias string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.aliases[alias]
	if !ok {
		return "", false
	}
	return m.keys[id].arn, true
}
