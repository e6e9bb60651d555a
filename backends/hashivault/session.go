//go:build !novault

package hashivault

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/cardsign/cardsign/secretfile"
)

// maxSecretFile bounds a token or service account token file.
const maxSecretFile = 64 << 10

// session holds the backend's Vault token: it logs in (or looks up a
// given token) at the first call, renews the token at two thirds of its
// lease, and logs in again when renewal is refused, the token's max TTL
// nears, or Vault refuses the token. One login runs at a time; callers
// wait for it within their own deadline, and a caller whose token is still
// valid never waits. A static token that cannot be renewed is used until
// it expires, or until its file holds another one.
type session struct {
	b    *Backend
	auth Auth

	mu        sync.Mutex
	token     string
	obtained  time.Time
	ttl       time.Duration // lease left when obtained; 0: never expires
	increment time.Duration // what a renewal asks for: the token's full TTL
	renewable bool
	login     chan struct{} // closed when the login in flight ends; nil when none
	wake      chan struct{} // a new token: the renewal loop re-plans
}

func newSession(b *Backend, a Auth) (*session, error) {
	a.Method = cmp.Or(a.Method, AuthToken)
	switch a.Method {
	case AuthToken:
		if a.Token == "" && a.TokenFile == "" {
			a.Token = api.ReadBaoVariable(api.EnvVaultToken)
		}
		if a.Token == "" && a.TokenFile == "" {
			return nil, errors.New("hashivault: token auth without a token: set the backend's token_file, BAO_TOKEN or VAULT_TOKEN")
		}
	case AuthAppRole:
		a.MountPath = cmp.Or(a.MountPath, "approle")
		if a.RoleID == "" || a.SecretID == "" {
			return nil, errors.New("hashivault: AppRole auth needs a role ID and a secret ID")
		}
	case AuthKubernetes:
		a.MountPath = cmp.Or(a.MountPath, "kubernetes")
		a.JWTFile = cmp.Or(a.JWTFile, DefaultKubernetesJWTFile)
		if a.Role == "" {
			return nil, errors.New("hashivault: Kubernetes auth needs a role")
		}
	default:
		return nil, fmt.Errorf("hashivault: auth method %q is not token, approle or kubernetes", a.Method)
	}
	if a.MountPath != "" && !validPath(a.MountPath) {
		return nil, fmt.Errorf("hashivault: auth mount %q is not a path of letters, digits, '_', '-', '.' and '/'", a.MountPath)
	}
	return &session{b: b, auth: a, wake: make(chan struct{}, 1)}, nil
}

// canLogin reports whether the session can get a new token by itself: a
// login method, or a token file that may hold a new token.
func (s *session) canLogin() bool { return s.auth.Method != AuthToken || s.auth.TokenFile != "" }

// validLocked reports whether the token is good for a while yet.
func (s *session) validLocked() bool {
	return s.token != "" && (s.ttl == 0 || time.Since(s.obtained) < s.ttl-time.Second)
}

// get returns once the session holds a token that is valid for a while
// yet, logging in when there is none; with stale set (a token Vault
// refused), it logs in again unless another caller did since.
func (s *session) get(ctx context.Context, stale string) error {
	for {
		s.mu.Lock()
		if s.validLocked() && (stale == "" || s.token != stale) {
			s.mu.Unlock()
			return nil
		}
		if s.token != "" && !s.canLogin() {
			left := s.obtained.Add(s.ttl)
			s.mu.Unlock()
			return &LoginError{Method: s.auth.Method, Err: fmt.Errorf("the configured token expired at %s and cannot be renewed: give the backend a new token (token_file), or use approle or kubernetes auth",
				left.UTC().Format(time.RFC3339))}
		}
		if wait := s.login; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
				stale = "" // whatever that login got is the newest token
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done := make(chan struct{})
		s.login = done
		s.mu.Unlock()

		err := s.loginOnce(ctx, done)
		if err != nil {
			var ue *UnavailableError
			if errors.As(err, &ue) {
				return err
			}
			return &LoginError{Method: s.auth.Method, Err: err}
		}
		return nil
	}
}

// loginOnce runs the one login in flight and, however it ends, lets the
// callers waiting on done go.
func (s *session) loginOnce(ctx context.Context, done chan struct{}) error {
	defer func() {
		s.mu.Lock()
		s.login = nil
		s.mu.Unlock()
		close(done)
	}()
	return s.logIn(ctx)
}

// honoured reports whether Vault still accepts tok (lookup-self answers),
// so that a 403 to it was the policy's and not an expired token's.
func (s *session) honoured(ctx context.Context, tok string) bool {
	c, err := s.b.client.Clone()
	if err != nil {
		return false
	}
	c.SetNamespace(s.b.cfg.Namespace)
	c.SetToken(tok)
	_, err = c.Auth().Token().LookupSelfWithContext(ctx)
	return err == nil
}

// current is the token in use.
func (s *session) current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// logIn gets a token, without holding s.mu: logs in with AppRole or
// Kubernetes, or reads and looks up the static token to learn its TTL.
func (s *session) logIn(ctx context.Context) error {
	c, err := s.b.client.Clone()
	if err != nil {
		return fmt.Errorf("hashivault: login: %w", err)
	}
	// Clone reads BAO_TOKEN / VAULT_TOKEN again: a login sends no token.
	c.ClearToken()
	c.SetNamespace(s.b.cfg.Namespace)
	var tok string
	var ttl, increment time.Duration
	var renewable bool
	switch s.auth.Method {
	case AuthToken:
		if tok, err = s.staticToken(); err != nil {
			return err
		}
		c.SetToken(tok)
		var sec *api.Secret
		err = s.b.do(ctx, call{op: "token lookup-self", key: "auth/token/lookup-self", idempotent: true}, func(ctx context.Context) error {
			var err error
			sec, err = c.Auth().Token().LookupSelfWithContext(ctx)
			return err
		})
		if err != nil {
			return s.b.fail("token lookup-self", "auth/token/lookup-self", err)
		}
		if ttl, err = sec.TokenTTL(); err != nil {
			return fmt.Errorf("hashivault: token lookup-self: ttl: %w", err)
		}
		// TTL 0 is a token that never expires (no expire_time), or one at
		// its very last second: the latter is expired, not eternal.
		if ttl == 0 && sec.Data["expire_time"] != nil {
			return fmt.Errorf("hashivault: the token from %s has expired", cmp.Or(s.auth.TokenFile, "the configuration"))
		}
		if renewable, err = sec.TokenIsRenewable(); err != nil {
			return fmt.Errorf("hashivault: token lookup-self: renewable: %w", err)
		}
		increment = ttl
		if n, ok := sec.Data["creation_ttl"].(json.Number); ok {
			if secs, err := n.Int64(); err == nil && secs > 0 {
				increment = time.Duration(secs) * time.Second
			}
		}
	default:
		path, body, err := s.loginRequest()
		if err != nil {
			return err
		}
		var sec *api.Secret
		err = s.b.do(ctx, call{op: s.auth.Method + " login", key: path, idempotent: true}, func(ctx context.Context) error {
			var err error
			sec, err = c.Logical().WriteWithContext(ctx, path, body)
			return err
		})
		if err != nil {
			return s.b.fail(s.auth.Method+" login", path, err)
		}
		if sec == nil || sec.Auth == nil || sec.Auth.ClientToken == "" {
			return fmt.Errorf("hashivault: %s login at %s returned no token", s.auth.Method, path)
		}
		tok, renewable = sec.Auth.ClientToken, sec.Auth.Renewable
		ttl = time.Duration(sec.Auth.LeaseDuration) * time.Second
		increment = ttl
	}
	// The client sends the new token before callers can record it as the
	// one they used.
	s.b.client.SetToken(tok)
	s.mu.Lock()
	s.token, s.obtained, s.ttl, s.increment, s.renewable = tok, time.Now(), ttl, increment, renewable
	s.mu.Unlock()
	s.b.log.Info("hashivault: logged in", "method", s.auth.Method, "ttl", ttl, "renewable", renewable)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// staticToken is the configured token, or the token file's content, read
// anew each time (a Vault Agent sink rewrites it).
func (s *session) staticToken() (string, error) {
	if s.auth.TokenFile == "" {
		return s.auth.Token, nil
	}
	data, err := secretfile.ReadFile(s.auth.TokenFile, maxSecretFile)
	if err != nil {
		return "", fmt.Errorf("hashivault: token file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	clear(data)
	if tok == "" {
		return "", fmt.Errorf("hashivault: token file %s is empty", s.auth.TokenFile)
	}
	return tok, nil
}

// loginRequest is the path and body of an AppRole or Kubernetes login.
func (s *session) loginRequest() (string, map[string]any, error) {
	path := "auth/" + strings.Trim(s.auth.MountPath, "/") + "/login"
	if s.auth.Method == AuthAppRole {
		return path, map[string]any{"role_id": s.auth.RoleID, "secret_id": s.auth.SecretID}, nil
	}
	// Read at every login: kubelet rotates projected service account tokens.
	jwt, err := secretfile.ReadFile(s.auth.JWTFile, maxSecretFile)
	if err != nil {
		return "", nil, fmt.Errorf("hashivault: Kubernetes auth: service account token: %w", err)
	}
	return path, map[string]any{"role": s.auth.Role, "jwt": strings.TrimSpace(string(jwt))}, nil
}

// renewLoop keeps the token alive until ctx ends: it renews at two thirds
// of the lease, and logs in again when the token cannot be renewed (any
// more). Failures are retried every tenth of the lease, at least every 30s.
func (s *session) renewLoop(ctx context.Context) {
	for {
		s.mu.Lock()
		tok, obtained, ttl, renewable := s.token, s.obtained, s.ttl, s.renewable
		s.mu.Unlock()
		var timer <-chan time.Time
		var t *time.Timer
		// A static token that cannot be renewed is used until it expires:
		// there is nothing to plan for it.
		if tok != "" && ttl > 0 && (renewable || s.canLogin()) {
			t = time.NewTimer(time.Until(obtained.Add(ttl * 2 / 3)))
			timer = t.C
		}
		stop := func() {
			if t != nil {
				t.Stop()
			}
		}
		select {
		case <-ctx.Done():
			stop()
			return
		case <-s.wake:
			stop()
			continue
		case <-timer:
		}
		if err := s.refresh(ctx, tok); err != nil && ctx.Err() == nil {
			s.b.log.Warn("hashivault: token not renewed; will retry", "method", s.auth.Method, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(30*time.Second, max(ttl/10, time.Second))):
			}
		}
	}
}

// refresh renews tok, or logs in again when it cannot be renewed. The
// renewal is sent without the lock, so signing goes on meanwhile.
func (s *session) refresh(ctx context.Context, tok string) error {
	s.mu.Lock()
	increment, renewable := s.increment, s.renewable
	s.mu.Unlock()
	if renewable {
		var sec *api.Secret
		err := s.b.do(ctx, call{op: "token renew-self", key: "auth/token/renew-self", idempotent: true}, func(ctx context.Context) error {
			var err error
			sec, err = s.b.client.Auth().Token().RenewSelfWithContext(ctx, int(increment/time.Second))
			return err
		})
		if err == nil && (sec == nil || sec.Auth == nil) {
			err = errors.New("renew-self returned no auth")
		}
		if err == nil {
			got := time.Duration(sec.Auth.LeaseDuration) * time.Second
			// A renewal that gives less than half of the token's TTL has
			// reached its max TTL: log in again before it ends.
			if got > 0 && (got >= increment/2 || !s.canLogin()) {
				s.mu.Lock()
				if s.token == tok {
					s.obtained, s.ttl, s.renewable = time.Now(), got, sec.Auth.Renewable
				}
				s.mu.Unlock()
				s.b.log.Debug("hashivault: token renewed", "ttl", got)
				return nil
			}
		} else if !s.canLogin() {
			return err
		}
	}
	if !s.canLogin() {
		return nil
	}
	return s.get(ctx, tok)
}
