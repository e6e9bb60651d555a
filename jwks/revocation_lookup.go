package jwks

import "net/url"

// RevokedKeyLookup answers signer.VerifyOptions.Revoked for keys: whether
// the key kid is listed among revoked, and why.
func RevokedKeyLookup(revoked []Revocation) func(kid string) (string, bool) {
	byKID := make(map[string]Revocation, len(revoked))
	for _, r := range revoked {
		byKID[r.KID] = r
	}
	return func(kid string) (string, bool) {
		r, ok := byKID[kid]
		if !ok {
			return "", false
		}
		return r.String(), true
	}
}

// RevocationsURLBeside is the revocation document served beside the JWKS at
// jwksURL (cardsignd serves both from one host); ok is false when jwksURL
// is not an http(s) URL (a file has no document beside it).
func RevocationsURLBeside(jwksURL string) (docURL string, ok bool) {
	u, err := url.Parse(jwksURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	return u.Scheme + "://" + u.Host + RevocationsPath, true
}
