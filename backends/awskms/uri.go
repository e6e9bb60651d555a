//go:build !noawskms

package awskms

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// keyRef is a parsed awskms: URI.
type keyRef struct {
	id     string   // what KMS is asked for: key ID, key ARN, alias/NAME or alias ARN
	region string   // from an ARN; "" means the backend's region
	alias  bool     // id names an alias, which may move to another key
	alg    jose.Alg // ?alg=, "" for the KeySpec's default
}

// parseURI parses awskms:///KEY-ID, awskms:///arn:aws:kms:REGION:ACCOUNT:key/ID,
// awskms:///alias/NAME or awskms:///arn:aws:kms:REGION:ACCOUNT:alias/NAME,
// each optionally with ?alg=RS256|PS256 (any alg the KeySpec can sign).
// The host is empty, as in file:///: the region comes from the ARN or the
// configuration, never from the URI's authority.
func parseURI(uri string) (keyRef, error) {
	rest, ok := backends.CutScheme(uri, Scheme)
	if !ok {
		return keyRef{}, backends.NewURIError(uri, "not an awskms:/// URI (want awskms:///KEY-ID, awskms:///arn:aws:kms:…:key/ID or awskms:///alias/NAME)")
	}
	path, query, _ := strings.Cut(rest, "?")
	path, ok = strings.CutPrefix(path, "/")
	if !ok {
		return keyRef{}, backends.NewURIError(uri, "awskms URIs have an empty host (awskms:///KEY, three slashes)")
	}
	var ref keyRef
	alg, err := backends.AlgQuery(uri, query)
	if err != nil {
		return keyRef{}, err
	}
	ref.alg = alg
	switch {
	case path == "":
		return keyRef{}, backends.NewURIError(uri, "no key ID, ARN or alias")
	case strings.HasPrefix(path, "arn:"):
		a, err := arn.Parse(path)
		if err != nil {
			return keyRef{}, backends.NewURIError(uri, "malformed ARN")
		}
		if a.Service != "kms" || a.Region == "" || a.AccountID == "" {
			return keyRef{}, backends.NewURIError(uri, "not a KMS key or alias ARN (want arn:PARTITION:kms:REGION:ACCOUNT:key/ID)")
		}
		if id, ok := strings.CutPrefix(a.Resource, "key/"); ok && validKeyID(id) {
			ref.id, ref.region = path, a.Region
		} else if name, ok := strings.CutPrefix(a.Resource, "alias/"); ok && validAliasName(name) {
			ref.id, ref.region, ref.alias = path, a.Region, true
		} else {
			return keyRef{}, backends.NewURIError(uri, "ARN resource is not key/ID or alias/NAME")
		}
	case strings.HasPrefix(path, "alias/"):
		if !validAliasName(strings.TrimPrefix(path, "alias/")) {
			return keyRef{}, backends.NewURIError(uri, "invalid alias name (want alias/ followed by letters, digits, /, _ or -)")
		}
		ref.id, ref.alias = path, true
	default:
		if !validKeyID(path) {
			return keyRef{}, backends.NewURIError(uri, "invalid key ID (want a key ID such as 1234abcd-12ab-34cd-56ef-1234567890ab, a key ARN or alias/NAME)")
		}
		ref.id = path
	}
	return ref, nil
}

// keyURI returns the URI of a key ARN, with ?alg= when the alg is not the
// KeySpec's default (PS256 on an RSA key), so that the URI alone says how
// the key signs.
func keyURI(keyARN string, alg jose.Alg, spec types.KeySpec) string {
	u := Scheme + ":///" + keyARN
	if def, ok := schemeFor(spec, ""); ok && def.alg != alg {
		u += "?alg=" + string(alg)
	}
	return u
}

// validKeyID accepts KMS key IDs: UUIDs, and "mrk-" + hex for multi-Region
// keys.
func validKeyID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validAliasName checks the part after "alias/" against KMS's alias rules.
func validAliasName(name string) bool {
	if name == "" || len(name) > 250 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '/' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
