//go:build !nogcpkms

package gcpkms

import (
	"regexp"
	"strings"

	"github.com/cardsign/cardsign/backends"
)

// Resource names. Project IDs may be domain-scoped ("example.com:proj");
// key ring and key IDs are [a-zA-Z0-9_-]{1,63} in Cloud KMS. Nothing that
// needs escaping is allowed, so a name is its own URI path.
const keyPattern = `projects/[a-zA-Z0-9.:_-]+/locations/[a-zA-Z0-9_-]+/keyRings/[a-zA-Z0-9_-]{1,63}/cryptoKeys/[a-zA-Z0-9_-]{1,63}`

var (
	keyRE     = regexp.MustCompile(`^` + keyPattern + `$`)
	versionRE = regexp.MustCompile(`^(` + keyPattern + `)/cryptoKeyVersions/[1-9][0-9]{0,17}$`)
)

const wantURI = "want gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K/cryptoKeyVersions/N"

// parseURI returns the CryptoKeyVersion resource name a gcpkms: URI names.
func parseURI(uri string) (string, error) {
	scheme, err := backends.Scheme(uri)
	if err != nil {
		return "", err
	}
	if scheme != Scheme {
		return "", backends.NewURIError(uri, "not a "+Scheme+": URI")
	}
	rest := uri[len(Scheme)+1:]
	if !strings.HasPrefix(rest, "//") {
		return "", backends.NewURIError(uri, wantURI)
	}
	name := rest[2:]
	if strings.ContainsAny(name, "?#") {
		return "", backends.NewURIError(uri, "no query or fragment allowed; "+wantURI)
	}
	if !versionRE.MatchString(name) {
		return "", backends.NewURIError(uri, wantURI)
	}
	return name, nil
}

// versionURI is the gcpkms: URI of a CryptoKeyVersion resource name.
func versionURI(name string) string { return Scheme + "://" + name }

// parseCryptoKey accepts a CryptoKey resource name, bare or as a gcpkms://
// URI, and returns the resource name.
func parseCryptoKey(s string) (string, error) {
	name := s
	if len(s) > len(Scheme)+3 && strings.EqualFold(s[:len(Scheme)+3], Scheme+"://") {
		name = s[len(Scheme)+3:]
	}
	if !keyRE.MatchString(name) {
		return "", backends.NewURIError(s, "want a CryptoKey: projects/P/locations/L/keyRings/R/cryptoKeys/K")
	}
	return name, nil
}

// cryptoKeyOf is the CryptoKey of a version resource name.
func cryptoKeyOf(version string) string {
	return version[:strings.LastIndex(version, "/cryptoKeyVersions/")]
}
