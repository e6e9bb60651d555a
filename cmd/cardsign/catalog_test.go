package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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
	"github.com/cardsign/cardsign/strictjson"
)

// catalogSite serves a catalog of two entries signed under
// did:web:catalog.example, its DID document and the artifacts; catalog
// picks which catalog is served.
type catalogSite struct {
	webSite
	catalogs map[string][]byte
	serve    atomic.Value // string: the key of catalogs served
}

func newCatalogSite(t *testing.T) *catalogSite {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const domain = "catalog.example"
	did := aicatalog.DID(domain)
	sk := aicatalog.SigningKey{Signer: key, DID: did, Fragment: "k1"}
	artifacts := map[string][]byte{
		"/agents/billing.json": []byte(`{"name":"Billing"}`),
		"/agents/support.json": []byte(`{"name":"Support"}`),
	}
	now := time.Now().Truncate(time.Second)
	build := func(issued time.Time, version int64, tamper bool) []byte {
		var entries []aicatalog.Entry
		for _, name := range []string{"billing", "support"} {
			u := "https://" + domain + "/agents/" + name + ".json"
			sum := sha256.Sum256(artifacts["/agents/"+name+".json"])
			id := aicatalog.Identifier(domain, "a2a", name)
			sub := aicatalog.Subject{Identifier: id, Type: aicatalog.A2ACardType, URL: u, Digest: "sha256:" + hex.EncodeToString(sum[:])}
			rel := strictjson.ObjectValue(strictjson.Member{Key: "version", Val: strictjson.IntValue(version)})
			m := aicatalog.Manifest{Contributor: did, Subject: sub, Extensions: []strictjson.Member{{Key: "dev.cardsign.release", Val: rel}}}
			signed, err := aicatalog.Sign(t.Context(), m.Value(), aicatalog.TypManifest, sk, issued, issued.Add(24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			e := aicatalog.Entry{Identifier: id, Type: aicatalog.A2ACardType, URL: u, Digest: sub.Digest, TrustManifests: []strictjson.Value{signed.Value}}
			if tamper && name == "support" {
				e.Digest = "sha256:" + strings.Repeat("0", 64)
			}
			entries = append(entries, e)
		}
		cat := aicatalog.Catalog{Host: aicatalog.Host{DisplayName: "Acme", Identifier: did}, Entries: entries}
		signed, err := aicatalog.Sign(t.Context(), cat.Value(), aicatalog.TypCatalog, sk, issued, issued.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return signed.Value.Indent()
	}
	s := &catalogSite{catalogs: map[string][]byte{
		"current":  build(now.Add(-time.Minute), 2, false),
		"older":    build(now.Add(-time.Hour), 1, false),
		"tampered": build(now.Add(-time.Minute), 2, true),
	}}
	s.serve.Store("current")
	didDoc, err := aicatalog.DIDDocument(domain, []aicatalog.VerificationKey{{Fragment: "k1", Public: key.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	s.webSite = newWebSite(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == aicatalog.DIDPath:
			w.Header().Set("Content-Type", "application/did+json")
			w.Write(didDoc)
		case r.URL.Path == aicatalog.WellKnownPath:
			w.Header().Set("Content-Type", aicatalog.MediaType)
			w.Write(s.catalogs[s.serve.Load().(string)])
		case artifacts[r.URL.Path] != nil:
			w.Write(artifacts[r.URL.Path])
		default:
			http.NotFound(w, r)
		}
	}), domain)
	return s
}

func TestCLICatalogVerify(t *testing.T) {
	s := newCatalogSite(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	file := filepath.Join(dir, "catalog.json")
	writeFile(t, file, s.catalogs["current"])
	const url = "https://catalog.example/.well-known/ai-catalog.json"
	base := append([]string{"catalog", "verify", "--ca-file", s.caFile}, s.resolve...)
	accepted := func(i int, name string) string {
		return "entry[" + string(rune('0'+i)) + "] urn:air:catalog.example:a2a:" + name + ": accepted (signer did:web:catalog.example, issued "
	}
	for _, tc := range []struct {
		name, serve string
		args        []string
		code        int
		lines       []string
	}{
		{"accepted", "current", []string{url}, exitOK,
			[]string{"catalog " + url + ": accepted (signer did:web:catalog.example, issued ", accepted(0, "billing"), accepted(1, "support")}},
		{"a local file", "current", []string{file}, exitOK, []string{"catalog " + file + ": accepted", accepted(0, "billing")}},
		{"first run with state", "current", []string{"--state", state, url}, exitOK, []string{accepted(1, "support")}},
		{"rollback", "older", []string{"--state", state, url}, exitFail,
			[]string{"entry[0] urn:air:catalog.example:a2a:billing: refused: rollback: release version 1, older than version 2 accepted before"}},
		{"digest changed after signing", "tampered", []string{url}, exitFail,
			[]string{accepted(0, "billing"), "entry[1] urn:air:catalog.example:a2a:support: refused: "}},
		{"unreachable", "current", []string{"https://nowhere.example/.well-known/ai-catalog.json"}, exitUsage, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.serve.Store(tc.serve)
			runWanting(t, dir, base, tc.args, tc.code, tc.lines)
		})
	}
	if st, err := os.Stat(state); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("state file: %v", err)
	}
}
