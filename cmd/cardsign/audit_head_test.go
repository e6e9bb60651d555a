package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
)

// TestHeadSourceLoad: where `audit verify` takes its head from, and what it
// refuses. An expired revocation document still gives its head (a kept copy
// must keep catching a truncation); one without audit_head gives none, and
// says why.
func TestHeadSourceLoad(t *testing.T) {
	ctx := t.Context()
	f := newRevocationFixture(t)
	dir, jwksFile := f.dir, f.jwksFile
	hash := bytes.Repeat([]byte{0x5b}, 32)
	issued := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	sign := func(name string, head *jwks.AuditHead, expires time.Time) string {
		t.Helper()
		return f.signed(t, name, jwks.Revocations{Sequence: 3, IssuedAt: issued, ExpiresAt: expires, AuditHead: head})
	}
	fresh := sign("fresh.json", &jwks.AuditHead{Seq: 7, Hash: hash}, time.Now().Add(time.Hour))
	expired := sign("expired.json", &jwks.AuditHead{Seq: 7, Hash: hash}, issued.Add(time.Hour))
	old := sign("old.json", nil, time.Now().Add(time.Hour))
	client := &http.Client{Timeout: time.Second}

	for _, src := range []string{fresh, expired} {
		p, err := headSource{jwks: jwksFile, revocations: src}.load(ctx, client, time.Now())
		if err != nil || p.head.Seq != 7 || !bytes.Equal(p.head.Hash, hash) || !strings.Contains(p.from, "sequence 3") {
			t.Fatalf("%s: %+v, %v", src, p, err)
		}
		if (src == expired) != (len(p.note) == 1) {
			t.Errorf("%s: notes %q", src, p.note)
		}
	}
	if _, err := (headSource{jwks: jwksFile, revocations: old}).load(ctx, client, time.Now()); !errors.Is(err, errNoHeadSource) || !strings.Contains(err.Error(), "has no audit_head") {
		t.Errorf("document without audit_head: %v", err)
	}
	if _, err := (headSource{}).load(ctx, client, time.Now()); err != errNoHeadSource {
		t.Errorf("no source: %v", err)
	}
	if p, err := (headSource{head: "7:" + strings.Repeat("5b", 32)}).load(ctx, client, time.Now()); err != nil || p.head.Seq != 7 {
		t.Errorf("--head: %+v, %v", p, err)
	}

	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	forged, err := jwks.SignRevocations(ctx, jwks.Revocations{Sequence: 9, IssuedAt: issued, ExpiresAt: time.Now().Add(time.Hour), AuditHead: &jwks.AuditHead{Seq: 1, Hash: hash}}, otherKey, jose.ES256, "b")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "forged.json"), forged)
	if _, err := (headSource{jwks: jwksFile, revocations: filepath.Join(dir, "forged.json")}).load(ctx, client, time.Now()); !errors.Is(err, jwks.ErrRevocationsBadSignature) {
		t.Errorf("document signed by another key: %v", err)
	}

	var up *usageProblem
	for name, hs := range map[string]headSource{
		"head and jwks":            {head: "7:" + strings.Repeat("5b", 32), jwks: jwksFile},
		"revocations alone":        {revocations: fresh},
		"jwks file alone":          {jwks: jwksFile},
		"head not SEQ:HASH":        {head: "7"},
		"head with a short hash":   {head: "7:5b5b"},
		"head with a negative seq": {head: "-7:" + strings.Repeat("5b", 32)},
	} {
		if _, err := hs.load(ctx, client, time.Now()); !errors.As(err, &up) {
			t.Errorf("%s: %v, want a usage problem", name, err)
		}
	}
}
