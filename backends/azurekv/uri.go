//go:build !noazurekv

package azurekv

import (
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// keyRef is a parsed azurekv: URI.
type keyRef struct {
	host    string // VAULT.vault.azure.net[:port]
	name    string
	version string   // "": not named; Open pins the current one
	alg     jose.Alg // ?alg=, "" for the key type's default
}

// String is the key's URI without a query.
func (r keyRef) String() string {
	s := Scheme + "://" + r.host + "/keys/" + r.name
	if r.version != "" {
		s += "/" + r.version
	}
	return s
}

// parseURI parses azurekv://HOST/keys/NAME[/VERSION][?alg=PS256]. The
// host is checked against the allowed hosts by the backend.
func parseURI(uri string) (keyRef, error) {
	rest, ok := backends.CutScheme(uri, Scheme)
	if !ok {
		return keyRef{}, backends.NewURIError(uri, "not an azurekv:// URI (want azurekv://VAULT.vault.azure.net/keys/NAME/VERSION)")
	}
	path, query, _ := strings.Cut(rest, "?")
	var ref keyRef
	alg, err := backends.AlgQuery(uri, query)
	if err != nil {
		return keyRef{}, err
	}
	ref.alg = alg
	parts := strings.Split(path, "/")
	if len(parts) < 3 || len(parts) > 4 || parts[1] != "keys" {
		return keyRef{}, backends.NewURIError(uri, "want azurekv://VAULT.vault.azure.net/keys/NAME/VERSION")
	}
	ref.host = strings.ToLower(parts[0])
	if !validHost(ref.host) {
		return keyRef{}, backends.NewURIError(uri, "the vault host must be a DNS name, optionally with a port")
	}
	ref.name = parts[2]
	if !validName(ref.name) {
		return keyRef{}, backends.NewURIError(uri, "a key name is 1-127 letters, digits and '-'")
	}
	if len(parts) == 4 {
		ref.version = parts[3]
		if !validVersion(ref.version) {
			return keyRef{}, backends.NewURIError(uri, "a key version is 32 hexadecimal digits")
		}
	}
	return ref, nil
}

// keyURI is the URI of a key version, with ?alg= where the key type's
// default is not the alg (PS256 on an RSA key).
func keyURI(host, name, version string, alg jose.Alg) string {
	u := keyRef{host: host, name: name, version: version}.String()
	if alg == jose.PS256 {
		u += "?alg=PS256"
	}
	return u
}

func validName(s string) bool {
	if s == "" || len(s) > 127 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func validVersion(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func validHost(s string) bool {
	host, port, hasPort := strings.Cut(s, ":")
	if host == "" || len(s) > 253 || (hasPort && (port == "" || len(port) > 5)) {
		return false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return false
		}
	}
	return true
}

// kidParts returns the key name and version of a Key Vault kid
// (https://HOST/keys/NAME/VERSION), "" for what it lacks. The SDK's own
// ID.Name and ID.Version dereference nil on a kid of another shape, so a
// malformed response would crash the process; this never does.
func kidParts(kid *azkeys.ID) (name, version string) {
	if kid == nil {
		return "", ""
	}
	u, err := url.Parse(string(*kid))
	if err != nil {
		return "", ""
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] != "keys" {
		return "", ""
	}
	name = parts[1]
	if len(parts) >= 3 {
		version = parts[2]
	}
	return name, version
}
