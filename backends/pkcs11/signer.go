//go:build cgo && !nopkcs11

package pkcs11

import (
	"context"
	"crypto"
	"fmt"
	"io"
	"sync"

	p11 "github.com/miekg/pkcs11"
)

// signer is the crypto.Signer (and jose.ContextSigner) of one private key
// on a token. It is safe for concurrent use: each signature takes a session
// from the token's pool.
type signer struct {
	t    *token
	ki   keyInfo
	key  string           // "object=...;id=...", for errors
	name string           // `"label" (serial S) key object=...;id=...`, for errors
	find []*p11.Attribute // finds the key again after the token re-initialized

	mu     sync.Mutex // guards handle and gen
	handle p11.ObjectHandle
	gen    uint64 // the token generation handle belongs to
}

// Public returns the public key, read from the token when the key was opened.
func (s *signer) Public() crypto.PublicKey { return s.ki.pub }

// Sign signs digest (the whole message for Ed25519) on the token. rand is
// ignored: the token draws its own randomness. ECDSA signatures are ASN.1
// DER, as crypto.Signer promises.
func (s *signer) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return s.SignContext(context.Background(), rand, digest, opts)
}

// SignContext is Sign with a context that bounds the wait for a pooled
// session and for a re-initialization in progress. A PKCS#11 call, once
// made, cannot be interrupted.
func (s *signer) SignContext(ctx context.Context, _ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pkcs11: sign with %s: %w", s.name, err)
	}
	op, err := mechanism(s.ki.kind, s.ki.mech, digest, opts)
	if err != nil {
		return nil, fmt.Errorf("pkcs11: sign with %s: %w", s.name, err)
	}
	var sig []byte
	err = s.t.run(ctx, func(c *p11.Ctx, ses session) error {
		h, err := s.handleFor(c, ses)
		if err != nil {
			return err
		}
		if err := c.SignInit(ses.h, []*p11.Mechanism{op.mech}, h); err != nil {
			return fmt.Errorf("C_SignInit: %w", err)
		}
		if sig, err = c.Sign(ses.h, op.data); err != nil {
			return fmt.Errorf("C_Sign: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pkcs11: sign with %s: %w", s.name, err)
	}
	if s.ki.kind == kindEC {
		return ecdsaDER(sig)
	}
	return sig, nil
}

// handleFor returns the key's object handle for a session's generation,
// finding the key again by its CKA_ID when the token was re-initialized
// since: object handles do not survive a logout or a module
// re-initialization (SoftHSM answers CKR_OBJECT_HANDLE_INVALID), and after
// one the old number may name another object.
func (s *signer) handleFor(c *p11.Ctx, ses session) (p11.ObjectHandle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == ses.gen {
		return s.handle, nil
	}
	hs, err := findObjects(c, ses.h, s.find, 2)
	if err != nil {
		return 0, err
	}
	switch len(hs) {
	case 0:
		return 0, &KeyNotFoundError{Token: s.t.name, Key: s.key, Reason: "gone from the token after it was re-initialized"}
	case 1:
	default:
		return 0, fmt.Errorf("%d private keys now have this key's CKA_ID", len(hs))
	}
	s.handle, s.gen = hs[0], ses.gen
	return s.handle, nil
}
