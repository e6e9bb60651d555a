//go:build !novault

package hashivault

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// keyRef is a parsed hashivault: URI.
type keyRef struct {
	name    string
	version int      // 0: not named; Open pins the latest
	alg     jose.Alg // ?alg=, "" for the key type's default
}

// parseURI parses hashivault://KEY or hashivault://KEY/VERSION, optionally
// with ?alg=PS256 (an RSA key signs RS256 unless told). The Vault address,
// namespace and mount come from the configuration, never from the URI, so
// a URI cannot send the backend's token elsewhere.
func parseURI(uri string) (keyRef, error) {
	rest, ok := backends.CutScheme(uri, Scheme)
	if !ok {
		return keyRef{}, backends.NewURIError(uri, "not a hashivault:// URI (want hashivault://KEY/VERSION)")
	}
	path, query, _ := strings.Cut(rest, "?")
	var ref keyRef
	alg, err := backends.AlgQuery(uri, query)
	if err != nil {
		return keyRef{}, err
	}
	ref.alg = alg
	name, version, hasVersion := strings.Cut(path, "/")
	if !validName(name) {
		return keyRef{}, backends.NewURIError(uri, "the key name must be 1-128 letters, digits, '_', '-' or '.' (hashivault://KEY/VERSION)")
	}
	ref.name = name
	if hasVersion {
		v, err := strconv.Atoi(version)
		if err != nil || v < 1 || strconv.Itoa(v) != version {
			return keyRef{}, backends.NewURIError(uri, "the version must be a positive decimal number (hashivault://KEY/VERSION)")
		}
		ref.version = v
	}
	return ref, nil
}

// keyURI is the URI of a key version, with ?alg= only where the key type's
// default is not the alg (PS256 on an RSA key).
func keyURI(name string, version int, alg jose.Alg) string {
	u := fmt.Sprintf("%s://%s/%d", Scheme, name, version)
	if alg == jose.PS256 {
		u += "?alg=PS256"
	}
	return u
}

// validName reports whether s is a Transit key name cardsign accepts: Vault
// takes more, but these characters are safe in a URL path as they are.
func validName(s string) bool {
	if s == "" || len(s) > 128 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}
