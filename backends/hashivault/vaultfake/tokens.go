package vaultfake

import (
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// token is a Vault service token the fake issued.
type token struct {
	id, accessor string
	policies     []string // sorted; "root" alone for the root token
	path         string   // the path that issued it, as lookup-self shows
	display      string   // its display_name
	meta         map[string]string
	creationTTL  time.Duration // 0: never expires
	renewable    bool
	root         bool
	issued       time.Time
	expires      time.Time // zero: never
	maxExpires   time.Time // zero: never; renewals stop here
}

// tokenStore holds the tokens by ID. Lookups return copies, so a token's
// fields are only touched under mu.
type tokenStore struct {
	mu   sync.Mutex
	byID map[string]*token
}

func newTokenStore() *tokenStore { return &tokenStore{byID: map[string]*token{}} }

// issue makes a token from tmpl (path, display, meta, renewable and the
// policies asked for). A ttl of 0 never expires; any other is capped by
// maxTTL, as Vault caps a role's TTL by the mount's max TTL.
func (ts *tokenStore) issue(tmpl token, ttl, maxTTL time.Duration) token {
	now := time.Now()
	t := &tmpl
	t.id = "hvs." + randomString(24)
	t.accessor = randomString(24)
	t.policies = tokenPolicies(tmpl.policies)
	t.root = false
	t.issued = now
	if ttl > 0 {
		t.creationTTL = min(ttl, maxTTL)
		t.expires = now.Add(t.creationTTL)
		t.maxExpires = now.Add(maxTTL)
	}
	ts.put(t)
	return *t
}

// issueRoot makes the root token: policy "root", no expiry, not renewable.
func (ts *tokenStore) issueRoot() token {
	t := &token{
		id:       "hvs." + randomString(24),
		accessor: randomString(24),
		policies: []string{"root"},
		path:     "auth/token/root",
		display:  "root",
		root:     true,
		issued:   time.Now(),
	}
	ts.put(t)
	return *t
}

func (ts *tokenStore) put(t *token) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.byID[t.id] = t
}

// live returns the token called id if it exists and has not expired.
func (ts *tokenStore) live(id string, now time.Time) (token, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.byID[id]
	if !ok || (!t.expires.IsZero() && !now.Before(t.expires)) {
		return token{}, false
	}
	return *t, true
}

// renew extends the token's life by increment (0: its creation TTL) from
// now, up to its max TTL, and returns it with Vault's warning when the max
// TTL capped it.
func (ts *tokenStore) renew(id string, increment time.Duration, now time.Time) (token, string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.byID[id]
	if !ok {
		return token{}, "", &vaultError{permissionDenied()}
	}
	if t.root || !t.renewable || t.expires.IsZero() {
		return token{}, "", userError("lease is not renewable")
	}
	ttl := increment
	if ttl <= 0 {
		ttl = t.creationTTL
	}
	var warning string
	exp := now.Add(ttl)
	if exp.After(t.maxExpires) {
		exp = t.maxExpires
		warning = fmt.Sprintf("TTL of %q exceeded the effective max_ttl of %q; TTL value is capped accordingly",
			ttl.String(), exp.Sub(now).Truncate(time.Second).String())
	}
	t.expires = exp
	return *t, warning, nil
}

// expire ends the token's life now, as if its TTL had run out.
func (ts *tokenStore) expire(id string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.byID[id]; ok && !t.root {
		t.expires = time.Now().Add(-time.Nanosecond)
	}
}

// ttl is the token's remaining life in whole seconds, as Vault reports it;
// 0 for a token that never expires.
func (t token) ttl(now time.Time) int {
	if t.expires.IsZero() {
		return 0
	}
	return int(t.expires.Sub(now) / time.Second)
}

// tokenPolicies normalizes policy names as Vault does (lowercase, sorted,
// no duplicates) and adds "default", which Vault gives every token unless
// told not to.
func tokenPolicies(policies []string) []string {
	out := []string{"default"}
	for _, p := range policies {
		if p = strings.ToLower(strings.TrimSpace(p)); p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// randomString is n random letters and digits, as Vault's token IDs are.
func randomString(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
