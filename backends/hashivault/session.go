//go:build !novault

package hashivault

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/cardsign/cardsign/secretfile"
)

// session holds the backend's Vault token: it logs in (or looks up a
// given token) at the first call, renews the token at two thirds of its
// lease, and logs in again when renewal is refused or the token's max TTL
// ends. A static token that cannot be renewed is used until it expires;
// its errors then say so.
type session struct {
	b    *Backend
	auth Auth

	mu        sync.Mutex
	token     string
	obtained  time.Time
	ttl       time.Duration // 0: never expires
	renewable bool
	wake      chan struct{} // a new token: the renewal loop re-plans
}

func newSession(b *Backend, a Auth) (*session, error) {
	a.Method = cmp.Or(a.Method, AuthToken)
	switch a.Method {
	case AuthToken:
		a.Token = cmp.Or(a.Token, api.ReadBaoVariable(api.EnvVaultToken))
		if a.Token == "" {
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

// canLogin reports whether the session can get a new token by itself.
func (s *session) canLogin() bool { return s.auth.Method != AuthToken }

// ensure returns a token that is valid for a while yet, logging in (or
// looking the configured token up) when there is none.
func (s *session) ensure(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && (s.ttl == 0 || time.Since(s.obtained) < s.ttl-time.Second) {
		return nil
	}
	if s.token != "" && !s.canLogin() {
		return fmt.Errorf("hashivault: the configured token expired %v ago and cannot be renewed: give the backend a new token, or use approle or kubernetes auth",
			time.Since(s.obtained.Add(s.ttl)).Round(time.Second))
	}
	if err := s.loginLocked(ctx); err != nil {
		if _, ok := err.(*UnavailableError); ok {
			return err
		}
		return &LoginError{Method: s.auth.Method, Err: err}
	}
	return nil
}

// invalidate drops the token after Vault refused it (403), so that the
// next call logs in again; a static token is kept, as there is no other.
func (s *session) invalidate(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.canLogin() || s.token != token {
		return false
	}
	s.token = ""
	return true
}

// current is the token in use.
func (s *session) current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// loginLocked gets a token: logs in with AppRole or Kubernetes, or looks
// up the static token to learn its TTL.
func (s *session) loginLocked(ctx context.Context) error {
	c, err := s.b.client.Clone() // no token: a login must not send a stale one
	if err != nil {
		return fmt.Errorf("hashivault: login: %w", err)
	}
	c.SetNamespace(s.b.cfg.Namespace)
	var tok string
	var ttl time.Duration
	var renewable bool
	switch s.auth.Method {
	case AuthToken:
		c.SetToken(s.auth.Token)
		var sec *api.Secret
		err = s.b.do(ctx, call{op: "token lookup-self", key: "auth/token/lookup-self", idempotent: true}, func(ctx context.Context) error {
			var err error
			sec, err = c.Auth().Token().LookupSelfWithContext(ctx)
			return err
		})
		if err != nil {
			return s.b.fail("token lookup-self", "auth/token/lookup-self", err)
		}
		tok = s.auth.Token
		if ttl, err = sec.TokenTTL(); err != nil {
			return fmt.Errorf("hashivault: token lookup-self: ttl: %w", err)
		}
		if renewable, err = sec.TokenIsRenewable(); err != nil {
			return fmt.Errorf("hashivault: token lookup-self: renewable: %w", err)
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
	}
	s.token, s.obtained, s.ttl, s.renewable = tok, time.Now(), ttl, renewable
	s.b.client.SetToken(tok)
	s.b.log.Info("hashivault: logged in", "method", s.auth.Method, "ttl", ttl, "renewable", renewable)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// loginRequest is the path and body of an AppRole or Kubernetes login.
func (s *session) loginRequest() (string, map[string]any, error) {
	path := "auth/" + strings.Trim(s.auth.MountPath, "/") + "/login"
	if s.auth.Method == AuthAppRole {
		return path, map[string]any{"role_id": s.auth.RoleID, "secret_id": s.auth.SecretID}, nil
	}
	// Read at every login: kubelet rotates projected service account tokens.
	jwt, err := secretfile.ReadFile(s.auth.JWTFile, 64<<10)
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
		if err := s.refresh(ctx); err != nil && ctx.Err() == nil {
			s.b.log.Warn("hashivault: token not renewed; will retry", "method", s.auth.Method, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(30*time.Second, max(ttl/10, time.Second))):
			}
		}
	}
}

// refresh renews the token, or logs in again when it cannot be renewed.
// The renewal is sent without the lock, so signing goes on meanwhile.
func (s *session) refresh(ctx context.Context) error {
	s.mu.Lock()
	tok, ttl, renewable := s.token, s.ttl, s.renewable
	s.mu.Unlock()
	if renewable {
		var sec *api.Secret
		err := s.b.do(ctx, call{op: "token renew-self", key: "auth/token/renew-self", idempotent: true}, func(ctx context.Context) error {
			var err error
			sec, err = s.b.client.Auth().Token().RenewSelfWithContext(ctx, int(ttl/time.Second))
			return err
		})
		if err == nil && (sec == nil || sec.Auth == nil) {
			err = errors.New("renew-self returned no auth")
		}
		if err == nil {
			got := time.Duration(sec.Auth.LeaseDuration) * time.Second
			// A renewal that gives less than half of what was asked has
			// reached the token's max TTL: log in again before it ends.
			if got >= ttl/2 || !s.canLogin() {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.canLogin() {
		return nil
	}
	return s.loginLocked(ctx)
}
