package gcpkmsfake

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"
	"time"

	kms "cloud.google.com/go/kms/apiv1"
	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The fake is checked with the real client library, with its retries off
// so every injected fault is seen.

const testKey = "projects/p/locations/global/keyRings/r/cryptoKeys/"

func start(t *testing.T, opts Options) (*Server, *kms.KeyManagementClient) {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := kms.NewKeyManagementClient(t.Context(), option.WithEndpoint(s.Addr()), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	c.CallOptions = &kms.KeyManagementCallOptions{}
	t.Cleanup(func() { c.Close() })
	return s, c
}

func crc(b []byte) *wrapperspb.Int64Value { return wrapperspb.Int64(crc32c(b)) }

func publicKey(t *testing.T, c *kms.KeyManagementClient, name string) crypto.PublicKey {
	t.Helper()
	pk, err := c.GetPublicKey(t.Context(), &kmspb.GetPublicKeyRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if pk.GetName() != name || pk.GetPemCrc32C().GetValue() != crc32c([]byte(pk.GetPem())) {
		t.Fatalf("public key %v", pk)
	}
	block, _ := pem.Decode([]byte(pk.GetPem()))
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// TestSignVerify signs with each implemented algorithm and verifies with
// the public key the fake serves.
func TestSignVerify(t *testing.T) {
	s, c := start(t, Options{})
	msg := []byte("eyJhbGciOiJFUzI1NiJ9.e30")
	d256, d384 := sha256.Sum256(msg), sha512.Sum384(msg)
	tests := []struct {
		alg    Algorithm
		req    *kmspb.AsymmetricSignRequest
		verify func(pub crypto.PublicKey, sig []byte) bool
	}{
		{kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256,
			&kmspb.AsymmetricSignRequest{Digest: &kmspb.Digest{Digest: &kmspb.Digest_Sha256{Sha256: d256[:]}}, DigestCrc32C: crc(d256[:])},
			func(pub crypto.PublicKey, sig []byte) bool {
				return ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), d256[:], sig)
			}},
		{kmspb.CryptoKeyVersion_EC_SIGN_P384_SHA384,
			&kmspb.AsymmetricSignRequest{Digest: &kmspb.Digest{Digest: &kmspb.Digest_Sha384{Sha384: d384[:]}}, DigestCrc32C: crc(d384[:])},
			func(pub crypto.PublicKey, sig []byte) bool {
				return ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), d384[:], sig)
			}},
		{kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256, // data, hashed by the service
			&kmspb.AsymmetricSignRequest{Data: msg, DataCrc32C: crc(msg)},
			func(pub crypto.PublicKey, sig []byte) bool {
				return ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), d256[:], sig)
			}},
		{kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_2048_SHA256,
			&kmspb.AsymmetricSignRequest{Digest: &kmspb.Digest{Digest: &kmspb.Digest_Sha256{Sha256: d256[:]}}},
			func(pub crypto.PublicKey, sig []byte) bool {
				return rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, d256[:], sig) == nil
			}},
		{kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256,
			&kmspb.AsymmetricSignRequest{Digest: &kmspb.Digest{Digest: &kmspb.Digest_Sha256{Sha256: d256[:]}}},
			func(pub crypto.PublicKey, sig []byte) bool {
				// The salt is the digest length, as in Cloud KMS.
				return rsa.VerifyPSS(pub.(*rsa.PublicKey), crypto.SHA256, d256[:], sig, &rsa.PSSOptions{SaltLength: 32}) == nil
			}},
		{kmspb.CryptoKeyVersion_EC_SIGN_ED25519,
			&kmspb.AsymmetricSignRequest{Data: msg, DataCrc32C: crc(msg)},
			func(pub crypto.PublicKey, sig []byte) bool { return ed25519.Verify(pub.(ed25519.PublicKey), msg, sig) }},
	}
	for i, tt := range tests {
		name, err := s.AddKey(testKey+"k"+string(rune('a'+i)), tt.alg)
		if err != nil {
			t.Fatal(err)
		}
		pub := publicKey(t, c, name)
		tt.req.Name = name
		resp, err := c.AsymmetricSign(t.Context(), tt.req)
		if err != nil {
			t.Errorf("%v: %v", tt.alg, err)
			continue
		}
		if !tt.verify(pub, resp.GetSignature()) {
			t.Errorf("%v: signature does not verify", tt.alg)
		}
		if resp.GetName() != name || resp.GetSignatureCrc32C().GetValue() != crc32c(resp.GetSignature()) ||
			resp.GetVerifiedDigestCrc32C() != (tt.req.DigestCrc32C != nil) || resp.GetVerifiedDataCrc32C() != (tt.req.DataCrc32C != nil) {
			t.Errorf("%v: integrity fields %v", tt.alg, resp)
		}
	}
}

// TestRefusals checks the answers the backend's error handling relies on.
func TestRefusals(t *testing.T) {
	s, c := start(t, Options{})
	p256, _ := s.AddKey(testKey+"p256", kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	ed, _ := s.AddKey(testKey+"ed", kmspb.CryptoKeyVersion_EC_SIGN_ED25519)
	off, _ := s.AddKey(testKey+"off", kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	s.SetState(off, kmspb.CryptoKeyVersion_DISABLED)
	d := make([]byte, 32)
	sha256d := &kmspb.Digest{Digest: &kmspb.Digest_Sha256{Sha256: d}}
	sign := func(r *kmspb.AsymmetricSignRequest) error { _, err := c.AsymmetricSign(t.Context(), r); return err }

	tests := []struct {
		name string
		err  error
		code codes.Code
	}{
		{"bad digest CRC", sign(&kmspb.AsymmetricSignRequest{Name: p256, Digest: sha256d, DigestCrc32C: wrapperspb.Int64(1)}), codes.InvalidArgument},
		{"bad data CRC", sign(&kmspb.AsymmetricSignRequest{Name: ed, Data: d, DataCrc32C: wrapperspb.Int64(1)}), codes.InvalidArgument},
		{"digest for Ed25519", sign(&kmspb.AsymmetricSignRequest{Name: ed, Digest: sha256d}), codes.InvalidArgument},
		{"SHA-384 for P-256", sign(&kmspb.AsymmetricSignRequest{Name: p256, Digest: &kmspb.Digest{Digest: &kmspb.Digest_Sha384{Sha384: make([]byte, 48)}}}), codes.InvalidArgument},
		{"short digest", sign(&kmspb.AsymmetricSignRequest{Name: p256, Digest: &kmspb.Digest{Digest: &kmspb.Digest_Sha256{Sha256: d[:16]}}}), codes.InvalidArgument},
		{"disabled", sign(&kmspb.AsymmetricSignRequest{Name: off, Digest: sha256d}), codes.FailedPrecondition},
		{"missing", sign(&kmspb.AsymmetricSignRequest{Name: testKey + "p256/cryptoKeyVersions/2", Digest: sha256d}), codes.NotFound},
		{"malformed", sign(&kmspb.AsymmetricSignRequest{Name: "projects/p", Digest: sha256d}), codes.InvalidArgument},
		{"public key of disabled", func() error {
			_, err := c.GetPublicKey(t.Context(), &kmspb.GetPublicKeyRequest{Name: off})
			return err
		}(), codes.FailedPrecondition},
		{"update other field", func() error {
			_, err := c.UpdateCryptoKeyVersion(t.Context(), &kmspb.UpdateCryptoKeyVersionRequest{
				CryptoKeyVersion: &kmspb.CryptoKeyVersion{Name: p256}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"algorithm"}}})
			return err
		}(), codes.InvalidArgument},
		{"update to destroyed", func() error {
			_, err := c.UpdateCryptoKeyVersion(t.Context(), &kmspb.UpdateCryptoKeyVersionRequest{
				CryptoKeyVersion: &kmspb.CryptoKeyVersion{Name: p256, State: kmspb.CryptoKeyVersion_DESTROYED}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"state"}}})
			return err
		}(), codes.InvalidArgument},
		{"create in missing key", func() error {
			_, err := c.CreateCryptoKeyVersion(t.Context(), &kmspb.CreateCryptoKeyVersionRequest{Parent: testKey + "absent", CryptoKeyVersion: &kmspb.CryptoKeyVersion{}})
			return err
		}(), codes.NotFound},
	}
	for _, tt := range tests {
		if got := status.Code(tt.err); got != tt.code {
			t.Errorf("%s: %v, want %v", tt.name, tt.err, tt.code)
		}
	}
}

// TestLifecycle: create (pending, then enabled), disable, enable.
func TestLifecycle(t *testing.T) {
	s, c := start(t, Options{Pending: 100 * time.Millisecond})
	key := testKey + "life"
	if _, err := s.AddKey(key, kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddKey(key, kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256); status.Code(errors.Unwrap(err)) != codes.AlreadyExists {
		t.Errorf("AddKey twice: %v", err)
	}
	ck, err := c.GetCryptoKey(t.Context(), &kmspb.GetCryptoKeyRequest{Name: key})
	if err != nil || ck.GetPurpose() != kmspb.CryptoKey_ASYMMETRIC_SIGN || ck.GetVersionTemplate().GetAlgorithm() != kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256 {
		t.Fatalf("GetCryptoKey = %v, %v", ck, err)
	}
	v, err := c.CreateCryptoKeyVersion(t.Context(), &kmspb.CreateCryptoKeyVersionRequest{Parent: key, CryptoKeyVersion: &kmspb.CryptoKeyVersion{}})
	if err != nil || v.GetState() != kmspb.CryptoKeyVersion_PENDING_GENERATION || v.GetName() != key+"/cryptoKeyVersions/2" || v.GetAlgorithm() != kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256 {
		t.Fatalf("CreateCryptoKeyVersion = %v, %v", v, err)
	}
	time.Sleep(120 * time.Millisecond)
	if v, err = c.GetCryptoKeyVersion(t.Context(), &kmspb.GetCryptoKeyVersionRequest{Name: v.GetName()}); err != nil || v.GetState() != kmspb.CryptoKeyVersion_ENABLED {
		t.Fatalf("after generation: %v, %v", v, err)
	}
	for _, st := range []State{kmspb.CryptoKeyVersion_DISABLED, kmspb.CryptoKeyVersion_ENABLED} {
		got, err := c.UpdateCryptoKeyVersion(t.Context(), &kmspb.UpdateCryptoKeyVersionRequest{
			CryptoKeyVersion: &kmspb.CryptoKeyVersion{Name: v.GetName(), State: st}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"state"}}})
		if err != nil || got.GetState() != st || s.Disabled(v.GetName()) != (st == kmspb.CryptoKeyVersion_DISABLED) {
			t.Errorf("update to %v: %v, %v", st, got, err)
		}
	}
	if names, _ := s.Versions(key); len(names) != 2 {
		t.Errorf("Versions = %v", names)
	}
}

// TestFaults checks each injected fault and the call counts.
func TestFaults(t *testing.T) {
	s, c := start(t, Options{Unavailable: 2})
	name, _ := s.AddKey(testKey+"f", kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	get := func() error {
		_, err := c.GetCryptoKeyVersion(t.Context(), &kmspb.GetCryptoKeyVersionRequest{Name: name})
		return err
	}
	for i, want := range []codes.Code{codes.Unavailable, codes.Unavailable, codes.OK} {
		if got := status.Code(get()); got != want {
			t.Errorf("call %d: %v, want %v", i, got, want)
		}
	}
	if n := s.Calls("GetCryptoKeyVersion"); n != 3 {
		t.Errorf("Calls = %d", n)
	}

	s.Update(func(o *Options) { o.ThrottleRate = 0.5 })
	throttled := 0
	for range 400 {
		if status.Code(get()) == codes.ResourceExhausted {
			throttled++
		}
	}
	if throttled < 140 || throttled > 260 {
		t.Errorf("%d of 400 throttled at rate 0.5", throttled)
	}

	s.Update(func(o *Options) { *o = Options{Latency: 50 * time.Millisecond, CorruptCRC: true} })
	start := time.Now()
	pk, err := c.GetPublicKey(t.Context(), &kmspb.GetPublicKeyRequest{Name: name})
	if err != nil || pk.GetPemCrc32C().GetValue() == crc32c([]byte(pk.GetPem())) {
		t.Errorf("CorruptCRC: %v, %v", pk, err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("latency %v, want ≥ 50ms", d)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := c.GetCryptoKeyVersion(ctx, &kmspb.GetCryptoKeyVersionRequest{Name: name}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("deadline inside the latency: %v", err)
	}

	for _, bad := range []func(*Options){
		func(o *Options) { o.ThrottleRate = 1.5 },
		func(o *Options) { o.Latency = -1 },
		func(o *Options) { o.Unavailable = -1 },
	} {
		if err := s.Update(bad); err == nil {
			t.Error("an invalid update was accepted")
		}
	}
	if s.Options().Latency != 50*time.Millisecond {
		t.Errorf("a refused update changed the options: %+v", s.Options())
	}
	if _, err := Start(Options{ThrottleRate: -0.1}); err == nil {
		t.Error("Start with a negative throttle rate")
	}
}
