package server

import (
	"context"
	"crypto"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
)

// keyring is the authority's view of its keys: the records read from the
// store (re-read every refresh, so another replica's changes are seen), the
// backend keys opened for them, and their decoded public keys.
type keyring struct {
	store    store.Store
	backends *backends.Registry
	refresh  time.Duration
	policy   jwks.Policy // derives each key's state from its record
	limits   *backendLimits

	mu     sync.Mutex
	recs   []jwks.KeyRecord // last read from the store
	readAt time.Time        // when the read that produced recs started
	// staleAt: a change was announced then; a read that started before it
	// is not reused.
	staleAt time.Time
	signers map[string]*openedKey       // opened keys by kid
	publics map[string]crypto.PublicKey // decoded public keys on record, by kid
	// version grows whenever recs are replaced or a change is announced:
	// what was derived from the records at an older version (the
	// pre-rendered JWKS) is out of date.
	version atomic.Uint64
}

func newKeyring(st store.Store, reg *backends.Registry, refresh time.Duration, policy jwks.Policy, limits *backendLimits) *keyring {
	return &keyring{
		store: st, backends: reg, refresh: refresh, policy: policy, limits: limits,
		signers: map[string]*openedKey{},
		publics: map[string]crypto.PublicKey{},
	}
}

// records returns the key records, re-read from the store when the cached
// copy is older than the refresh period or force is set.
func (k *keyring) records(ctx context.Context, force bool) ([]jwks.KeyRecord, error) {
	k.mu.Lock()
	if !force && k.recs != nil && time.Since(k.readAt) < k.refresh && k.readAt.After(k.staleAt) {
		recs := k.recs
		k.mu.Unlock()
		return recs, nil
	}
	k.mu.Unlock()
	start := time.Now()
	recs, err := k.store.ListKeys(ctx)
	if err != nil {
		return nil, &UnavailableError{What: "key store", Err: err}
	}
	k.mu.Lock()
	// A slow read that started before a newer one (say, before a revocation
	// and its forced refresh) must not put older records back.
	if start.After(k.readAt) {
		k.recs, k.readAt = recs, start
		k.version.Add(1)
	}
	k.mu.Unlock()
	return recs, nil
}

// views derives every key's state at now from the cached records.
func (k *keyring) views(ctx context.Context, now time.Time) ([]jwks.View, error) {
	recs, err := k.records(ctx, false)
	if err != nil {
		return nil, err
	}
	return jwks.Derive(now, recs, k.policy), nil
}

// signing opens the active key and the keys scheduled to follow it, as
// they stand at now, each checked against its published public key.
func (k *keyring) signing(ctx context.Context, now time.Time) ([]signer.Key, error) {
	views, err := k.views(ctx, now)
	if err != nil {
		return nil, err
	}
	if _, ok := jwks.Active(views); !ok {
		return nil, ErrNoActiveKey
	}
	var keys []signer.Key
	for _, v := range jwks.Signing(views) {
		opened, err := k.open(ctx, v.KeyRecord)
		if err != nil {
			// The key is on record and due to sign: if its backend cannot
			// open it here and now (an HSM unplugged at start, a KMS outage,
			// a key directory this replica does not share), signing is
			// unavailable on this replica, not broken: a client of several
			// replicas retries on another.
			return nil, &KeyUnavailableError{KID: v.KID, Err: err}
		}
		pub, err := k.public(v.KeyRecord)
		if err != nil {
			return nil, err
		}
		key := opened.key
		key.Public = pub
		keys = append(keys, key)
	}
	return keys, nil
}

// documentSignerView is the key that signs documents the authority issues
// itself: the active key, or, with no active key (the last one revoked), the
// newest published key, which still vouches for the revocation list.
func documentSignerView(views []jwks.View) (jwks.View, error) {
	if v, ok := jwks.Active(views); ok {
		return v, nil
	}
	pub := jwks.Published(views)
	if len(pub) == 0 {
		return jwks.View{}, ErrNoActiveKey
	}
	return pub[len(pub)-1], nil
}

// invalidate makes the next read go to the store: another replica changed
// a key.
func (k *keyring) invalidate() {
	k.mu.Lock()
	k.staleAt = time.Now()
	k.mu.Unlock()
	k.version.Add(1)
}

// lastRead returns the records last read from the store, even when they are
// due for a re-read, and when that read started; ok is false before any.
func (k *keyring) lastRead() (recs []jwks.KeyRecord, readAt time.Time, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.recs, k.readAt, k.recs != nil
}

// readTime is when the read that produced the cached records started.
func (k *keyring) readTime() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.readAt
}

// openedKey is a key opened through its backend, with the backend's scheme
// (for its concurrency slots and the metrics).
type openedKey struct {
	key    signer.Key
	scheme string
}

// open returns the opened backend key for a record, opening it once.
func (k *keyring) open(ctx context.Context, rec jwks.KeyRecord) (*openedKey, error) {
	k.mu.Lock()
	opened := k.signers[rec.KID]
	k.mu.Unlock()
	if opened != nil {
		return opened, nil
	}
	key, err := k.backends.Open(ctx, rec.URI, backends.OpenOptions{Alg: rec.Alg, KID: rec.KID})
	if err != nil {
		return nil, fmt.Errorf("open key %s (%s): %w", rec.KID, backends.Redact(rec.URI), err)
	}
	scheme, err := backends.Scheme(rec.URI)
	if err != nil {
		return nil, err
	}
	// A key replaced at its backend (another key file at the same path)
	// opens fine but is not the published key: refuse it here, by name,
	// rather than fail every signature with an internal error.
	pub, err := k.public(rec)
	if err != nil {
		return nil, err
	}
	if kp, ok := key.Signer.Public().(publicKey); !ok || !kp.Equal(pub) {
		return nil, &KeyChangedError{KID: rec.KID}
	}
	key.Headers = &signer.HeaderCache{}
	opened = &openedKey{key: k.limits.wrap(key, scheme), scheme: scheme}
	k.mu.Lock()
	if prev := k.signers[rec.KID]; prev != nil {
		opened = prev
	} else {
		k.signers[rec.KID] = opened
	}
	k.mu.Unlock()
	return opened, nil
}

// public returns the decoded public key on record for a kid. Decoding a JWK
// (base64, point validation) is done once per kid, not per signature: a kid
// is never reused for other key material, so the result cannot change.
func (k *keyring) public(rec jwks.KeyRecord) (crypto.PublicKey, error) {
	k.mu.Lock()
	pub, ok := k.publics[rec.KID]
	k.mu.Unlock()
	if ok {
		return pub, nil
	}
	pub, err := rec.Public.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("stored public key of %s: %w", rec.KID, err)
	}
	k.mu.Lock()
	k.publics[rec.KID] = pub
	k.mu.Unlock()
	return pub, nil
}

// backendOf names the backend of an opened key, for metrics.
func (k *keyring) backendOf(kid string) string {
	k.mu.Lock()
	opened := k.signers[kid]
	k.mu.Unlock()
	if opened == nil {
		return noLabel
	}
	return opened.scheme
}

// publicKey is what crypto public keys have in common.
type publicKey interface{ Equal(crypto.PublicKey) bool }
