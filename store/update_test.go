package store

import (
	"errors"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
)

func TestCheckUpdate(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	t1 := t0.Add(time.Hour)
	base := func() jwks.KeyRecord {
		return jwks.KeyRecord{
			KID: "k1", URI: "file:/keys/k1.pem", Alg: jose.Alg("ES256"),
			Public:    jose.JWK{Kty: "EC", Crv: "P-256", X: "x", Y: "y", Kid: "k1"},
			CreatedAt: t0, PublishAt: t0,
		}
	}
	revoked := func() jwks.KeyRecord {
		r := base()
		r.RevokedAt, r.RevokeReason = &t1, "compromised"
		return r
	}
	tests := []struct {
		name      string
		old       jwks.KeyRecord
		mod       func(r *jwks.KeyRecord)
		immutable bool
	}{
		{"no change", base(), func(*jwks.KeyRecord) {}, false},
		{"mutable times", base(), func(r *jwks.KeyRecord) {
			r.PublishAt, r.ActivateAt, r.RetireAt, r.ExpireAt = t1, &t1, &t1, &t1
		}, false},
		{"revoke", base(), func(r *jwks.KeyRecord) { r.RevokedAt, r.RevokeReason = &t1, "x" }, false},
		{"created_at same instant, other zone", base(), func(r *jwks.KeyRecord) {
			r.CreatedAt = t0.In(time.FixedZone("x", 7200))
		}, false},
		{"revoked_at same instant", revoked(), func(r *jwks.KeyRecord) { same := t1; r.RevokedAt = &same }, false},
		{"kid", base(), func(r *jwks.KeyRecord) { r.KID = "k2" }, true},
		{"created_at", base(), func(r *jwks.KeyRecord) { r.CreatedAt = t1 }, true},
		{"public", base(), func(r *jwks.KeyRecord) { r.Public.X = "other" }, true},
		{"uri", base(), func(r *jwks.KeyRecord) { r.URI = "file:/elsewhere" }, true},
		{"alg", base(), func(r *jwks.KeyRecord) { r.Alg = "ES384" }, true},
		{"unrevoke", revoked(), func(r *jwks.KeyRecord) { r.RevokedAt = nil }, true},
		{"redate revocation", revoked(), func(r *jwks.KeyRecord) { r.RevokedAt = &t0 }, true},
		{"change revoke reason", revoked(), func(r *jwks.KeyRecord) { r.RevokeReason = "oops" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			updated := tt.old
			tt.mod(&updated)
			err := CheckUpdate(tt.old, updated)
			if got := errors.Is(err, ErrImmutable); got != tt.immutable {
				t.Fatalf("CheckUpdate = %v, want ErrImmutable: %v", err, tt.immutable)
			}
		})
	}
}
