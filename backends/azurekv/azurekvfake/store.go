package azurekvfake

import (
	"crypto"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"time"
)

// store holds the vault's keys and their versions. Key material is
// immutable once made; attributes change under mu.
type store struct {
	host string // of kids: https://HOST/keys/NAME/VERSION

	mu   sync.Mutex
	keys map[string]*key // by lower-case name: Key Vault names are case-insensitive
}

type key struct {
	name     string     // as first created
	versions []*version // oldest first; the last is the latest
}

type version struct {
	id      string // 32 lowercase hex digits, as Key Vault's
	spec    keySpec
	signer  crypto.Signer
	created time.Time

	// Guarded by store.mu.
	ops     []string
	tags    map[string]string
	enabled bool
	updated time.Time
}

// validName is Key Vault's rule for object names: 1 to 127 letters,
// digits and dashes.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 127 {
		return false
	}
	for _, c := range name {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

func newStore(host string) *store { return &store{host: host, keys: map[string]*key{}} }

// create adds a new version of the key name, making the key if it is new,
// as CreateKey does.
func (s *store) create(name string, p *createParams) (keyBundle, *apiError) {
	if !validName(name) {
		return keyBundle{}, badParameter("The key name %q is invalid: it must be 1 to 127 letters, digits and dashes.", name)
	}
	spec, aerr := p.spec()
	if aerr != nil {
		return keyBundle{}, aerr
	}
	if aerr := checkOps(p.KeyOps); aerr != nil {
		return keyBundle{}, aerr
	}
	signer, err := spec.generate()
	if err != nil {
		return keyBundle{}, internal("generate key: " + err.Error())
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id) // crypto/rand.Read never fails
	now := time.Now()
	v := &version{
		id:      hex.EncodeToString(id),
		spec:    spec,
		signer:  signer,
		created: now,
		ops:     slices.Clone(p.KeyOps),
		tags:    tagsOf(p.Tags),
		enabled: p.Attributes == nil || p.Attributes.Enabled == nil || *p.Attributes.Enabled,
		updated: now,
	}
	if v.ops == nil {
		v.ops = spec.defaultOps()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[strings.ToLower(name)]
	if !ok {
		k = &key{name: name}
		s.keys[strings.ToLower(name)] = k
	}
	k.versions = append(k.versions, v)
	return s.bundleLocked(k, v), nil
}

// lookupLocked finds a version; "" is the latest. The caller holds mu.
func (s *store) lookupLocked(name, ver string) (*key, *version, *apiError) {
	k, ok := s.keys[strings.ToLower(name)]
	if !ok || len(k.versions) == 0 {
		return nil, nil, keyNotFound(name, ver)
	}
	if ver == "" {
		return k, k.versions[len(k.versions)-1], nil
	}
	for _, v := range k.versions {
		if strings.EqualFold(v.id, ver) {
			return k, v, nil
		}
	}
	return nil, nil, keyNotFound(name, ver)
}

// get renders a version, disabled or not: Key Vault lets a disabled key's
// public part be read.
func (s *store) get(name, ver string) (keyBundle, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, v, aerr := s.lookupLocked(name, ver)
	if aerr != nil {
		return keyBundle{}, aerr
	}
	return s.bundleLocked(k, v), nil
}

// update changes what UpdateKey may change: enabled, key_ops and tags.
func (s *store) update(name, ver string, p *updateParams) (keyBundle, *apiError) {
	if aerr := checkOps(p.KeyOps); aerr != nil {
		return keyBundle{}, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k, v, aerr := s.lookupLocked(name, ver)
	if aerr != nil {
		return keyBundle{}, aerr
	}
	if p.Attributes != nil && p.Attributes.Enabled != nil {
		v.enabled = *p.Attributes.Enabled
	}
	if p.KeyOps != nil {
		v.ops = slices.Clone(p.KeyOps)
	}
	if p.Tags != nil {
		v.tags = tagsOf(p.Tags)
	}
	v.updated = time.Now()
	return s.bundleLocked(k, v), nil
}

// usable returns a version that may perform op (e.g. "sign") now, and its
// kid: it must be enabled and allow op.
func (s *store) usable(name, ver, op string) (*version, string, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, v, aerr := s.lookupLocked(name, ver)
	if aerr != nil {
		return nil, "", aerr
	}
	if !v.enabled {
		return nil, "", keyDisabled(op)
	}
	if !slices.Contains(v.ops, op) {
		return nil, "", opForbidden(op)
	}
	return v, s.kid(k, v), nil
}

func (s *store) setEnabled(name, ver string, enabled bool) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, v, aerr := s.lookupLocked(name, ver)
	if aerr != nil {
		return aerr
	}
	v.enabled, v.updated = enabled, time.Now()
	return nil
}

func (s *store) enabled(name, ver string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, v, aerr := s.lookupLocked(name, ver)
	return aerr == nil && v.enabled
}

func (s *store) publicKey(name, ver string) (crypto.PublicKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, v, aerr := s.lookupLocked(name, ver)
	if aerr != nil {
		return nil, false
	}
	return v.signer.Public(), true
}

func (s *store) versions(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[strings.ToLower(name)]
	if !ok {
		return nil
	}
	ids := make([]string, len(k.versions))
	for i, v := range k.versions {
		ids[i] = v.id
	}
	return ids
}

func (s *store) kid(k *key, v *version) string {
	return "https://" + s.host + "/keys/" + k.name + "/" + v.id
}
