package webtrust

import (
	"net/http"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
)

// BenchmarkVerifyCardES256 is signer's BenchmarkVerifyES256 through the
// client verification package: Client.VerifyCard on the spec's sample card
// (signed with --strip-unknown, ES256), the key named by the host's trust
// rule. The card and the JWKS are served with a max-age, so after the
// first call both come from the client's HTTP cache, as they do for a
// verifier that checks a card again within that age: the loop measures the
// client's own work (policy match, the cached fetches, reading the JWKS)
// and signer.Verify, not TLS handshakes.
// Run: go test -run '^$' -bench VerifyCardES256 -benchmem -cpu 1 ./webtrust
func BenchmarkVerifyCardES256(b *testing.B) {
	const host = "bench.agents.example"
	key := testsupport.Key(b, jose.ES256)
	jwk, err := jose.NewJWK(key.Public(), "bench-es256", jose.ES256)
	if err != nil {
		b.Fatal(err)
	}
	set, err := jwks.Set{Keys: []jose.JWK{jwk}}.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	signed, err := signer.Sign(b.Context(), testsupport.Card(b, "spec-sample.json"), signer.Options{
		Keys: []signer.Key{{Signer: key, Alg: jose.ES256, KID: jwk.Kid}},
		Card: card.Options{StripUnknown: true},
	})
	if err != nil {
		b.Fatal(err)
	}
	docs := map[string][]byte{AgentCardPath: signed.Card, "/jwks.json": set}
	p := newPKI(b)
	site := p.newSite(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=86400")
		w.Write(doc)
	}), host)
	policy, err := ParsePolicy("bench.yaml", []byte("rules:\n  - host: "+host+"\n    jwks: https://"+host+"/jwks.json\n"))
	if err != nil {
		b.Fatal(err)
	}
	c := p.newTestClient(b, Options{Policy: policy}, site)
	verify := func() {
		res, err := c.VerifyCard(b.Context(), "https://"+host)
		if err != nil || !res.Accepted() {
			b.Fatalf("card not accepted: %v %+v", err, res)
		}
	}
	verify() // fills the cache
	b.SetBytes(int64(len(signed.Card)))
	b.ReportAllocs()
	for b.Loop() {
		verify()
	}
}
