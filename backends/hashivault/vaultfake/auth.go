package vaultfake

import (
	"crypto/subtle"
	"sync"
	"time"
)

// role is an AppRole role (by role ID, with its secret ID) or a
// Kubernetes role (by name, with the one service account JWT it accepts),
// and the tokens its logins get.
type role struct {
	name     string
	secret   string
	ttl      time.Duration
	policies []string
}

type roleStore struct {
	mu       sync.Mutex
	appRoles map[string]role // by role ID
	k8sRoles map[string]role // by role name
}

func newRoleStore() *roleStore {
	return &roleStore{appRoles: map[string]role{}, k8sRoles: map[string]role{}}
}

func (rs *roleStore) appRole(id string) (role, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r, ok := rs.appRoles[id]
	return r, ok
}

func (rs *roleStore) k8sRole(name string) (role, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r, ok := rs.k8sRoles[name]
	return r, ok
}

func sameSecret(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// appRoleLogin answers auth/approle/login: role_id, secret_id. A wrong
// role or secret is one message, as Vault gives nothing away.
func (s *engine) appRoleLogin(c *call) reply {
	id, _, err := c.f.str("role_id")
	if err != nil {
		return replyFor(err)
	}
	secret, _, err := c.f.str("secret_id")
	if err != nil {
		return replyFor(err)
	}
	if id == "" {
		return badRequest("missing role_id")
	}
	r, ok := s.roles.appRole(id)
	if !ok || !sameSecret(secret, r.secret) {
		return badRequest("invalid role or secret ID")
	}
	t := s.tokens.issue(token{path: "auth/" + c.opts.AppRoleMount + "/login", display: "approle", renewable: true, policies: r.policies}, r.ttl, c.opts.TokenMaxTTL)
	return reply{auth: authBlock(t, t.issued)}
}

// kubernetesLogin answers auth/kubernetes/login: role, jwt. The JWT is
// compared with the role's, where Vault would have Kubernetes review it;
// a wrong one is 403, as a failed review is.
func (s *engine) kubernetesLogin(c *call) reply {
	name, _, err := c.f.str("role")
	if err != nil {
		return replyFor(err)
	}
	jwt, _, err := c.f.str("jwt")
	if err != nil {
		return replyFor(err)
	}
	switch {
	case name == "":
		return badRequest("missing role")
	case jwt == "":
		return badRequest("missing jwt")
	}
	r, ok := s.roles.k8sRole(name)
	if !ok {
		return badRequest("invalid role name %q", name)
	}
	if !sameSecret(jwt, r.secret) {
		return permissionDenied()
	}
	t := s.tokens.issue(token{path: "auth/" + c.opts.KubernetesMount + "/login", display: "kubernetes-" + name, renewable: true, meta: map[string]string{"role": name}, policies: r.policies}, r.ttl, c.opts.TokenMaxTTL)
	return reply{auth: authBlock(t, t.issued)}
}
