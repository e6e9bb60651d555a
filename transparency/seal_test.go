package transparency

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
)

// TestSealedEntry: a sealed entry shows commitments, not the caller, card
// name or hosts; it parses back; the owner's salt finds it by name or host
// (in any case) and opens its caller, and another salt does neither.
func TestSealedEntry(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	salt, other := AgentSalt(secret, "payments"), AgentSalt(secret, "billing")
	if bytes.Equal(salt, other) || bytes.Equal(salt, AgentSalt([]byte("another secret"), "payments")) {
		t.Fatal("salts of different agents or secrets are equal")
	}
	rec := audit.Record{Seq: 7, Time: time.Unix(1, 0), Caller: "token:ci", CardName: "Payments Agent", CardVersion: "1.0.0",
		CanonicalSHA256: make([]byte, 32), KID: "k1", Alg: "ES256", Signature: "sig", Hash: make([]byte, 32),
		Hosts: []string{"pay.example.com", "api.example.com"}}
	SealRecord(&rec, salt)
	e := NewEntry(rec, rec.Hosts)
	b := e.Marshal()
	for _, secret := range []string{"token:ci", "Payments Agent", "example.com"} {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the sealed entry shows %q: %s", secret, b)
		}
	}
	if !strings.Contains(string(b), `"version":"1.0.0"`) || !strings.Contains(string(b), `"kid":"k1"`) {
		t.Errorf("the sealed entry lost what stays public: %s", b)
	}
	parsed, err := ParseEntry(b)
	if err != nil || !parsed.Sealed() {
		t.Fatalf("ParseEntry = %+v, %v; want a sealed entry", parsed, err)
	}
	for _, tc := range []struct {
		watch string
		salts [][]byte
		want  bool
	}{
		{"Payments Agent", [][]byte{salt}, true},
		{"PAY.example.com.", [][]byte{other, salt}, true},
		{"api.example.com", [][]byte{salt}, true},
		{"Payments Agent", [][]byte{other}, false},
		{"Payments Agent", nil, false},
		{"*.example.com", [][]byte{salt}, false}, // no pattern opens a commitment
		{"payments agent", [][]byte{salt}, false},
	} {
		if got := MatchesSealed(parsed, tc.watch, tc.salts); got != tc.want {
			t.Errorf("MatchesSealed(%q, %d salts) = %v, want %v", tc.watch, len(tc.salts), got, tc.want)
		}
	}
	if !parsed.OpensCaller(salt, "token:ci") || parsed.OpensCaller(other, "token:ci") || parsed.OpensCaller(salt, "token:cd") {
		t.Error("OpensCaller does not open exactly the caller under the owner's salt")
	}
	// An open entry is not sealed, whatever its card is named.
	open := NewEntry(audit.Record{Seq: 1, Caller: "token:ci", CardName: SealedPrefix + "x", CanonicalSHA256: make([]byte, 32), Hash: make([]byte, 32)}, nil)
	if open.Sealed() || MatchesSealed(open, "x", [][]byte{salt}) {
		t.Error("an open entry whose card name starts with sealed: reads as sealed")
	}
}
