package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store/sqlite"
)

// legacyStore makes, in dataDir, what a cardsignd from before the audit of
// key administration left: two file keys whose records were written with no
// key administration record (the old binary wrote none), the second revoked.
// It returns the kids, active key first.
func legacyStore(t *testing.T, dataDir string) (active, revoked string) {
	t.Helper()
	ctx := t.Context()
	keyDir := filepath.Join(dataDir, "keys")
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dataDir, "cardsign.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fb, err := file.New(file.Config{AllowedDirs: []string{keyDir}})
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	var kids []string
	for i := range 2 {
		k, err := file.Generate(jose.ES256)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(keyDir, fmt.Sprintf("legacy-%d.pem", i))
		if err := file.Write(path, k, jose.ES256); err != nil {
			t.Fatal(err)
		}
		key, err := backends.OpenWith(ctx, fb, "file:"+path, backends.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pub, err := key.JWK()
		if err != nil {
			t.Fatal(err)
		}
		at := past.Add(time.Duration(i) * time.Minute)
		rec := jwks.KeyRecord{KID: key.KID, URI: "file:" + path, Alg: key.Alg, Public: pub, CreatedAt: at, PublishAt: at, ActivateAt: &at}
		if err := st.CreateKey(ctx, rec, nil); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, key.KID)
	}
	// The old binary's revocation: the key record only.
	revokedAt := past.Add(10 * time.Minute)
	if err := st.UpdateKeys(ctx, func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) {
		for i := range recs {
			if recs[i].KID == kids[1] {
				recs[i].RevokedAt, recs[i].RevokeReason = &revokedAt, "key-compromise: legacy laptop stolen"
			}
		}
		return recs, nil
	}); err != nil {
		t.Fatal(err)
	}
	return kids[0], kids[1]
}

// TestErasedLegacyRevocation: on an upgraded store, whose keys predate the
// audit of key administration (no key record in the audit log), a key's
// revocation erased in the SQLite file is refused by store copy and
// reported by cardsign audit verify, from the signed revocation document
// that lists the key (and, since the first start recorded the legacy keys,
// from the audit trail: TestLegacyKeysBaseline).
func TestErasedLegacyRevocation(t *testing.T) {
	work := t.TempDir()
	data := filepath.Join(work, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	active, revoked := legacyStore(t, data)

	// The upgraded daemon signs and stores a revocation document listing
	// the revoked key; a verifier keeps a copy, with the JWKS.
	d := startDaemon(t, data)
	_, jwksBody := httpGet(t, d.jwksURL())
	_, revBody := httpGet(t, "http://"+d.http+jwks.RevocationsPath)
	d.stop()
	if !strings.Contains(string(jwksBody), active) {
		t.Fatalf("the JWKS does not publish the active legacy key %s: %s", active, jwksBody)
	}
	var listed []struct {
		KID string `json:"kid"`
	}
	payload(t, revBody, "revoked", &listed)
	if len(listed) != 1 || listed[0].KID != revoked {
		t.Fatalf("the revocation document lists %v, want %s", listed, revoked)
	}
	savedJWKS, savedRev := filepath.Join(work, "jwks.json"), filepath.Join(work, "revocations.json")
	if err := os.WriteFile(savedJWKS, jwksBody, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(savedRev, revBody, 0o600); err != nil {
		t.Fatal(err)
	}

	tamperDB(t, data, `DROP TRIGGER keys_immutable`, `UPDATE keys SET revoked_at = NULL, revoke_reason = '' WHERE kid = '`+revoked+`'`)

	dst := newPGDatabase(t)
	r := runDaemonOnce(t, "store", "copy", "--from", data, "--to", dst)
	if r.Code != 1 || !strings.Contains(r.Stderr, "the revocation was erased outside cardsignd") || !strings.Contains(r.Stderr, revoked) ||
		!strings.Contains(r.Stderr, "nothing was copied") {
		t.Fatalf("store copy of an upgraded source whose legacy revocation was erased: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// A document behind the revocation counter (an older one put back, or
	// a signing interrupted) is named; the erased revocation still refuses.
	tamperDB(t, data, `UPDATE sequences SET value = value + 1 WHERE name = 'revocations'`)
	r = runDaemonOnce(t, "store", "copy", "--from", data, "--to", dst)
	if r.Code != 1 || !strings.Contains(r.Stderr, "below the revocation counter") || !strings.Contains(r.Stderr, "the revocation was erased") {
		t.Fatalf("store copy with the document behind the counter: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// The daemon on the edited file publishes the key again (and signs a
	// document without it); audit verify
	// against the kept document says the key records disagree.
	d = startDaemon(t, data)
	defer d.stop()
	r = cli(t, work, nil, "audit", "verify", "--server", d.grpc, "--jwks", savedJWKS, "--revocations", savedRev)
	if r.Code != 1 || !strings.Contains(r.Stdout, "audit chain intact") || !strings.Contains(r.Stdout, "key records DISAGREE") ||
		!strings.Contains(r.Stdout, revoked) {
		t.Fatalf("audit verify against the edited keys table, with the kept revocation document: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// baselines returns the key.baseline records of the SQLite store in
// dataDir: kid and caller of each, in order.
func baselines(t *testing.T, dataDir string) []string {
	t.Helper()
	db := openStoreDB(t, dataDir)
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `SELECT kid, caller FROM audit WHERE outcome = 'key.baseline' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var kid, caller string
		if err := rows.Scan(&kid, &caller); err != nil {
			t.Fatal(err)
		}
		out = append(out, kid+" by "+caller)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLegacyKeysBaseline: the first start of the upgraded daemon on a store
// whose keys predate the audit of key administration records each of them
// as it is (key.baseline, caller cardsignd), once: a second start appends
// none. From then on a legacy key's revocation erased in the SQLite file,
// with the signed revocation document deleted too, is refused by store
// copy and reported by cardsign audit verify from the audit trail alone.
func TestLegacyKeysBaseline(t *testing.T) {
	work := t.TempDir()
	data := filepath.Join(work, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	active, revoked := legacyStore(t, data)
	if got := baselines(t, data); len(got) != 0 {
		t.Fatalf("the legacy store has baseline records: %v", got)
	}

	d := startDaemon(t, data)
	d.stop()
	want := []string{active + " by cardsignd", revoked + " by cardsignd"}
	if got := baselines(t, data); !slices.Equal(got, want) {
		t.Fatalf("after the first start: baseline records %v, want %v", got, want)
	}
	d = startDaemon(t, data)
	d.stop()
	if got := baselines(t, data); !slices.Equal(got, want) {
		t.Fatalf("after a second start: baseline records %v, want %v (none appended)", got, want)
	}

	tamperDB(t, data, `DROP TRIGGER keys_immutable`, `UPDATE keys SET revoked_at = NULL, revoke_reason = '' WHERE kid = '`+revoked+`'`,
		`DELETE FROM documents WHERE name = 'revocations'`)

	dst := newPGDatabase(t)
	r := runDaemonOnce(t, "store", "copy", "--from", data, "--to", dst)
	if r.Code != 1 || !strings.Contains(r.Stderr, "revoked_at: the audit trail says") || !strings.Contains(r.Stderr, revoked) ||
		!strings.Contains(r.Stderr, "nothing was copied") {
		t.Fatalf("store copy of a baselined source whose legacy revocation was erased: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	d = startDaemon(t, data)
	defer d.stop()
	r = cli(t, work, nil, "audit", "verify", "--server", d.grpc)
	if r.Code != 1 || !strings.Contains(r.Stdout, "audit chain intact") || !strings.Contains(r.Stdout, "key records DISAGREE") ||
		!strings.Contains(r.Stdout, revoked) {
		t.Fatalf("audit verify of the edited keys table, without a revocation document: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
