package gcpkmsfake

import (
	"fmt"
	"regexp"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Resource names as Cloud KMS spells them. IDs follow the provider's rule
// for key ring and key IDs ([a-zA-Z0-9_-]{1,63}); project and location IDs
// are looser there, and need not be stricter here.
var (
	keyNameRE     = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/keyRings/[a-zA-Z0-9_-]{1,63}/cryptoKeys/[a-zA-Z0-9_-]{1,63}$`)
	versionNameRE = regexp.MustCompile(`^(projects/[^/]+/locations/[^/]+/keyRings/[a-zA-Z0-9_-]{1,63}/cryptoKeys/[a-zA-Z0-9_-]{1,63})/cryptoKeyVersions/([1-9][0-9]{0,8})$`)
)

// checkKeyName returns INVALID_ARGUMENT for a malformed CryptoKey name.
func checkKeyName(name string) error {
	if !keyNameRE.MatchString(name) {
		return status.Errorf(codes.InvalidArgument, "invalid CryptoKey name %q: want projects/*/locations/*/keyRings/*/cryptoKeys/*", name)
	}
	return nil
}

// splitVersionName returns the CryptoKey of a CryptoKeyVersion name, or
// INVALID_ARGUMENT.
func splitVersionName(name string) (key string, err error) {
	m := versionNameRE.FindStringSubmatch(name)
	if m == nil {
		return "", status.Errorf(codes.InvalidArgument, "invalid CryptoKeyVersion name %q: want projects/*/locations/*/keyRings/*/cryptoKeys/*/cryptoKeyVersions/*", name)
	}
	return m[1], nil
}

// versionName is the name of version n of key.
func versionName(key string, n int) string {
	return fmt.Sprintf("%s/cryptoKeyVersions/%d", key, n)
}

// otherName is a plausible but wrong version name, for Options.WrongName.
func otherName(name string) string {
	i := strings.LastIndexByte(name, '/')
	return name[:i+1] + "9" + name[i+1:]
}
