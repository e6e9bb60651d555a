package gcpkmsfake

import (
	"context"
	"slices"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// service implements the KeyManagementService methods the gcpkms backend
// uses; the others answer UNIMPLEMENTED.
type service struct {
	kmspb.UnimplementedKeyManagementServiceServer
	store  *store
	faults *faults
}

func (s *service) GetCryptoKey(_ context.Context, req *kmspb.GetCryptoKeyRequest) (*kmspb.CryptoKey, error) {
	k, err := s.store.key(req.GetName())
	if err != nil {
		return nil, err
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	return k.proto(), nil
}

func (s *service) GetCryptoKeyVersion(_ context.Context, req *kmspb.GetCryptoKeyVersionRequest) (*kmspb.CryptoKeyVersion, error) {
	v, st, err := s.store.version(req.GetName())
	if err != nil {
		return nil, err
	}
	return v.proto(st), nil
}

func (s *service) GetPublicKey(_ context.Context, req *kmspb.GetPublicKeyRequest) (*kmspb.PublicKey, error) {
	if req.GetPublicKeyFormat() != kmspb.PublicKey_PUBLIC_KEY_FORMAT_UNSPECIFIED && req.GetPublicKeyFormat() != kmspb.PublicKey_PEM {
		return nil, status.Errorf(codes.InvalidArgument, "gcpkmsfake serves PEM public keys only, not %s", req.GetPublicKeyFormat())
	}
	v, err := s.store.usable(req.GetName())
	if err != nil {
		return nil, err
	}
	if purposeOf(v.alg) != kmspb.CryptoKey_ASYMMETRIC_SIGN {
		return nil, status.Errorf(codes.FailedPrecondition, "CryptoKeyVersion %s is not asymmetric", v.name)
	}
	o := s.faults.snapshot()
	crc := crc32c([]byte(v.pem))
	if o.CorruptCRC {
		crc ^= 1
	}
	name := v.name
	if o.WrongName {
		name = otherName(name)
	}
	return &kmspb.PublicKey{
		Pem:             v.pem,
		Algorithm:       v.alg,
		PemCrc32C:       wrapperspb.Int64(crc),
		Name:            name,
		ProtectionLevel: kmspb.ProtectionLevel_SOFTWARE,
	}, nil
}

func (s *service) CreateCryptoKeyVersion(_ context.Context, req *kmspb.CreateCryptoKeyVersionRequest) (*kmspb.CryptoKeyVersion, error) {
	if req.GetCryptoKeyVersion() == nil {
		return nil, status.Error(codes.InvalidArgument, "crypto_key_version is required")
	}
	if st := req.GetCryptoKeyVersion().GetState(); st != kmspb.CryptoKeyVersion_CRYPTO_KEY_VERSION_STATE_UNSPECIFIED &&
		st != kmspb.CryptoKeyVersion_ENABLED && st != kmspb.CryptoKeyVersion_DISABLED {
		return nil, status.Errorf(codes.InvalidArgument, "a new CryptoKeyVersion cannot be created in state %s", st)
	}
	v, err := s.store.addVersion(req.GetParent(), s.faults.snapshot().Pending)
	if err != nil {
		return nil, err
	}
	if req.GetCryptoKeyVersion().GetState() == kmspb.CryptoKeyVersion_DISABLED {
		if v, err = s.store.setState(v.name, kmspb.CryptoKeyVersion_DISABLED, true); err != nil {
			return nil, err
		}
	}
	_, st, err := s.store.version(v.name)
	if err != nil {
		return nil, err
	}
	return v.proto(st), nil
}

func (s *service) UpdateCryptoKeyVersion(_ context.Context, req *kmspb.UpdateCryptoKeyVersionRequest) (*kmspb.CryptoKeyVersion, error) {
	if req.GetCryptoKeyVersion() == nil {
		return nil, status.Error(codes.InvalidArgument, "crypto_key_version is required")
	}
	if paths := req.GetUpdateMask().GetPaths(); !slices.Equal(paths, []string{"state"}) {
		return nil, status.Errorf(codes.InvalidArgument, "gcpkmsfake updates the state only (update_mask paths [\"state\"], got %q)", paths)
	}
	v, err := s.store.setState(req.GetCryptoKeyVersion().GetName(), req.GetCryptoKeyVersion().GetState(), false)
	if err != nil {
		return nil, err
	}
	_, st, err := s.store.version(v.name)
	if err != nil {
		return nil, err
	}
	return v.proto(st), nil
}
