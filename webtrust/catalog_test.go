package webtrust

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/strictjson"
)

// catalogFixture is an organisation's catalog of two agents, signed under
// did:web:catalog.example, served with its DID document, the cards and a
// revocation document from one TLS site.
type catalogFixture struct {
	site                    *site
	catalog, catalogByOther []byte
	cardSums                [2][32]byte
	cards                   [2][]byte
	tamper                  atomic.Bool // serve the second card altered
	revocations             atomic.Pointer[[]byte]
	key                     testKey
}

const catalogDomain = "catalog.example"

func newCatalogFixture(t *testing.T, p *pki, now time.Time) *catalogFixture {
	f := &catalogFixture{key: newTestKey(t, "k1")}
	did := aicatalog.DID(catalogDomain)
	sk := aicatalog.SigningKey{Signer: f.key.key, DID: did, Fragment: "k1"}
	names := []string{"billing", "support"}
	var entries []aicatalog.Entry
	for i, name := range names {
		f.cards[i] = signCardText(t, strings.Replace(testCard, "Billing Agent", name, 1), f.key, "")
		v, err := signer.Verify(t.Context(), f.cards[i], signer.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f.cardSums[i] = v.CanonicalSHA256
		id := aicatalog.Identifier(catalogDomain, "a2a", name)
		u := "https://" + catalogDomain + "/agents/" + name + "/agent-card.json"
		digest := sha256.Sum256(f.cards[i])
		sub := aicatalog.Subject{Identifier: id, Type: aicatalog.A2ACardType, URL: u, Digest: "sha256:" + hex.EncodeToString(digest[:])}
		rel := strictjson.ObjectValue(
			strictjson.Member{Key: "agentId", Val: strictjson.StringValue(name)},
			strictjson.Member{Key: "version", Val: strictjson.IntValue(int64(i + 1))},
			strictjson.Member{Key: "canonicalSha256", Val: strictjson.StringValue(hex.EncodeToString(f.cardSums[i][:]))},
		)
		m := aicatalog.Manifest{Contributor: did, Subject: sub,
			Provenance: []aicatalog.Provenance{{Relation: aicatalog.RelationPublishedFrom, SourceID: "https://github.com/acme/" + name}},
			Extensions: []strictjson.Member{{Key: ReleaseExtension, Val: rel}}}
		signed, err := aicatalog.Sign(t.Context(), m.Value(), aicatalog.TypManifest, sk, now.Add(-time.Hour), now.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, aicatalog.Entry{Identifier: id, Type: aicatalog.A2ACardType, URL: u, Digest: sub.Digest,
			Publisher:      &aicatalog.Publisher{Identifier: did, DisplayName: "Acme"},
			TrustManifests: []strictjson.Value{signed.Value}})
	}
	cat := aicatalog.Catalog{Host: aicatalog.Host{DisplayName: "Acme agents", Identifier: did}, Entries: entries}
	signed, err := aicatalog.Sign(t.Context(), cat.Value(), aicatalog.TypCatalog, sk, now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	f.catalog = signed.Value.Indent()
	// The same catalog signed by another organisation's DID, also served.
	otherKey := newTestKey(t, "o1")
	other := aicatalog.SigningKey{Signer: otherKey.key, DID: aicatalog.DID("other.example"), Fragment: "o1"}
	cat.Host.Identifier = other.DID
	bySigned, err := aicatalog.Sign(t.Context(), cat.Value(), aicatalog.TypCatalog, other, now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	f.catalogByOther = bySigned.Value.Indent()
	f.setRevocations(t, now, nil)

	didDoc, err := aicatalog.DIDDocument(catalogDomain, []aicatalog.VerificationKey{{Fragment: "k1", Public: f.key.key.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	otherDoc, err := aicatalog.DIDDocument("other.example", []aicatalog.VerificationKey{{Fragment: "o1", Public: otherKey.key.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(aicatalog.DIDPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/did+json")
		if r.Host == "other.example" {
			w.Write(otherDoc)
			return
		}
		w.Write(didDoc)
	})
	mux.HandleFunc(aicatalog.WellKnownPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", aicatalog.MediaType)
		if r.Host == "other.example" {
			w.Write(f.catalogByOther)
			return
		}
		w.Write(f.catalog)
	})
	mux.HandleFunc("/agents/billing/agent-card.json", func(w http.ResponseWriter, r *http.Request) { w.Write(f.cards[0]) })
	mux.HandleFunc("/agents/support/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		if f.tamper.Load() {
			w.Write(append([]byte(" "), f.cards[1]...))
			return
		}
		w.Write(f.cards[1])
	})
	mux.HandleFunc(jwks.RevocationsPath, func(w http.ResponseWriter, r *http.Request) { w.Write(*f.revocations.Load()) })
	f.site = p.newSite(t, mux, catalogDomain, "other.example")
	return f
}

// setRevocations serves a revocation document, signed with the catalog's
// key (kid k1, its DID fragment), listing cards.
func (f *catalogFixture) setRevocations(t *testing.T, now time.Time, cards []jwks.CardRevocation) {
	doc := signRevocations(t, f.key, now.Add(-time.Minute), jwks.Revocations{Cards: cards})
	f.revocations.Store(&doc)
}

func writePolicy(t *testing.T, text string) *Policy {
	path := filepath.Join(t.TempDir(), "trust.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVerifyCatalog(t *testing.T) {
	p := newPKI(t)
	now := time.Now().Truncate(time.Second)
	f := newCatalogFixture(t, p, now)
	policy := writePolicy(t, `rules:
  - host: catalog.example
    did: did:web:catalog.example
    revocations: https://catalog.example`+jwks.RevocationsPath+`
    max_revocations_age: 1h
    catalog_signer: did:web:catalog.example
  - host: other.example
    did: did:web:other.example
    catalog_signer: did:web:catalog.example
`)
	const catURL = "https://" + catalogDomain + aicatalog.WellKnownPath
	ids := []string{"urn:air:catalog.example:a2a:billing", "urn:air:catalog.example:a2a:support"}

	t.Run("accepted", func(t *testing.T) {
		c := p.newTestClient(t, Options{Policy: policy}, f.site)
		rep, err := c.VerifyCatalog(t.Context(), catURL)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() || len(rep.Entries) != 2 || rep.Catalog.Signer != "did:web:catalog.example" {
			t.Fatalf("%+v %+v", rep.Catalog, rep.Entries)
		}
		for i, e := range rep.Entries {
			rel := rep.Releases[i]
			if e.Identifier != ids[i] || rel.Version != int64(i+1) || !e.IssuedAt.Equal(now.Add(-time.Hour)) || !e.ExpiresAt.Equal(now.Add(24*time.Hour)) ||
				string(rel.CanonicalSHA256) != string(f.cardSums[i][:]) || rel.AgentID == "" {
				t.Errorf("entry %d: %+v release %+v", i, e, rel)
			}
		}
		if !rep.Catalog.IssuedAt.Equal(now.Add(-time.Hour)) || rep.HostIdentifier != "did:web:catalog.example" {
			t.Errorf("catalog signature times %v %v, host %q", rep.Catalog.IssuedAt, rep.Catalog.ExpiresAt, rep.HostIdentifier)
		}
	})
	t.Run("without a policy", func(t *testing.T) {
		c := p.newTestClient(t, Options{}, f.site)
		rep, err := c.VerifyCatalog(t.Context(), catURL)
		if err != nil || !rep.OK() {
			t.Fatalf("%v %+v", err, rep)
		}
	})
	t.Run("revoked card", func(t *testing.T) {
		f.setRevocations(t, now, []jwks.CardRevocation{{CanonicalSHA256: f.cardSums[1][:], AgentID: "support", Version: 2, RevokedAt: now.Add(-time.Minute), Reason: "withdrawn"}})
		defer f.setRevocations(t, now, nil)
		c := p.newTestClient(t, Options{Policy: policy}, f.site)
		rep, err := c.VerifyCatalog(t.Context(), catURL)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Entries[0].Accepted || rep.Entries[1].Accepted || !hasReason(rep.Entries[1].Reasons, ReasonEntryRevoked, "withdrawn") {
			t.Fatalf("%+v", rep.Entries)
		}
	})
	t.Run("revoked key", func(t *testing.T) {
		// The revocation document lists the catalog's key k1: the catalog
		// signature and both manifests (all by k1) are refused.
		doc := signRevocations(t, f.key, now.Add(-time.Minute), jwks.Revocations{Revoked: []jwks.Revocation{{KID: "k1", RevokedAt: now.Add(-time.Minute), Reason: "keyCompromise"}}})
		f.revocations.Store(&doc)
		defer f.setRevocations(t, now, nil)
		c := p.newTestClient(t, Options{Policy: policy}, f.site)
		rep, err := c.VerifyCatalog(t.Context(), catURL)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Catalog.Accepted || !hasReason(rep.Catalog.Reasons, ReasonKeyRevoked, `the catalog is signed with key "k1", revoked`) ||
			!hasReason(rep.Catalog.Reasons, ReasonKeyRevoked, "keyCompromise") {
			t.Fatalf("catalog %+v", rep.Catalog)
		}
		for i, e := range rep.Entries {
			if e.Accepted || !hasReason(e.Reasons, ReasonKeyRevoked, `its trust manifest [0] is signed with key "k1", revoked`) {
				t.Errorf("entry %d: %+v", i, e)
			}
		}
	})
	t.Run("stale revocations", func(t *testing.T) {
		c := p.newTestClient(t, Options{Policy: policy, Now: func() time.Time { return now.Add(2 * time.Hour) }}, f.site)
		rep, err := c.VerifyCatalog(t.Context(), catURL)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Catalog.Accepted || !hasReason(rep.Catalog.Reasons, ReasonRevocationsInvalid, "max_revocations_age") {
			t.Fatalf("%+v", rep.Catalog)
		}
	})
	t.Run("catalog signer not trusted", func(t *testing.T) {
		c := p.newTestClient(t, Options{Policy: policy}, f.site)
		rep, err := c.VerifyCatalog(t.Context(), "https://other.example"+aicatalog.WellKnownPath)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Catalog.Accepted || !hasReason(rep.Catalog.Reasons, ReasonCatalogSigner, "did:web:other.example") {
			t.Fatalf("%+v", rep.Catalog)
		}
	})
	t.Run("no rule for the host", func(t *testing.T) {
		c := p.newTestClient(t, Options{Policy: &Policy{Rules: policy.Rules[1:]}}, f.site)
		rep, err := c.VerifyCatalog(t.Context(), catURL)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Catalog.Accepted || !hasReason(rep.Catalog.Reasons, ReasonNoTrustRule, "catalog.example") {
			t.Fatalf("%+v", rep.Catalog)
		}
	})
	t.Run("artifact altered", func(t *testing.T) {
		f.tamper.Store(true)
		defer f.tamper.Store(false)
		c := p.newTestClient(t, Options{}, f.site)
		rep, err := c.VerifyCatalog(t.Context(), catURL)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Entries[0].Accepted || rep.Entries[1].Accepted || len(rep.Entries[1].Reasons) == 0 {
			t.Fatalf("%+v", rep.Entries)
		}
	})
	t.Run("a local file", func(t *testing.T) {
		c := p.newTestClient(t, Options{Policy: policy}, f.site)
		rep, err := c.VerifyCatalogDocument(t.Context(), f.catalog, "")
		if err != nil || !rep.OK() {
			t.Fatalf("%v %+v", err, rep)
		}
	})
	t.Run("rollback", func(t *testing.T) {
		c := p.newTestClient(t, Options{}, f.site)
		s, err := LoadState(filepath.Join(t.TempDir(), "state.json"))
		if err != nil {
			t.Fatal(err)
		}
		s.Apply(&CatalogReport{Report: &aicatalog.Report{Catalog: aicatalog.Result{Accepted: true},
			Entries: []aicatalog.EntryResult{{Index: 0, Identifier: ids[1], Result: aicatalog.Result{Accepted: true, IssuedAt: now}}}},
			Releases: []Release{{Version: 3, HasVersion: true}}})
		rep, err := c.VerifyCatalog(t.Context(), catURL)
		if err != nil {
			t.Fatal(err)
		}
		s.Apply(rep)
		if !rep.Entries[0].Accepted || !hasReason(rep.Entries[1].Reasons, ReasonRollback, "version 2, older than version 3") {
			t.Fatalf("%+v", rep.Entries)
		}
	})
}

func hasReason(rs []aicatalog.Reason, code, detail string) bool {
	for _, r := range rs {
		if r.Code == code && strings.Contains(r.Detail, detail) {
			return true
		}
	}
	return false
}
