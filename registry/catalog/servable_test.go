package catalog

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// docStore holds one stored catalog; the publisher's Document reads only it.
type docStore struct {
	Store
	doc store.Document
}

func (s *docStore) Document(context.Context, string) (store.Document, error) { return s.doc, nil }

type fixedKeys struct {
	Keys
	recs   []jwks.KeyRecord
	policy jwks.Policy
}

func (k *fixedKeys) Records(context.Context) ([]jwks.KeyRecord, error) { return k.recs, nil }
func (k *fixedKeys) Policy() jwks.Policy                               { return k.policy }

type noRevokedCards struct{ Registry }

func (noRevokedCards) RevokedCards(context.Context) ([]store.CardRevocation, error) { return nil, nil }

// TestStoredCatalogServable: the stored catalog is served only while the
// key that signed it is in did.json and no card it lists carries a
// signature by a revoked key; otherwise the route answers 503.
func TestStoredCatalogServable(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	grace := time.Hour
	catKey := func() jwks.KeyRecord {
		return jwks.KeyRecord{KID: "cat", Alg: jose.ES256, ActivateAt: at(-time.Hour)}
	}
	cardKey := func() jwks.KeyRecord {
		return jwks.KeyRecord{KID: "card", Alg: jose.RS256, ActivateAt: at(-2 * time.Hour)}
	}
	for _, tc := range []struct {
		name    string
		cat     func(*jwks.KeyRecord)
		card    func(*jwks.KeyRecord)
		elapsed time.Duration // past t0 when served
		code    int
	}{
		{"signed by the active key", nil, nil, 0, 200},
		{"catalog key revoked", func(r *jwks.KeyRecord) { r.RevokedAt = at(0) }, nil, time.Minute, 503},
		{"catalog key expired", func(r *jwks.KeyRecord) { r.ExpireAt = at(time.Minute) }, nil, 2 * time.Minute, 503},
		{"catalog key retired within its grace", func(r *jwks.KeyRecord) { r.RetireAt = at(time.Minute) }, nil, 2 * time.Minute, 200},
		{"catalog key retired past its grace", func(r *jwks.KeyRecord) { r.RetireAt = at(time.Minute) }, nil, time.Minute + grace + time.Second, 503},
		{"a listed card's key revoked", nil, func(r *jwks.KeyRecord) { r.RevokedAt = at(0) }, time.Minute, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat, card := catKey(), cardKey()
			if tc.cat != nil {
				tc.cat(&cat)
			}
			if tc.card != nil {
				tc.card(&card)
			}
			st := catalogState{KID: "cat", Earliest: t0.Add(24 * time.Hour),
				Entries: []entryState{{Agent: "payments", Version: 1, CardKIDs: []string{"card"}}}}
			meta, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			woken := false
			pub := New(Config{
				Store:    &docStore{doc: store.Document{Name: DocumentName, Seq: 1, Body: []byte("{}\n"), Meta: meta}},
				Keys:     &fixedKeys{recs: []jwks.KeyRecord{cat, card}, policy: jwks.Policy{RetireGrace: grace}},
				Registry: noRevokedCards{},
				Now:      func() time.Time { return t0.Add(tc.elapsed) },
				Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
				Wake:     func() { woken = true },
			})
			rec := httptest.NewRecorder()
			NewHandler(pub, time.Hour, func() time.Time { return t0.Add(tc.elapsed) }).
				ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/ai-catalog.json", nil))
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.code, rec.Body)
			}
			if woken != (tc.code != 200) {
				t.Fatalf("duties woken: %v", woken)
			}
		})
	}
}
