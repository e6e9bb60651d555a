package vaultfake

import (
	"net/http"
	"strings"
)

// endpoint is what a request's path (relative to its namespace) and
// method resolve to.
type endpoint struct {
	op         string // the Calls name
	auth       bool   // a login or token call: faultable only with AuthFaults
	login      bool   // needs no token
	mountType  string // Vault's mount_type in the answer
	capability string // the ACL capability the call needs
	// handle serves the call; nil when the path exists but not for this
	// method.
	handle func(*call) reply
}

// match finds the endpoint for path, and whether path is one the fake
// serves at all. Writes need "update", as Transit's paths have no
// existence check that would make a first write a "create".
func (s *engine) match(o Options, method, path string) (endpoint, bool) {
	write := method == http.MethodPost || method == http.MethodPut
	read := method == http.MethodGet
	on := func(ok bool, h func(*call) reply) func(*call) reply {
		if ok {
			return h
		}
		return nil
	}
	switch path {
	case "auth/token/lookup-self":
		return endpoint{op: "LookupSelf", auth: true, mountType: "token", capability: "read", handle: on(read, s.lookupSelf)}, true
	case "auth/token/renew-self":
		return endpoint{op: "Renew", auth: true, mountType: "token", capability: "update", handle: on(write, s.renewSelf)}, true
	case "auth/" + o.AppRoleMount + "/login":
		return endpoint{op: "Login", auth: true, login: true, mountType: "approle", handle: on(write, s.appRoleLogin)}, true
	case "auth/" + o.KubernetesMount + "/login":
		return endpoint{op: "Login", auth: true, login: true, mountType: "kubernetes", handle: on(write, s.kubernetesLogin)}, true
	}
	rest, ok := strings.CutPrefix(path, o.Mount+"/")
	if !ok {
		return endpoint{}, false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || !validKeyName(parts[1]) {
		return endpoint{}, false
	}
	name := parts[1]
	ep := endpoint{mountType: "transit", capability: "update"}
	with := func(h func(*call, string) reply) func(*call) reply {
		return func(c *call) reply { return h(c, name) }
	}
	switch {
	case parts[0] == "keys" && len(parts) == 2 && read:
		ep.op, ep.capability, ep.handle = "ReadKey", "read", with(s.readKey)
	case parts[0] == "keys" && len(parts) == 2:
		ep.op, ep.capability, ep.handle = "CreateKey", capabilityOf(method), on(write, with(s.createKey))
	case parts[0] == "keys" && parts[2] == "rotate":
		ep.op, ep.handle = "Rotate", on(write, with(s.rotateKey))
	case parts[0] == "keys" && parts[2] == "trim":
		ep.op, ep.handle = "Trim", on(write, with(s.trimKey))
	case parts[0] == "keys" && parts[2] == "config":
		ep.op, ep.handle = "Config", on(write, with(s.configKey))
	case parts[0] == "sign":
		var hash string
		if len(parts) == 3 {
			hash = parts[2] // sign/NAME/HASH, Vault's urlalgorithm
		}
		ep.op, ep.handle = "Sign", on(write, func(c *call) reply { return s.sign(c, name, hash) })
	default:
		return endpoint{}, false
	}
	return ep, true
}

// capabilityOf is the ACL capability a method needs on a path the fake
// does not serve, or for a method it does not serve there.
func capabilityOf(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "read"
	case http.MethodDelete:
		return "delete"
	case "LIST":
		return "list"
	}
	return "update"
}
