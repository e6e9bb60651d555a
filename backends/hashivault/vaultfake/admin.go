package vaultfake

import (
	"crypto"
	"fmt"
	"slices"
	"time"
)

// The helpers below set the fake up the way an operator sets Vault up,
// without the API: they are not counted by Calls and no fault applies.

// IssueToken makes a token with ttl (0: it never expires), renewable or
// not, with policies and "default", as `vault token create` does. Its life
// is capped by Options.TokenMaxTTL, renewals included.
func (s *Server) IssueToken(ttl time.Duration, renewable bool, policies ...string) string {
	o := s.faults.snapshot().effective()
	t := s.e.tokens.issue(token{path: "auth/token/create", display: "token", renewable: renewable, policies: policies}, ttl, o.TokenMaxTTL)
	return t.id
}

// ExpireToken ends token's life now, as if its TTL had run out: it is
// refused with 403 from then on, so a client must log in again. The root
// token cannot be expired.
func (s *Server) ExpireToken(token string) { s.e.tokens.expire(token) }

// AddAppRole lets role ID roleID log in with secretID at
// auth/approle/login, for renewable tokens with ttl and policies. Adding
// a role ID again replaces it.
func (s *Server) AddAppRole(roleID, secretID string, ttl time.Duration, policies ...string) {
	s.e.roles.mu.Lock()
	defer s.e.roles.mu.Unlock()
	s.e.roles.appRoles[roleID] = role{name: roleID, secret: secretID, ttl: ttl, policies: slices.Clone(policies)}
}

// AddKubernetesRole lets a service account whose token is jwt log in as
// roleName at auth/kubernetes/login, for renewable tokens with ttl and
// policies. The fake compares the JWT; Vault would have Kubernetes review
// it. Adding a role again replaces it.
func (s *Server) AddKubernetesRole(roleName, jwt string, ttl time.Duration, policies ...string) {
	s.e.roles.mu.Lock()
	defer s.e.roles.mu.Unlock()
	s.e.roles.k8sRoles[roleName] = role{name: roleName, secret: jwt, ttl: ttl, policies: slices.Clone(policies)}
}

// AddPolicy adds or replaces the ACL policy name: path (relative to the
// namespace; exact, or a prefix ending in "*", e.g. "transit/sign/*") to
// capabilities ("create", "read", "update", "delete", "list", "deny", ...).
// It refuses "root", unknown capabilities and a "*" elsewhere than at the
// end (Vault's "+" segments are not supported).
func (s *Server) AddPolicy(name string, paths map[string][]string) error {
	return s.e.acl.set(name, paths)
}

// CreateKey creates Transit key name of type typ ("ecdsa-p256", "rsa-2048",
// "ed25519", "aes256-gcm96", ...) with version 1. Creating an existing key
// changes nothing, as in Vault.
func (s *Server) CreateKey(name, typ string) error {
	kt, ok := keyTypeOf(typ)
	if !ok {
		return fmt.Errorf("vaultfake: unknown key type %q", typ)
	}
	if !validKeyName(name) {
		return fmt.Errorf("vaultfake: %q is not a Transit key name", name)
	}
	_, _, err := s.e.keys.create(name, kt, false, false)
	return err
}

// Rotate adds a version to key name and returns its number.
func (s *Server) Rotate(name string) (int, error) {
	_, v, err := s.e.keys.rotate(name)
	if err != nil {
		return 0, fmt.Errorf("vaultfake: rotate %s: %w", name, err)
	}
	return v, nil
}

// PublicKey returns version version of key name's public key
// (*ecdsa.PublicKey, *rsa.PublicKey or ed25519.PublicKey), and false when
// the key or the version (trimmed, or never made) does not exist or the
// key is symmetric.
func (s *Server) PublicKey(name string, version int) (crypto.PublicKey, bool) {
	return s.e.keys.public(name, version)
}
