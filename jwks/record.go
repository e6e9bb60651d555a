package jwks

import (
	"time"

	"github.com/cardsign/cardsign/jose"
)

// KeyRecord is what the store keeps about one key version. States are not
// stored: they are derived from these timestamps (Derive), so replicas and
// restarts agree without messages.
type KeyRecord struct {
	KID          string
	URI          string // backend key URI; may carry secrets in its query: log backends.Redact(URI) only
	Alg          jose.Alg
	Public       jose.JWK // public JWK, recorded when the key was created or imported; never fetched again
	CreatedAt    time.Time
	PublishAt    time.Time  // in the JWKS from then on
	ActivateAt   *time.Time // signs from then on; nil while not scheduled
	RetireAt     *time.Time // explicit retirement (RetireKey); nil otherwise
	ExpireAt     *time.Time // explicit unpublish time; nil otherwise
	RevokedAt    *time.Time
	RevokeReason string
}
