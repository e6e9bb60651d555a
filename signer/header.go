package signer

import (
	"encoding/base64"
	"sync"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// b64 is base64url without padding (RFC 7515 §2); Strict refuses encodings
// with stray low bits, so one signature has exactly one text form.
var b64 = base64.RawURLEncoding.Strict()

// ProfileHeader is the protected header parameter that marks a signature
// over the sdk or python-ascii canonical profile. Without it a verifier could not tell which
// bytes a signature covers, and a card stripped of the values only the spec
// profile keeps (an empty mtlsSecurityScheme, a scope-less requirement)
// would pass as spec-valid on the strength of the sdk signature. JWS
// verifiers ignore parameters they do not know (it is not in crit), so
// @a2a-js/sdk still verifies these signatures.
const ProfileHeader = "cardsign-profile"

// protectedHeader serializes {"alg", "cardsign-profile"?, "jku"?, "kid",
// "typ":"JOSE"} with sorted keys and no whitespace, so the same key and
// options always give the same protected value. The profile is named only
// for sdk and python-ascii signatures: a spec-profile signature is plain A2A.
func protectedHeader(alg jose.Alg, kid, jku string, profile card.Profile) []byte {
	return protectedHeaderAt(alg, kid, jku, profile, 0, 0)
}

// protectedHeaderAt is protectedHeader with a signature lifetime: iat and exp
// (NumericDate, RFC 7519 §2) in sorted key order, when exp is not 0.
func protectedHeaderAt(alg jose.Alg, kid, jku string, profile card.Profile, iat, exp int64) []byte {
	members := []strictjson.Member{{Key: "alg", Val: strictjson.StringValue(string(alg))}}
	if profile != card.ProfileSpec {
		members = append(members, strictjson.Member{Key: ProfileHeader, Val: strictjson.StringValue(string(profile))})
	}
	if exp != 0 {
		members = append(members, strictjson.Member{Key: "exp", Val: strictjson.IntValue(exp)}, strictjson.Member{Key: "iat", Val: strictjson.IntValue(iat)})
	}
	if jku != "" {
		members = append(members, strictjson.Member{Key: "jku", Val: strictjson.StringValue(jku)})
	}
	members = append(members,
		strictjson.Member{Key: "kid", Val: strictjson.StringValue(kid)},
		strictjson.Member{Key: "typ", Val: strictjson.StringValue("JOSE")})
	return strictjson.ObjectValue(members...).Compact()
}

// signingInput is ASCII(b64url(protected) "." b64url(payload)) (RFC 7515 §5.1).
func signingInput(protectedB64 string, payload []byte) []byte {
	in := make([]byte, 0, len(protectedB64)+1+b64.EncodedLen(len(payload)))
	in = append(in, protectedB64...)
	in = append(in, '.')
	return b64.AppendEncode(in, payload)
}

// HeaderCache keeps the base64url protected headers a key signs with, so a
// key that signs many cards builds each header once (per jku and profile).
// The zero value is ready; it is safe for concurrent use. Entries are keyed by
// alg and kid as well, so a cache shared by mistake between keys is only
// less useful, never wrong.
type HeaderCache struct {
	m sync.Map // headerKey → string
}

type headerKey struct {
	alg      jose.Alg
	kid, jku string
	profile  card.Profile
}

// protected returns b64url(protectedHeader(...)), from c when it has it.
func (c *HeaderCache) protected(alg jose.Alg, kid, jku string, profile card.Profile) string {
	if c == nil {
		return b64.EncodeToString(protectedHeader(alg, kid, jku, profile))
	}
	k := headerKey{alg: alg, kid: kid, jku: jku, profile: profile}
	if v, ok := c.m.Load(k); ok {
		return v.(string)
	}
	h := b64.EncodeToString(protectedHeader(alg, kid, jku, profile))
	c.m.Store(k, h)
	return h
}
