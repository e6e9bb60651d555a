package vaultfake

import "strings"

// namespaceHeader is the header Vault Enterprise and OpenBao read a
// request's namespace from.
const namespaceHeader = "X-Vault-Namespace"

// inNamespace resolves the namespace a request addresses against want, the
// one the fake's mounts live in. Vault joins the header and a path prefix:
// header "team" and path "signing/transit/..." address "team/signing". It
// returns the path relative to want, and whether the request addresses
// want at all (an empty want is the root namespace, addressed by no header
// and no prefix).
func inNamespace(want, header, path string) (string, bool) {
	header = strings.Trim(header, "/")
	rest := want
	if header != "" {
		r, ok := strings.CutPrefix(want, header)
		if !ok || (r != "" && r[0] != '/') {
			return path, false
		}
		rest = strings.TrimPrefix(r, "/")
	}
	if rest == "" {
		return path, true
	}
	if p, ok := strings.CutPrefix(path, rest+"/"); ok {
		return p, true
	}
	return path, false
}
