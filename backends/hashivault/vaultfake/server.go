package vaultfake

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server is a running fake Vault.
type Server struct {
	lis     net.Listener
	http    *http.Server
	faults  *faults
	e       *engine
	root    string
	closing chan struct{} // closed by Close, to end latency waits
	done    chan struct{} // closed when Serve has returned
	once    sync.Once
}

// engine is the fake's state and the handlers of its endpoints, apart
// from Server, whose methods are the fake's API.
type engine struct {
	keys   *keyStore
	tokens *tokenStore
	acl    *aclStore
	roles  *roleStore
}

// Start serves a fake Vault over plain HTTP on a free loopback port, with
// opts. It has no keys, roles or policies but "default"; it has a root
// token (RootToken).
func Start(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("vaultfake: listen: %w", err)
	}
	s := &Server{
		lis:     lis,
		faults:  &faults{opts: opts, calls: map[string]int{}},
		e:       &engine{keys: newKeyStore(), tokens: newTokenStore(), acl: newACLStore(), roles: newRoleStore()},
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	s.root = s.e.tokens.issueRoot().id
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		// Serve returns http.ErrServerClosed once Close has run, and
		// nothing else can make it return on a listener it owns.
		_ = s.http.Serve(lis)
	}()
	return s, nil
}

// URL is the server's address, http://127.0.0.1:PORT, as a client's
// Address (BAO_ADDR, VAULT_ADDR).
func (s *Server) URL() string { return "http://" + s.lis.Addr().String() }

// Close stops the server at once, dropping calls in progress, and waits
// for it to stop.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closing)
		err = s.http.Close()
	})
	<-s.done
	return err
}

// Update changes the options while the server runs. A change that makes
// them invalid (a throttle rate outside 0..1, a negative duration or
// count) is refused and nothing changes.
func (s *Server) Update(change func(*Options)) error { return s.faults.update(change) }

// Options returns the current options; Unavailable and InternalErrors
// count down as calls use them up.
func (s *Server) Options() Options { return s.faults.snapshot() }

// Calls returns how many calls of op reached the server, failed by an
// injected fault, refused or not. The ops are "Login" (both methods),
// "Renew", "LookupSelf", "ReadKey", "CreateKey", "Rotate", "Trim",
// "Config" and "Sign". Calls the helpers make are not counted.
func (s *Server) Calls(op string) int { return s.faults.count(op) }

// RootToken is a root token: every policy check passes, it never expires,
// and it belongs to the root namespace.
func (s *Server) RootToken() string { return s.root }
