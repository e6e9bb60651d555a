package signer

import (
	"strings"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testsupport"
	"golang.org/x/mod/sumdb/note"
)

// revokedAsV03 is review #1's construction: a v1.0 card C (signed, with
// inclusion proofs) whose every interface is on protocolVersion "1.0", and
// C's signatures on the v0.3 card that a2a-python reads as C byte for byte,
// the card saying "protocolVersion": "1.0". Cardsign's own reading of the
// v0.3 card ("0.3" on every interface) is other bytes.
func revokedAsV03(t *testing.T) (c *Result, v03 []byte, k testKey, logKeys []note.Verifier) {
	t.Helper()
	v03src := strings.Replace(string(testsupport.Card(t, "v03.json")), `"protocolVersion": "0.3.0"`, `"protocolVersion": "1.0"`, 1)
	l, err := card.Load([]byte(v03src), card.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs := l.Readings()
	if len(rs) < 2 || rs[1].Mapping != card.MappingPython {
		t.Fatalf("readings %+v: want cardsign's and a2a-python's", rs)
	}
	c, k, logKeys = loggedData(t, rs[1].Value.Compact())
	return c, testsupport.WithSignatures(t, []byte(v03src), c.Card), k, logKeys
}

// TestVerifyRevokedCardAsV03 (review #1): a revoked v1.0 card rewritten as
// v0.3 is still revoked. Its signatures verify over the a2a-python reading,
// which is the revoked card, so that reading's canonical SHA-256 is looked
// up too, not only cardsign's reading's. Their inclusion proofs, which name
// the revoked card's SHA-256, hold for that reading.
func TestVerifyRevokedCardAsV03(t *testing.T) {
	c, v03, k, logKeys := revokedAsV03(t)
	revokedCard := func(sum [32]byte) (string, bool) {
		return "agent payments version 1, revoked: leaked", sum == c.CanonicalSHA256
	}
	// The construction holds: without the revocation the v0.3 card
	// verifies, under a2a-python's reading, proofs and all.
	v := mustVerify(t, v03, VerifyOptions{Trusted: keySet(k), LogKeys: logKeys, RequireLog: true})
	if !v.Valid(true) || v.Checks[0].Mapping != card.MappingPython || v.Checks[0].Logged == nil {
		t.Fatalf("the v0.3 rewrite of C: %+v", v.Checks)
	}
	if v.CanonicalSHA256 == c.CanonicalSHA256 {
		t.Fatal("cardsign's reading of the v0.3 card is C: the test shows nothing")
	}
	// The original, and its v0.3 rewrite, are both revoked.
	for name, data := range map[string][]byte{"v1.0 original": c.Card, "v0.3 rewrite": v03} {
		v := mustVerify(t, data, VerifyOptions{Trusted: keySet(k), RevokedCard: revokedCard})
		if v.Valid(false) || !strings.Contains(v.CardRevoked, "leaked") {
			t.Errorf("%s: valid %v, CardRevoked %q; want revoked", name, v.Valid(false), v.CardRevoked)
		}
	}
}
