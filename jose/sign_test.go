package jose

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"io"
	"math/big"
	"testing"
)

// input is a realistic signing input: b64url(protected) "." b64url(payload).
var input = []byte(b64([]byte(`{"alg":"ES256","kid":"k","typ":"JOSE"}`)) + "." + b64([]byte(`{"name":"Example Agent"}`)))

func TestSignVerifyRoundTrip(t *testing.T) {
	wantLen := map[Alg]int{ES256: 64, ES384: 96, ES512: 132, RS256: 256, PS256: 256, EdDSA: 64}
	for _, alg := range Algs() {
		t.Run(string(alg), func(t *testing.T) {
			k := keyFor(t, alg)
			sig, err := Sign(t.Context(), k, alg, input)
			if err != nil {
				t.Fatalf("Sign: %v", err)
			}
			if len(sig) != wantLen[alg] {
				t.Errorf("signature is %d bytes, want %d", len(sig), wantLen[alg])
			}
			if err := Verify(alg, k.Public(), input, sig); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			// Every bit of the signature and of the input matters.
			for _, flip := range []struct {
				name     string
				sig, msg []byte
			}{
				{"signature first bit", flipBit(sig, 0), input},
				{"signature last bit", flipBit(sig, len(sig)*8-1), input},
				{"input bit", sig, flipBit(input, 3)},
			} {
				if err := Verify(alg, k.Public(), flip.msg, flip.sig); !errors.Is(err, ErrSignatureInvalid) {
					t.Errorf("%s flipped: Verify = %v, want ErrSignatureInvalid", flip.name, err)
				}
			}
			// A different key of the same type must not verify.
			other := keyFor(t, alg)
			if alg == RS256 || alg == PS256 {
				other = rsa1024() // too small: a key error, not ErrSignatureInvalid
				if err := Verify(alg, other.Public(), input, sig); err == nil || errors.Is(err, ErrSignatureInvalid) {
					t.Errorf("Verify with RSA-1024 key = %v, want a key error", err)
				}
				return
			}
			if err := Verify(alg, other.Public(), input, sig); !errors.Is(err, ErrSignatureInvalid) {
				t.Errorf("Verify with another key = %v, want ErrSignatureInvalid", err)
			}
		})
	}
}

func flipBit(b []byte, bit int) []byte {
	out := append([]byte(nil), b...)
	out[bit/8] ^= 1 << (bit % 8)
	return out
}

// ES* signatures must be exactly 2*size bytes even when r or s has leading
// zero bytes; signing many times makes short r/s values all but certain.
func TestSignECFixedWidth(t *testing.T) {
	for _, alg := range []Alg{ES256, ES384, ES512} {
		k := keyFor(t, alg)
		for i := 0; i < 300; i++ {
			sig, err := Sign(t.Context(), k, alg, input)
			if err != nil {
				t.Fatal(err)
			}
			if len(sig) != 2*alg.ecSize() {
				t.Fatalf("%s: signature %d bytes, want %d", alg, len(sig), 2*alg.ecSize())
			}
		}
	}
}

// rawECSigner returns raw r||s instead of DER, as some HSM wrappers do.
type rawECSigner struct{ *ecdsa.PrivateKey }

func (s rawECSigner) Sign(_ io.Reader, digest []byte, _ crypto.SignerOpts) ([]byte, error) {
	r, ss, err := ecdsa.Sign(rand.Reader, s.PrivateKey, digest)
	if err != nil {
		return nil, err
	}
	size := (s.Curve.Params().BitSize + 7) / 8
	out := make([]byte, 2*size)
	r.FillBytes(out[:size])
	ss.FillBytes(out[size:])
	return out, nil
}

// wrongPublic claims a public key that is not its own: a misconfigured KMS.
type wrongPublic struct {
	crypto.Signer
	pub crypto.PublicKey
}

func (w wrongPublic) Public() crypto.PublicKey { return w.pub }

// ctxSigner records whether SignContext was used and honours cancellation.
type ctxSigner struct {
	crypto.Signer
	called *bool
}

func (c ctxSigner) SignContext(ctx context.Context, r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	*c.called = true
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.Signer.Sign(r, d, o)
}

// failingSigner always fails.
type failingSigner struct{ crypto.Signer }

var errHSM = errors.New("hsm unplugged")

func (failingSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) { return nil, errHSM }

// garbageSigner returns bytes that are neither DER nor raw.
type garbageSigner struct{ crypto.Signer }

func (garbageSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return []byte{1, 2, 3}, nil
}

// scribblingSigner overwrites the digest it is handed, then signs what it
// wrote there: a signature valid for other bytes.
type scribblingSigner struct{ *ecdsa.PrivateKey }

func (s scribblingSigner) Sign(r io.Reader, d []byte, opts crypto.SignerOpts) ([]byte, error) {
	for i := range d {
		d[i] ^= 0xff
	}
	return s.PrivateKey.Sign(r, d, opts)
}

// autoSaltSigner ignores the requested PSS salt length: what a careless
// backend might do.
type autoSaltSigner struct{ *rsa.PrivateKey }

func (s autoSaltSigner) Sign(r io.Reader, d []byte, _ crypto.SignerOpts) ([]byte, error) {
	return rsa.SignPSS(r, s.PrivateKey, crypto.SHA256, d, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto})
}

func TestSignSigners(t *testing.T) {
	p256 := keyFor(t, ES256).(*ecdsa.PrivateKey)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	var called bool
	tests := []struct {
		name       string
		ctx        context.Context
		signer     crypto.Signer
		alg        Alg
		wantVerify bool // *VerifyError / ErrVerify
		wantIs     error
		wantErr    bool
	}{
		{name: "raw r||s signer", signer: rawECSigner{p256}, alg: ES256},
		{name: "context signer", signer: ctxSigner{p256, &called}, alg: ES256},
		{name: "public key of another key", signer: wrongPublic{p256, keyFor(t, ES256).Public()}, alg: ES256, wantVerify: true, wantErr: true},
		{name: "Ed25519 wrong public", signer: wrongPublic{keyFor(t, EdDSA), keyFor(t, EdDSA).Public()}, alg: EdDSA, wantVerify: true, wantErr: true},
		{name: "PSS with max salt", signer: autoSaltSigner{rsa2048()}, alg: PS256, wantVerify: true, wantErr: true},
		{name: "alg mismatch", signer: p256, alg: ES384, wantErr: true},
		{name: "unsupported alg", signer: p256, alg: "HS256", wantIs: ErrUnsupportedAlg, wantErr: true},
		{name: "signer error", signer: failingSigner{p256}, alg: ES256, wantIs: errHSM, wantErr: true},
		{name: "garbage output", signer: garbageSigner{p256}, alg: ES256, wantErr: true},
		{name: "signer that overwrites the digest", signer: scribblingSigner{p256}, alg: ES256, wantVerify: true, wantErr: true},
		{name: "cancelled context", ctx: cancelled, signer: p256, alg: ES256, wantIs: context.Canceled, wantErr: true},
		{name: "nil signer", signer: nil, alg: ES256, wantErr: true},
	}
	for _, tt := range tests {
		ctx := tt.ctx
		if ctx == nil {
			ctx = t.Context()
		}
		sig, err := Sign(ctx, tt.signer, tt.alg, input)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: Sign err = %v, wantErr %v", tt.name, err, tt.wantErr)
			continue
		}
		if err != nil && sig != nil {
			t.Errorf("%s: Sign returned a signature with an error", tt.name)
		}
		var ve *VerifyError
		if tt.wantVerify && (!errors.As(err, &ve) || !errors.Is(err, ErrVerify)) {
			t.Errorf("%s: err = %v, want *VerifyError matching ErrVerify", tt.name, err)
		}
		if !tt.wantVerify && errors.Is(err, ErrVerify) {
			t.Errorf("%s: err = %v, did not want ErrVerify", tt.name, err)
		}
		if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
			t.Errorf("%s: err = %v, want errors.Is %v", tt.name, err, tt.wantIs)
		}
		if err == nil {
			if err := Verify(tt.alg, tt.signer.Public(), input, sig); err != nil {
				t.Errorf("%s: Verify: %v", tt.name, err)
			}
		}
	}
	if !called {
		t.Error("Sign did not use SignContext of a ContextSigner")
	}
}

func TestVerifyErrors(t *testing.T) {
	p256 := keyFor(t, ES256)
	good, err := Sign(t.Context(), p256, ES256, input)
	if err != nil {
		t.Fatal(err)
	}
	// A DER signature is not a JWS ES256 signature.
	r := new(big.Int).SetBytes(good[:32])
	s := new(big.Int).SetBytes(good[32:])
	der, err := asn1Marshal(r, s)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		alg     Alg
		pub     crypto.PublicKey
		sig     []byte
		invalid bool // want ErrSignatureInvalid; otherwise a different error
	}{
		{"DER instead of raw", ES256, p256.Public(), der, true},
		{"short", ES256, p256.Public(), good[:63], true},
		{"long", ES256, p256.Public(), append(append([]byte(nil), good...), 0), true},
		{"empty", ES256, p256.Public(), nil, true},
		{"zero r and s", ES256, p256.Public(), make([]byte, 64), true},
		{"EdDSA short", EdDSA, keyFor(t, EdDSA).Public(), make([]byte, 63), true},
		{"RS256 garbage", RS256, rsa2048().Public(), make([]byte, 256), true},
		{"key mismatch", ES384, p256.Public(), good, false},
		{"unsupported alg", "none", p256.Public(), good, false},
		{"nil key", ES256, nil, good, false},
	}
	for _, tt := range tests {
		err := Verify(tt.alg, tt.pub, input, tt.sig)
		if err == nil {
			t.Errorf("%s: Verify = nil, want error", tt.name)
			continue
		}
		if got := errors.Is(err, ErrSignatureInvalid); got != tt.invalid {
			t.Errorf("%s: Verify = %v; errors.Is(ErrSignatureInvalid) = %v, want %v", tt.name, err, got, tt.invalid)
		}
	}
}
