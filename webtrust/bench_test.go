package webtrust

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testpki"
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
	site, roots := benchSite(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	c, err := New(Options{Policy: policy, RootCAs: roots, Resolve: []string{host + ":443:" + site.Listener.Addr().String()}})
	if err != nil {
		b.Fatal(err)
	}
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

// benchSite serves h over TLS for name with a certificate from a fresh
// test CA, and returns the server and the roots that trust it.
func benchSite(b *testing.B, h http.Handler, name string) (*httptest.Server, *x509.CertPool) {
	ca := testpki.NewCA(b, "webtrust bench CA")
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	certPEM, keyPEM := ca.Issue(b, testpki.Leaf{CommonName: name, DNSNames: []string{name}, Server: true})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		b.Fatal(err)
	}
	s := httptest.NewUnstartedServer(h)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.StartTLS()
	b.Cleanup(s.Close)
	return s, roots
}
