package jwks

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/jose"
)

// The audit head is written in RFC 8785 order (first: "audit_head" sorts
// before "expires_at"), signed, and read back; a document without it (as
// made before it existed) still verifies, with a nil AuditHead.
func TestRevocationsAuditHead(t *testing.T) {
	ec, _, _ := testKeys(t)
	keys := Set{Keys: []jose.JWK{mustJWK(t, ec, "ec", jose.ES256)}}
	r := sampleRevocations()
	r.Revoked = nil
	r.AuditHead = &AuditHead{Seq: 7, Hash: bytes.Repeat([]byte{0xab}, 32)}
	doc, err := SignRevocations(t.Context(), r, ec, jose.ES256, "ec")
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := decodeJWS(t, doc)
	want := `{"audit_head":{"hash":"` + strings.Repeat("ab", 32) + `","seq":7},"expires_at":"2026-03-02T12:00:00Z","issued_at":"2026-03-01T11:00:00Z","revoked":[],"sequence":7}`
	if payload != want {
		t.Errorf("payload\n got %s\nwant %s", payload, want)
	}
	got, err := VerifyRevocations(doc, keys, r.ExpiresAt.Add(-1))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.AuditHead, r.AuditHead) {
		t.Errorf("AuditHead = %+v, want %+v", got.AuditHead, r.AuditHead)
	}

	r.AuditHead = nil
	old, err := SignRevocations(t.Context(), r, ec, jose.ES256, "ec")
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := decodeJWS(t, old); strings.Contains(p, "audit_head") {
		t.Errorf("a document without a head has the member: %s", p)
	}
	if got, err := VerifyRevocations(old, keys, r.ExpiresAt.Add(-1)); err != nil || got.AuditHead != nil {
		t.Errorf("old document: %+v, %v", got.AuditHead, err)
	}

	for _, bad := range []*AuditHead{{Seq: -1, Hash: make([]byte, 32)}, {Seq: 1 << 53, Hash: make([]byte, 32)}, {Seq: 1, Hash: make([]byte, 31)}} {
		r.AuditHead = bad
		if _, err := SignRevocations(t.Context(), r, ec, jose.ES256, "ec"); err == nil || !strings.Contains(err.Error(), "audit head") {
			t.Errorf("SignRevocations with audit head %+v: %v", bad, err)
		}
	}
}

func TestVerifyRevocationsBadAuditHead(t *testing.T) {
	ec, _, _ := testKeys(t)
	keys := Set{Keys: []jose.JWK{mustJWK(t, ec, "ec", jose.ES256)}}
	hdr := `{"alg":"ES256","kid":"ec","typ":"cardsign-revocations+jws"}`
	rest := `"expires_at":"2026-03-02T12:00:00Z","issued_at":"2026-03-01T11:00:00Z","revoked":[],"sequence":1}`
	h := strings.Repeat("ab", 32)
	for name, head := range map[string]string{
		"not an object":     `"7:` + h + `"`,
		"missing hash":      `{"seq":7}`,
		"unknown member":    `{"hash":"` + h + `","seq":7,"size":7}`,
		"negative seq":      `{"hash":"` + h + `","seq":-1}`,
		"fractional seq":    `{"hash":"` + h + `","seq":7.5}`,
		"seq beyond 2^53":   `{"hash":"` + h + `","seq":9007199254740992}`,
		"short hash":        `{"hash":"abcd","seq":7}`,
		"uppercase hash":    `{"hash":"` + strings.ToUpper(h) + `","seq":7}`,
		"base64url hash":    `{"hash":"q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s","seq":7}`,
		"hash not a string": `{"hash":7,"seq":7}`,
	} {
		doc := rawJWS(t, ec, jose.ES256, hdr, `{"audit_head":`+head+`,`+rest, "")
		if _, err := VerifyRevocations(doc, keys, at(0)); !errors.Is(err, ErrRevocationsMalformed) {
			t.Errorf("%s: err = %v, want ErrRevocationsMalformed", name, err)
		}
	}
}
