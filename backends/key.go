package backends

import (
	"context"
	"crypto"
	"errors"
	"fmt"

	"github.com/cardsign/cardsign/jose"
)

// Key is an opened key: the signer plus its JOSE identity.
type Key struct {
	// URI is the key URI as given to Open. It may carry secrets (a PKCS#11
	// PIN); use Redact before showing it.
	URI    string
	Signer crypto.Signer
	Alg    jose.Alg
	KID    string
}

// Public returns the key's public key.
func (k *Key) Public() crypto.PublicKey { return k.Signer.Public() }

// JWK returns the key's public JWK, with its kid and alg.
func (k *Key) JWK() (jose.JWK, error) {
	j, err := jose.NewJWK(k.Public(), k.KID, k.Alg)
	if err != nil {
		return jose.JWK{}, fmt.Errorf("backends: key %s: %w", Redact(k.URI), err)
	}
	return j, nil
}

// OpenOptions overrides what the backend knows about a key.
type OpenOptions struct {
	Alg jose.Alg // override; must fit the key (jose.CheckKey)
	KID string   // override
}

// URIChecker is a Backend that can tell, without opening it, whether it
// would accept a key URI under its configuration (allowed directories for
// the files a URI names).
type URIChecker interface {
	CheckURI(uri string) error
}

// OpenWith opens uri with backend b and settles the key's JOSE identity:
// Alg = opts.Alg, else the backend's Handle.Alg, else jose.DefaultAlg of the
// key; KID = opts.KID, else Handle.KID, else the RFC 7638 thumbprint. The
// alg is checked against the key here, once, so nothing downstream can sign
// with an alg its key cannot serve. Registry.Open picks b by the URI's
// scheme; a daemon opens keys a caller names for import through a backend
// restricted to the allowed directories.
func OpenWith(ctx context.Context, b Backend, uri string, opts OpenOptions) (*Key, error) {
	h, err := b.Open(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("backends: open %s: %w", Redact(uri), err)
	}
	if h.Signer == nil {
		return nil, fmt.Errorf("backends: open %s: %w", Redact(uri), errors.New("backend returned no signer"))
	}
	pub := h.Signer.Public()

	// The key's own algorithm (a KMS key's spec, a JWK's alg, a token key
	// restricted to one mechanism) must agree with the one asked for, which
	// for the daemon is the one on record: signing with another would fail
	// at the provider or, worse, publish a JWK that lies.
	if opts.Alg != "" && h.Alg != "" && opts.Alg != h.Alg {
		return nil, fmt.Errorf("backends: open %s: %w", Redact(uri),
			&jose.KeyMismatchError{Alg: opts.Alg, KeyType: jose.KeyType(pub), Reason: "the key itself is for " + string(h.Alg)})
	}
	alg := opts.Alg
	if alg == "" {
		alg = h.Alg
	}
	if alg == "" {
		if alg, err = jose.DefaultAlg(pub); err != nil {
			return nil, fmt.Errorf("backends: open %s: %w", Redact(uri), err)
		}
	}
	if err := jose.CheckKey(alg, pub); err != nil {
		return nil, fmt.Errorf("backends: open %s: %w", Redact(uri), err)
	}

	kid := opts.KID
	if kid == "" {
		kid = h.KID
	}
	if kid == "" {
		if kid, err = jose.Thumbprint(pub); err != nil {
			return nil, fmt.Errorf("backends: open %s: %w", Redact(uri), err)
		}
	}
	return &Key{URI: uri, Signer: h.Signer, Alg: alg, KID: kid}, nil
}
