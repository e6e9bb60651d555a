package gcpkmsfake

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// store holds the key rings' CryptoKeys and their versions. Key material is
// immutable once made; states change under mu.
type store struct {
	mu   sync.Mutex
	keys map[string]*cryptoKey // by CryptoKey name
}

type cryptoKey struct {
	name     string
	purpose  kmspb.CryptoKey_CryptoKeyPurpose
	template Algorithm
	created  time.Time
	versions []*version // version n is versions[n-1]
}

type version struct {
	name    string
	alg     Algorithm
	spec    algSpec
	signer  crypto.Signer // nil when the fake cannot implement alg
	pem     string        // "" when signer is nil
	created time.Time

	// Guarded by store.mu. A version made while Options.Pending was set is
	// PENDING_GENERATION until readyAt, as an HSM key is at first.
	state   kmspb.CryptoKeyVersion_CryptoKeyVersionState
	readyAt time.Time
}

func newStore() *store { return &store{keys: map[string]*cryptoKey{}} }

// newVersion makes the key material of a version of alg; it is slow for RSA,
// so it runs outside the lock.
func newVersion(alg Algorithm) (*version, error) {
	spec := specOf(alg)
	signer, err := spec.generate()
	if err != nil {
		return nil, err
	}
	v := &version{alg: alg, spec: spec, signer: signer, created: time.Now(), state: kmspb.CryptoKeyVersion_ENABLED}
	if signer != nil {
		der, err := x509.MarshalPKIXPublicKey(signer.Public())
		if err != nil {
			return nil, fmt.Errorf("gcpkmsfake: public key: %w", err)
		}
		v.pem = string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	}
	return v, nil
}

// addKey creates a CryptoKey whose version template is alg. It is
// ALREADY_EXISTS if the key exists.
func (s *store) addKey(name string, alg Algorithm) (*cryptoKey, error) {
	if err := checkKeyName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "CryptoKey %s already exists", name)
	}
	k := &cryptoKey{name: name, purpose: purposeOf(alg), template: alg, created: time.Now()}
	s.keys[name] = k
	return k, nil
}

// addVersion adds a new version of the CryptoKey named key, of its template
// algorithm, PENDING_GENERATION for pending and ENABLED after that.
func (s *store) addVersion(key string, pending time.Duration) (*version, error) {
	if err := checkKeyName(key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	k, ok := s.keys[key]
	s.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "CryptoKey %s not found.", key)
	}
	v, err := newVersion(k.template)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k.versions = append(k.versions, v)
	v.name = versionName(key, len(k.versions))
	if pending > 0 {
		v.state = kmspb.CryptoKeyVersion_PENDING_GENERATION
		v.readyAt = v.created.Add(pending)
	}
	return v, nil
}

// key returns the CryptoKey called name: INVALID_ARGUMENT or NOT_FOUND.
func (s *store) key(name string) (*cryptoKey, error) {
	if err := checkKeyName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "CryptoKey %s not found.", name)
	}
	return k, nil
}

// version returns the version called name and its state now:
// INVALID_ARGUMENT or NOT_FOUND.
func (s *store) version(name string) (*version, kmspb.CryptoKeyVersion_CryptoKeyVersionState, error) {
	key, err := splitVersionName(name)
	if err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.keys[key]; ok {
		for _, v := range k.versions {
			if v.name == name {
				return v, v.stateLocked(time.Now()), nil
			}
		}
	}
	return nil, 0, status.Errorf(codes.NotFound, "CryptoKeyVersion %s not found.", name)
}

// usable returns the version called name if it can be used for a
// cryptographic operation or to read its public key: it must be ENABLED,
// and the fake must hold its key material.
func (s *store) usable(name string) (*version, error) {
	v, st, err := s.version(name)
	if err != nil {
		return nil, err
	}
	if st != kmspb.CryptoKeyVersion_ENABLED {
		return nil, status.Errorf(codes.FailedPrecondition, "The request cannot be fulfilled. Resource %s is not enabled, current state is: %s.", name, st)
	}
	if v.signer == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "CryptoKeyVersion %s has algorithm %s, which gcpkmsfake cannot sign with", name, v.alg)
	}
	return v, nil
}

// setState changes the state of the version called name, as
// UpdateCryptoKeyVersion does: only between ENABLED and DISABLED; the
// helper SetState (force) may set any state.
func (s *store) setState(name string, to kmspb.CryptoKeyVersion_CryptoKeyVersionState, force bool) (*version, error) {
	v, _, err := s.version(name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	from := v.stateLocked(time.Now())
	if !force {
		if to != kmspb.CryptoKeyVersion_ENABLED && to != kmspb.CryptoKeyVersion_DISABLED {
			return nil, status.Errorf(codes.InvalidArgument, "CryptoKeyVersion state can only be updated to ENABLED or DISABLED, not %s", to)
		}
		if from != kmspb.CryptoKeyVersion_ENABLED && from != kmspb.CryptoKeyVersion_DISABLED {
			return nil, status.Errorf(codes.FailedPrecondition, "CryptoKeyVersion %s is %s; its state cannot be updated", name, from)
		}
	}
	v.state, v.readyAt = to, time.Time{}
	return v, nil
}

// stateLocked is v's state at now; a pending version becomes ENABLED once
// its generation time has passed. The caller holds store.mu.
func (v *version) stateLocked(now time.Time) kmspb.CryptoKeyVersion_CryptoKeyVersionState {
	if v.state == kmspb.CryptoKeyVersion_PENDING_GENERATION && !v.readyAt.IsZero() && !now.Before(v.readyAt) {
		v.state = kmspb.CryptoKeyVersion_ENABLED
	}
	return v.state
}

// proto renders v in state st.
func (v *version) proto(st kmspb.CryptoKeyVersion_CryptoKeyVersionState) *kmspb.CryptoKeyVersion {
	return &kmspb.CryptoKeyVersion{
		Name:            v.name,
		State:           st,
		ProtectionLevel: kmspb.ProtectionLevel_SOFTWARE,
		Algorithm:       v.alg,
		CreateTime:      timestamppb.New(v.created),
	}
}

// proto renders k.
func (k *cryptoKey) proto() *kmspb.CryptoKey {
	return &kmspb.CryptoKey{
		Name:    k.name,
		Purpose: k.purpose,
		VersionTemplate: &kmspb.CryptoKeyVersionTemplate{
			ProtectionLevel: kmspb.ProtectionLevel_SOFTWARE,
			Algorithm:       k.template,
		},
		CreateTime: timestamppb.New(k.created),
	}
}
