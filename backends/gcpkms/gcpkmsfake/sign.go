package gcpkmsfake

import (
	"context"
	"crypto/rand"
	"hash/crc32"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// AsymmetricSign signs with the version's real private key. EC and RSA
// versions take a digest of their algorithm's hash (or data, which they
// hash); Ed25519 takes data only. Request checksums are verified when
// present: a mismatch is INVALID_ARGUMENT, as in Cloud KMS.
func (s *service) AsymmetricSign(_ context.Context, req *kmspb.AsymmetricSignRequest) (*kmspb.AsymmetricSignResponse, error) {
	v, err := s.store.usable(req.GetName())
	if err != nil {
		return nil, err
	}
	if purposeOf(v.alg) != kmspb.CryptoKey_ASYMMETRIC_SIGN {
		return nil, status.Errorf(codes.FailedPrecondition, "CryptoKeyVersion %s cannot sign: algorithm %s", v.name, v.alg)
	}
	if req.GetDigest() != nil && req.GetData() != nil {
		return nil, status.Error(codes.InvalidArgument, "only one of digest and data may be set")
	}
	if err := checkCRC("data", req.GetData(), req.GetDataCrc32C()); err != nil {
		return nil, err
	}
	msg := req.GetData()
	switch {
	case v.spec.kind == kindEd25519 && req.GetDigest() != nil:
		return nil, status.Errorf(codes.InvalidArgument, "%s signs data, not a digest", v.alg)
	case v.spec.kind == kindEd25519:
		// PureEdDSA: the data itself.
	case req.GetDigest() != nil:
		if msg, err = digestFor(v, req.GetDigest()); err != nil {
			return nil, err
		}
		if err := checkCRC("digest", msg, req.GetDigestCrc32C()); err != nil {
			return nil, err
		}
	default:
		h := v.spec.hash.New()
		h.Write(msg)
		msg = h.Sum(nil)
	}
	sig, err := v.signer.Sign(rand.Reader, msg, v.spec.signerOpts())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "gcpkmsfake: sign: %v", err)
	}

	o := s.faults.snapshot()
	resp := &kmspb.AsymmetricSignResponse{
		Signature:            sig,
		SignatureCrc32C:      wrapperspb.Int64(crc32c(sig)),
		VerifiedDigestCrc32C: req.GetDigestCrc32C() != nil,
		VerifiedDataCrc32C:   req.GetDataCrc32C() != nil,
		Name:                 v.name,
		ProtectionLevel:      kmspb.ProtectionLevel_SOFTWARE,
	}
	if o.CorruptCRC {
		resp.SignatureCrc32C = wrapperspb.Int64(resp.SignatureCrc32C.Value ^ 1)
	}
	if o.IgnoreCRC {
		resp.VerifiedDigestCrc32C, resp.VerifiedDataCrc32C = false, false
	}
	if o.WrongName {
		resp.Name = otherName(v.name)
	}
	return resp, nil
}

// digestFor returns the digest of d that v's algorithm signs, refusing
// another hash or a wrong length.
func digestFor(v *version, d *kmspb.Digest) ([]byte, error) {
	var got []byte
	switch v.spec.hash.Size() {
	case 32:
		got = d.GetSha256()
	case 48:
		got = d.GetSha384()
	case 64:
		got = d.GetSha512()
	}
	if got == nil {
		return nil, status.Errorf(codes.InvalidArgument, "the digest must be %v for algorithm %s", v.spec.hash, v.alg)
	}
	if len(got) != v.spec.hash.Size() {
		return nil, status.Errorf(codes.InvalidArgument, "the %v digest is %d bytes, want %d", v.spec.hash, len(got), v.spec.hash.Size())
	}
	return got, nil
}

// checkCRC verifies an optional request checksum.
func checkCRC(field string, b []byte, want *wrapperspb.Int64Value) error {
	if want == nil || crc32c(b) == want.GetValue() {
		return nil
	}
	return status.Errorf(codes.InvalidArgument, "The checksum in field %s_crc32c did not match the data in field %s.", field, field)
}

// crc32c is the Castagnoli CRC Cloud KMS uses for its integrity fields.
func crc32c(b []byte) int64 {
	return int64(crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}
