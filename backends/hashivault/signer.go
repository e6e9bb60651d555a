//go:build !novault

package hashivault

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/openbao/openbao/api/v2"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/internal/retry"
	"github.com/cardsign/cardsign/jose"
)

// signer is the crypto.Signer (and jose.ContextSigner) of one Transit key
// version. It is safe for concurrent use.
type signer struct {
	b       *Backend
	name    string
	version int // pinned: every request names it
	scheme  scheme
	pub     crypto.PublicKey
	limiter retry.Pacer
}

// Public returns the public key read when the key was opened.
func (s *signer) Public() crypto.PublicKey { return s.pub }

// Sign is SignContext without a deadline beyond the retry window.
func (s *signer) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return s.SignContext(context.Background(), rand, digest, opts)
}

// SignContext signs digest (for Ed25519 the message itself) with the
// pinned version: prehashed, so the message never leaves the process
// (except for Ed25519, which has no prehashed form); ECDSA with
// marshaling_algorithm=jws, whose r||s is returned as DER, as crypto.Signer
// promises; RSA-PSS with a salt as long as the hash.
func (s *signer) SignContext(ctx context.Context, _ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if err := backends.CheckSignerOpts(s.scheme.alg, digest, opts); err != nil {
		s.b.stats.Failure()
		return nil, fmt.Errorf("hashivault: sign with %s version %d: %w", s.name, s.version, err)
	}
	if s.b.closed.Load() {
		return nil, &UnavailableError{Op: "sign", Key: s.name, Err: ErrClosed}
	}
	body := map[string]any{
		"input":       base64.StdEncoding.EncodeToString(digest),
		"key_version": s.version,
	}
	if s.scheme.hash != "" {
		body["hash_algorithm"] = s.scheme.hash
		body["prehashed"] = true
	}
	if s.scheme.sigAlg != "" {
		body["signature_algorithm"] = s.scheme.sigAlg
		if s.scheme.sigAlg == "pss" {
			body["salt_length"] = "hash"
		}
	}
	if s.scheme.rawECDSA {
		body["marshaling_algorithm"] = "jws"
	}
	path := s.b.cfg.Mount + "/sign/" + s.name
	var sec *api.Secret
	err := s.b.do(ctx, call{op: "sign", key: path, limiter: s.limiter, idempotent: true, authed: true}, func(ctx context.Context) error {
		var err error
		sec, err = s.b.client.Logical().WriteWithContext(ctx, path, body)
		return err
	})
	if err != nil {
		return nil, s.b.fail("sign", path, s.signError(err))
	}
	sig, err := s.decode(sec)
	if err != nil {
		s.b.stats.Failure()
		return nil, err
	}
	s.b.stats.Signature()
	return sig, nil
}

// signError makes Vault's refusal of a trimmed or unknown version a
// *KeyNotFoundError.
func (s *signer) signError(err error) error {
	var re *api.ResponseError
	if errors.As(err, &re) && re.StatusCode == 400 {
		msg := vaultErrors(re.Errors)
		if strings.Contains(msg, "version") || strings.Contains(msg, "not found") {
			return &KeyNotFoundError{Key: s.name, Version: s.version, Reason: msg}
		}
	}
	return err
}

// decode reads "vault:vN:SIG", checks the version is the one asked for,
// and returns the signature as crypto.Signer returns it.
func (s *signer) decode(sec *api.Secret) ([]byte, error) {
	if sec == nil || sec.Data == nil {
		return nil, fmt.Errorf("hashivault: sign with %s version %d: empty response", s.name, s.version)
	}
	text, _ := sec.Data["signature"].(string)
	parts := strings.SplitN(text, ":", 3)
	if len(parts) != 3 || parts[0] != "vault" || parts[1] != "v"+strconv.Itoa(s.version) {
		return nil, fmt.Errorf("hashivault: sign with %s version %d: the signature is not vault:v%d:…; discarded", s.name, s.version, s.version)
	}
	if s.scheme.rawECDSA {
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[2], "="))
		if err != nil {
			return nil, fmt.Errorf("hashivault: sign with %s: the JWS-marshaled signature is not base64url: %w", s.name, err)
		}
		if want := 2 * ecdsaSize(s.pub); len(raw) != want {
			return nil, fmt.Errorf("hashivault: sign with %s version %d: the r||s signature is %d bytes, want %d; discarded", s.name, s.version, len(raw), want)
		}
		return jose.ECDSARawToDER(raw)
	}
	sig, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("hashivault: sign with %s: the signature is not base64: %w", s.name, err)
	}
	return sig, nil
}

// ecdsaSize is the byte width of r and s for an ECDSA public key.
func ecdsaSize(pub crypto.PublicKey) int {
	if k, ok := pub.(*ecdsa.PublicKey); ok {
		return (k.Curve.Params().BitSize + 7) / 8
	}
	return 0
}
