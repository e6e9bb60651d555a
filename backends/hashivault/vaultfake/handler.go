package vaultfake

import (
	"net/http"
	"strings"
	"time"
)

// call is one request on its way to a handler.
type call struct {
	opts Options // effective: defaults filled in
	f    fields
	tok  token // zero for a login
}

// ServeHTTP answers a request in Vault's order: faults (a sealed or
// rate-limited Vault answers before it looks at the token), then the
// token, the namespace the token belongs to, the ACL, and only then the
// route, so a token without rights learns nothing about what exists.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	if !ok {
		writeReply(w, errorReply(http.StatusNotFound), "")
		return
	}
	o := s.faults.snapshot().effective()
	path, inNS := inNamespace(o.Namespace, r.Header.Get(namespaceHeader), raw)
	ep, found := s.e.match(o, r.Method, path)
	if found && ep.handle != nil {
		var faultable bool
		var cd countdown
		o, faultable, cd = s.faults.take(ep.op, ep.auth)
		o = o.effective()
		if faultable && inject(r.Context(), s.closing, w, o, cd, path) {
			return
		}
	}

	c := &call{opts: o}
	if !found || !ep.login {
		tok, ok := s.e.tokens.live(requestToken(r), time.Now())
		if !ok || (!inNS && !tok.root) {
			// Tokens belong to the namespace they were made in.
			writeReply(w, permissionDenied(), "")
			return
		}
		capability := ep.capability
		if !found || ep.handle == nil {
			capability = capabilityOf(r.Method)
		}
		if !s.e.acl.allows(tok.policies, path, capability) {
			writeReply(w, permissionDenied(), "")
			return
		}
		c.tok = tok
	}
	switch {
	case !found || (!inNS && ep.mountType != "token"):
		// The root token outside the namespace: the mount is not there.
		writeReply(w, noHandler(path), "")
		return
	case ep.handle == nil:
		writeReply(w, errorReply(http.StatusMethodNotAllowed, "unsupported operation"), "")
		return
	}
	var err error
	if c.f, err = parseFields(w, r); err != nil {
		writeReply(w, replyFor(err), "")
		return
	}
	writeReply(w, ep.handle(c), ep.mountType)
}

// requestToken is the request's token: X-Vault-Token, or a bearer token,
// which Vault accepts too.
func requestToken(r *http.Request) string {
	if t := r.Header.Get("X-Vault-Token"); t != "" {
		return t
	}
	t, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return t
}
