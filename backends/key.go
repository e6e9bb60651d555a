package backends

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/signer"
)

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
func OpenWith(ctx context.Context, b Backend, uri string, opts OpenOptions) (signer.Key, error) {
	h, err := b.Open(ctx, uri)
	if err != nil {
		return signer.Key{}, fmt.Errorf("backends: open %s: %w", Redact(uri), err)
	}
	if h.Signer == nil {
		return signer.Key{}, fmt.Errorf("backends: open %s: %w", Redact(uri), errors.New("backend returned no signer"))
	}
	pub := h.Signer.Public()

	// The key's own algorithm (a KMS key's spec, a JWK's alg, a token key
	// restricted to one mechanism) must agree with the one asked for, which
	// for the daemon is the one on record: signing with another would fail
	// at the provider or, worse, publish a JWK that lies.
	if opts.Alg != "" && h.Alg != "" && opts.Alg != h.Alg {
		return signer.Key{}, fmt.Errorf("backends: open %s: %w", Redact(uri),
			&jose.KeyMismatchError{Alg: opts.Alg, KeyType: jose.KeyType(pub), Reason: "the key itself is for " + string(h.Alg)})
	}
	alg := cmp.Or(opts.Alg, h.Alg)
	if alg == "" {
		if alg, err = jose.DefaultAlg(pub); err != nil {
			return signer.Key{}, fmt.Errorf("backends: open %s: %w", Redact(uri), err)
		}
	}
	if err := jose.CheckKey(alg, pub); err != nil {
		return signer.Key{}, fmt.Errorf("backends: open %s: %w", Redact(uri), err)
	}

	kid := cmp.Or(opts.KID, h.KID)
	if kid == "" {
		if kid, err = jose.Thumbprint(pub); err != nil {
			return signer.Key{}, fmt.Errorf("backends: open %s: %w", Redact(uri), err)
		}
	}
	return signer.Key{Signer: h.Signer, Alg: alg, KID: kid}, nil
}
