package vaultfake

import (
	"slices"
	"time"
)

// The token endpoints a client calls on its own token.

// renewSelf answers auth/token/renew-self: increment, in seconds or as a
// duration; 0 renews for the token's creation TTL.
func (s *engine) renewSelf(c *call) reply {
	inc, _, err := c.f.seconds("increment")
	if err != nil {
		return replyFor(err)
	}
	now := time.Now()
	t, warning, err := s.tokens.renew(c.tok.id, inc, now)
	if err != nil {
		return replyFor(err)
	}
	r := reply{auth: authBlock(t, now)}
	if warning != "" {
		r.warnings = []string{warning}
	}
	return r
}

// lookupSelf answers auth/token/lookup-self.
func (s *engine) lookupSelf(c *call) reply {
	now := time.Now()
	t := c.tok
	var expire any // JSON null for a token that never expires
	if !t.expires.IsZero() {
		expire = t.expires.UTC().Format(time.RFC3339Nano)
	}
	return reply{data: map[string]any{
		"accessor":         t.accessor,
		"creation_time":    t.issued.Unix(),
		"creation_ttl":     int(t.creationTTL / time.Second),
		"display_name":     t.display,
		"entity_id":        "",
		"expire_time":      expire,
		"explicit_max_ttl": 0,
		"id":               t.id,
		"issue_time":       t.issued.UTC().Format(time.RFC3339Nano),
		"meta":             t.meta,
		"num_uses":         0,
		"orphan":           !t.root,
		"path":             t.path,
		"policies":         slices.Clone(t.policies),
		"renewable":        t.renewable,
		"ttl":              t.ttl(now),
		"type":             "service",
	}}
}

// authBlock is the "auth" part of a login or renewal response.
func authBlock(t token, now time.Time) map[string]any {
	return map[string]any{
		"client_token":    t.id,
		"accessor":        t.accessor,
		"policies":        slices.Clone(t.policies),
		"token_policies":  slices.Clone(t.policies),
		"metadata":        t.meta,
		"lease_duration":  t.ttl(now),
		"renewable":       t.renewable,
		"entity_id":       "",
		"token_type":      "service",
		"orphan":          true,
		"mfa_requirement": nil,
		"num_uses":        0,
	}
}
