package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
)

// revocationFixture is a trusted key "b" (its JWKS in jwks.json) that signs
// revocation documents, in dir.
type revocationFixture struct {
	dir, jwksFile string
	key           *ecdsa.PrivateKey
}

func newRevocationFixture(t *testing.T) revocationFixture {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := jose.NewJWK(key.Public(), "b", jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	set, err := jwks.Set{Keys: []jose.JWK{pub}}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	f := revocationFixture{dir: dir, jwksFile: filepath.Join(dir, "jwks.json"), key: key}
	writeFile(t, f.jwksFile, set)
	return f
}

// document writes a revocation document signed by b, of sequence 1 and
// valid for the hour to come, and returns its path.
func (f revocationFixture) document(t *testing.T, name string, doc jwks.Revocations) string {
	t.Helper()
	doc.Sequence, doc.IssuedAt, doc.ExpiresAt = 1, time.Now().Add(-time.Minute).Truncate(time.Second), time.Now().Add(time.Hour)
	return f.signed(t, name, doc)
}

// signed writes doc as it is (sequence and times included), signed by b,
// and returns its path.
func (f revocationFixture) signed(t *testing.T, name string, doc jwks.Revocations) string {
	t.Helper()
	b, err := jwks.SignRevocations(t.Context(), doc, f.key, jose.ES256, "b")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, name)
	writeFile(t, path, b)
	return path
}

// TestVerifyRevokedKeySaysSo: issue 24 item 19. A card whose only key is
// revoked was reported as "no signature over spec bytes", as if it had been
// signed wrongly; the portability line and the verdict now name the
// revoked key, when it was revoked and why (escaped: the reason is the
// document's text).
func TestVerifyRevokedKeySaysSo(t *testing.T) {
	f := newRevocationFixture(t)
	var jwk struct{ Kid string }
	if err := json.Unmarshal([]byte(mustRun(t, f.dir, "keygen", "--out", "a.pem").Stdout), &jwk); err != nil || jwk.Kid == "" {
		t.Fatalf("keygen: %v", err)
	}
	signed := filepath.Join(f.dir, "signed.json")
	writeFile(t, signed, []byte(mustRun(t, f.dir, "sign", "--key", "file:a.pem", filepath.Join(repoRoot, "testdata/cards/params.json")).Stdout))
	at := time.Date(2026, 11, 21, 8, 30, 0, 0, time.UTC)
	rev := f.document(t, "revocations.json", jwks.Revocations{Revoked: []jwks.Revocation{{KID: jwk.Kid, RevokedAt: at, Reason: "key-compromise: laptop stolen\n\x1b[2J"}}})

	r := cardsign(t, f.dir, nil, "verify", "--jwks", f.jwksFile, "--revocations", rev, signed)
	want := "signed by a revoked key (kid " + jwk.Kid + ", revoked at 2026-11-21T08:30:00Z (key-compromise: laptop stolen\\n\\x1b[2J))"
	if r.Code != exitFail || !strings.Contains(r.Stdout, "verifies in: spec ✘ ("+want+")") || strings.Contains(r.Stdout, "no signature over") {
		t.Errorf("verify: exit %d, want %d and the portability line to name the revoked key:\n%s", r.Code, exitFail, r.Stdout)
	}
	if !strings.Contains(r.Stderr, "verification failed: "+want+"\n") {
		t.Errorf("verify: the verdict does not name the revoked key:\n%s", r.Stderr)
	}
	for _, out := range []string{r.Stdout, r.Stderr} {
		if strings.ContainsAny(out, "\x1b") {
			t.Errorf("the revocation reason reaches the terminal raw: %q", out)
		}
	}

	// Without the revocation document the key is merely unknown: that
	// stays "no signature", since nothing says it was revoked.
	r = cardsign(t, f.dir, nil, "verify", "--jwks", f.jwksFile, "--revocations", "none", signed)
	if r.Code != exitFail || strings.Contains(r.Stdout, "revoked") || !strings.Contains(r.Stderr, "verification failed: no signature verifies") {
		t.Errorf("verify without revocations: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestAuditVerifyHeadZeroChecksNothing: issue 24 item 19. A revocation
// document signed before the first audit record has head record 0, the
// empty log, which every log extends: audit verify said it checked against
// it and "the log holds it". It now says there was nothing to check.
func TestAuditVerifyHeadZeroChecksNothing(t *testing.T) {
	clearConnEnv(t)
	clearIDTokenEnv(t)
	f := newRevocationFixture(t)
	addr := startDaemonOn(t, filepath.Join(f.dir, "data"))
	mustRun(t, f.dir, "sign", "--server", addr, filepath.Join(repoRoot, "testdata/cards/params.json"))
	for _, args := range [][]string{
		{"--jwks", f.jwksFile, "--revocations", f.document(t, "head0.json", jwks.Revocations{AuditHead: &jwks.AuditHead{Seq: 0, Hash: audit.Genesis()}})},
		{"--head", "0:" + strings.Repeat("00", 32)},
	} {
		r := cardsign(t, f.dir, nil, append([]string{"audit", "verify", "--server", addr}, args...)...)
		if r.Code != exitOK || strings.Contains(r.Stdout, "checked against") || strings.Contains(r.Stdout, "holds it") ||
			!strings.Contains(r.Stdout, "note: nothing to check against: the published head from ") || !strings.Contains(r.Stdout, "is record 0, the empty log") {
			t.Errorf("audit verify %v: exit %d\n%s%s", args, r.Code, r.Stdout, r.Stderr)
		}
	}
}
