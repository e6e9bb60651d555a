package oidctest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"maps"
	"time"
)

// MintOption changes how Mint builds a token.
type MintOption func(*mint)

type mint struct {
	key        *Key
	header     map[string]any // overrides; a nil value removes the field
	rawHeader  []byte
	rawPayload []byte
	hmacSecret []byte
	unsigned   bool
}

// WithKey signs with k instead of the current signing key; the header's alg
// and kid are k's unless overridden.
func WithKey(k *Key) MintOption { return func(m *mint) { m.key = k } }

// WithHeader sets a header field (alg, kid, typ, crit, anything); a nil value
// removes it. It applies after the defaults and WithKey/WithHMAC.
func WithHeader(name string, value any) MintOption {
	return func(m *mint) {
		if m.header == nil {
			m.header = map[string]any{}
		}
		m.header[name] = value
	}
}

// WithRawHeader uses header, verbatim, as the JOSE header JSON (for
// duplicate keys, bad JSON and the like); it replaces WithHeader. The token is
// still signed with the key (or HMAC secret) chosen.
func WithRawHeader(header string) MintOption {
	return func(m *mint) { m.rawHeader = []byte(header) }
}

// WithRawPayload uses payload, verbatim, as the claims JSON; the claims
// passed to Mint and the defaults are ignored.
func WithRawPayload(payload string) MintOption {
	return func(m *mint) { m.rawPayload = []byte(payload) }
}

// WithHMAC signs HS256 with secret (alg "HS256", no kid unless set): the
// algorithm-confusion attack passes the issuer's public key (Key.PublicPEM)
// as the secret.
func WithHMAC(secret []byte) MintOption { return func(m *mint) { m.hmacSecret = secret } }

// WithNoSignature makes an unsecured JWT: alg "none" and an empty signature.
func WithNoSignature() MintOption { return func(m *mint) { m.unsigned = true } }

// Mint returns a compact JWS over claims. Unless claims set them, iss is the
// issuer's URL, iat and nbf the clock's now, and exp now+5m; a claim set to
// nil is left out (so {"exp": nil} makes a token with no exp).
func (is *Issuer) Mint(claims map[string]any, opts ...MintOption) string {
	is.t.Helper()
	var m mint
	for _, o := range opts {
		o(&m)
	}
	if m.key == nil {
		m.key = is.SigningKey()
	}

	header := map[string]any{"typ": "JWT"}
	switch {
	case m.unsigned:
		header["alg"] = "none"
	case m.hmacSecret != nil:
		header["alg"] = "HS256"
	default:
		header["alg"] = m.key.Alg
		header["kid"] = m.key.KID
	}
	apply(header, m.header)
	headerJSON := m.rawHeader
	if headerJSON == nil {
		headerJSON = mustJSON(is, header)
	}

	payloadJSON := m.rawPayload
	if payloadJSON == nil {
		now := is.now()
		full := map[string]any{
			"iss": is.URL,
			"iat": now.Unix(),
			"nbf": now.Unix(),
			"exp": now.Add(5 * time.Minute).Unix(),
		}
		apply(full, claims)
		payloadJSON = mustJSON(is, full)
	}

	b64 := base64.RawURLEncoding.EncodeToString
	input := b64(headerJSON) + "." + b64(payloadJSON)
	var sig []byte
	switch {
	case m.unsigned:
	case m.hmacSecret != nil:
		mac := hmac.New(sha256.New, m.hmacSecret)
		mac.Write([]byte(input))
		sig = mac.Sum(nil)
	default:
		var err error
		if sig, err = m.key.sign([]byte(input)); err != nil {
			is.t.Fatalf("oidctest: signing: %v", err)
		}
	}
	return input + "." + b64(sig)
}

// apply copies over into dst, deleting the names whose value is nil.
func apply(dst, over map[string]any) {
	maps.Copy(dst, over)
	for k, v := range over {
		if v == nil {
			delete(dst, k)
		}
	}
}

func mustJSON(is *Issuer, v any) []byte {
	is.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		is.t.Fatalf("oidctest: %v", err)
	}
	return b
}
