package vaultfake

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// aclStore holds the ACL policies by name: path (exact, or a prefix ending
// in "*") to capabilities.
type aclStore struct {
	mu       sync.Mutex
	policies map[string]map[string][]string
}

// newACLStore has Vault's "default" policy, the part of it a signing
// client needs: a token may look itself up and renew itself.
func newACLStore() *aclStore {
	return &aclStore{policies: map[string]map[string][]string{
		"default": {
			"auth/token/lookup-self": {"read"},
			"auth/token/renew-self":  {"update"},
			"auth/token/revoke-self": {"update"},
		},
	}}
}

// set adds or replaces a policy. Unknown capabilities are refused, so a
// test's typo does not pass as a denial.
func (a *aclStore) set(name string, paths map[string][]string) error {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" || name == "root" {
		return fmt.Errorf("vaultfake: policy name %q cannot be set", name)
	}
	known := []string{"create", "read", "update", "patch", "delete", "list", "sudo", "deny"}
	rules := make(map[string][]string, len(paths))
	for p, caps := range paths {
		for _, c := range caps {
			if !slices.Contains(known, c) {
				return fmt.Errorf("vaultfake: policy %s: path %q: unknown capability %q", name, p, c)
			}
		}
		if i := strings.Index(p, "*"); i >= 0 && i != len(p)-1 {
			return fmt.Errorf("vaultfake: policy %s: path %q: only a trailing * is supported", name, p)
		}
		rules[strings.TrimPrefix(p, "/")] = slices.Clone(caps)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.policies[name] = rules
	return nil
}

// allows reports whether policies grant capability on path. As Vault does,
// it merges the policies' rules (capabilities of the same path add up),
// then takes the exact rule for path, else the longest prefix rule that
// matches; "deny" in it refuses everything. Policies that do not exist
// grant nothing.
func (a *aclStore) allows(policies []string, path, capability string) bool {
	if slices.Contains(policies, "root") {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var caps []string
	best := -1 // length of the best prefix rule so far; exact beats all
	for _, name := range policies {
		for rule, rc := range a.policies[name] {
			prefix, glob := strings.CutSuffix(rule, "*")
			switch {
			case !glob && rule == path:
				if best != len(path)+1 {
					caps, best = nil, len(path)+1
				}
				caps = append(caps, rc...)
			case glob && strings.HasPrefix(path, prefix) && len(prefix) >= best:
				if len(prefix) > best {
					caps, best = nil, len(prefix)
				}
				caps = append(caps, rc...)
			}
		}
	}
	return !slices.Contains(caps, "deny") && slices.Contains(caps, capability)
}
