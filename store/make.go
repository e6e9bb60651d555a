package store

import (
	"context"

	"github.com/cardsign/cardsign/jwks"
)

// Checked is the make function of MakeKey for a record already made: it
// lets check (when not nil) refuse, then returns rec. Implementations build
// CreateKey on MakeKey with it.
func Checked(rec jwks.KeyRecord, check func(existing []jwks.KeyRecord) error) func(context.Context, []jwks.KeyRecord) (jwks.KeyRecord, error) {
	return func(_ context.Context, existing []jwks.KeyRecord) (jwks.KeyRecord, error) {
		if check != nil {
			if err := check(existing); err != nil {
				return jwks.KeyRecord{}, err
			}
		}
		return rec, nil
	}
}
