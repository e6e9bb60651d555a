package gcpkmsfake

import (
	"fmt"
	"net"
	"sync"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/grpc"
)

// Server is a running fake Cloud KMS.
type Server struct {
	lis    net.Listener
	grpc   *grpc.Server
	svc    *service
	faults *faults
	done   chan struct{}
	once   sync.Once
}

// Start serves a fake Cloud KMS on a free loopback port with opts as its
// initial faults. It has no keys: add them with AddKey.
func Start(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gcpkmsfake: listen: %w", err)
	}
	f := &faults{opts: opts, calls: map[string]int{}}
	s := &Server{
		lis:    lis,
		grpc:   grpc.NewServer(grpc.UnaryInterceptor(f.intercept)),
		svc:    &service{store: newStore(), faults: f},
		faults: f,
		done:   make(chan struct{}),
	}
	kmspb.RegisterKeyManagementServiceServer(s.grpc, s.svc)
	go func() {
		defer close(s.done)
		// Serve only fails once the listener is closed, which Close does.
		_ = s.grpc.Serve(lis)
	}()
	return s, nil
}

// Addr is the server's host:port on the loopback interface.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close stops the server at once, failing calls in progress, and waits for
// it to stop.
func (s *Server) Close() error {
	s.once.Do(s.grpc.Stop)
	<-s.done
	return nil
}

// Update changes the faults while the server runs. A change that makes
// them invalid (a throttle rate outside 0..1, a negative duration or count)
// is refused and nothing changes.
func (s *Server) Update(change func(*Options)) error { return s.faults.update(change) }

// Options returns the current faults; Unavailable counts down as calls use
// it up.
func (s *Server) Options() Options { return s.faults.snapshot() }

// Calls returns how many calls of method (e.g. "AsymmetricSign") reached
// the server, failed by an injected fault or not.
func (s *Server) Calls(method string) int {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.calls[method]
}

// AddKey creates the CryptoKey cryptoKey (projects/P/locations/L/keyRings/
// R/cryptoKeys/K; the key ring need not exist) with alg as its version
// template and the purpose alg belongs to, and its first version, ENABLED,
// whose name it returns. Algorithms the fake cannot implement (secp256k1,
// symmetric ones) make versions that exist but cannot be used.
func (s *Server) AddKey(cryptoKey string, alg Algorithm) (string, error) {
	if _, err := s.svc.store.addKey(cryptoKey, alg); err != nil {
		return "", fmt.Errorf("gcpkmsfake: add key: %w", err)
	}
	return s.AddVersion(cryptoKey)
}

// AddVersion adds an ENABLED version of cryptoKey, of its template
// algorithm, and returns its name.
func (s *Server) AddVersion(cryptoKey string) (string, error) {
	v, err := s.svc.store.addVersion(cryptoKey, 0)
	if err != nil {
		return "", fmt.Errorf("gcpkmsfake: add version: %w", err)
	}
	return v.name, nil
}

// SetTemplate changes the algorithm of cryptoKey's version template, for
// versions created after it.
func (s *Server) SetTemplate(cryptoKey string, alg Algorithm) error {
	k, err := s.svc.store.key(cryptoKey)
	if err != nil {
		return fmt.Errorf("gcpkmsfake: set template: %w", err)
	}
	s.svc.store.mu.Lock()
	defer s.svc.store.mu.Unlock()
	k.template = alg
	return nil
}

// SetState puts a version in any state (DESTROYED, DISABLED, ...), without
// the rules UpdateCryptoKeyVersion enforces.
func (s *Server) SetState(version string, st State) error {
	if _, err := s.svc.store.setState(version, st, true); err != nil {
		return fmt.Errorf("gcpkmsfake: set state: %w", err)
	}
	return nil
}

// State returns the state of version now.
func (s *Server) State(version string) (State, error) {
	_, st, err := s.svc.store.version(version)
	if err != nil {
		return 0, fmt.Errorf("gcpkmsfake: state: %w", err)
	}
	return st, nil
}

// Disabled reports whether version exists and is DISABLED now, as after
// UpdateCryptoKeyVersion disabled it.
func (s *Server) Disabled(version string) bool {
	st, err := s.State(version)
	return err == nil && st == kmspb.CryptoKeyVersion_DISABLED
}

// Versions returns the names of cryptoKey's versions, oldest first.
func (s *Server) Versions(cryptoKey string) ([]string, error) {
	k, err := s.svc.store.key(cryptoKey)
	if err != nil {
		return nil, fmt.Errorf("gcpkmsfake: versions: %w", err)
	}
	s.svc.store.mu.Lock()
	defer s.svc.store.mu.Unlock()
	names := make([]string, len(k.versions))
	for i, v := range k.versions {
		names[i] = v.name
	}
	return names, nil
}

// State is a CryptoKeyVersion state, such as kmspb.CryptoKeyVersion_DISABLED.
type State = kmspb.CryptoKeyVersion_CryptoKeyVersionState
