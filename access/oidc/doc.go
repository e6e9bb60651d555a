// Package oidc verifies OpenID Connect identity tokens of release pipelines
// (GitHub Actions, GitLab CI, Kubernetes service accounts and other trusted
// issuers) and maps their claims to a caller identity and roles.
//
// Only configured issuers are trusted, each with the audience its tokens
// must carry, its allowed asymmetric algorithms and optional claim
// requirements. Their discovery documents and JWKS are fetched over HTTPS
// lazily, cached for the server's max-age (default an hour), refetched on an
// unknown kid at most once per MinRefreshInterval, and kept while the issuer
// is unreachable, so an outage does not stop tokens signed with known keys.
//
// Hostile input is checked before anything costly or networked: size, shape,
// strict base64url and duplicate-free JSON, alg, crit and iss come first, and
// every refusal is an *Error with a stable Reason label and no token content.
//
// go-jose/v4 checks signatures. github.com/coreos/go-oidc/v3 is not used:
// its Provider fetches discovery at construction (cardsignd must start while
// an issuer is down), and its RemoteKeySet refetches on every unknown kid
// with no rate limit and ignores Cache-Control, which are exactly the
// behaviours this package needs to control.
package oidc
