package transparency

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cardsign/cardsign/audit"
)

// SealedPrefix starts every commitment a sealed entry shows in place of a
// caller, a card name or a host.
const SealedPrefix = "sealed:"

// sealDomain separates the seal's HMACs from every other use of the keys.
const sealDomain = "cardsign-log-seal-v1"

// AgentSalt is the salt of one agent's sealed entries, derived from the
// log's seal secret: its owner fetches it (reader rights) to check and find
// the agent's entries, and learns nothing about other agents' entries.
func AgentSalt(secret []byte, agentID string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(sealDomain + "\x00agent\x00" + agentID))
	return m.Sum(nil)
}

// Commit is the commitment to value, a caller, card name or host (field
// "caller", "name" or "host"), under salt: "sealed:" and 64 lower-case hex
// digits of HMAC-SHA256. Without the salt it cannot be brute-forced from a
// list of likely names; with it, it can be checked.
func Commit(salt []byte, field, value string) string {
	if field == "host" {
		value = normalHost(value)
	}
	m := hmac.New(sha256.New, salt)
	m.Write([]byte(sealDomain + "\x00" + field + "\x00" + value))
	return SealedPrefix + hex.EncodeToString(m.Sum(nil))
}

// SealRecord gives rec the commitments its entry shows instead of its
// caller, card name and hosts (audit.Record.Sealed).
func SealRecord(rec *audit.Record, salt []byte) {
	rec.Sealed = &audit.Sealed{Caller: Commit(salt, "caller", rec.Caller), CardName: Commit(salt, "name", rec.CardName)}
	hosts := make([]string, len(rec.Hosts))
	for i, h := range rec.Hosts {
		hosts[i] = Commit(salt, "host", h)
	}
	rec.Hosts = hosts
}

// Sealed reports whether e is a sealed entry: a private agent's, whose
// caller, card name and hosts are commitments.
func (e Entry) Sealed() bool {
	return strings.HasPrefix(e.Card.Name, SealedPrefix) && strings.HasPrefix(e.Caller, SealedPrefix)
}

// MatchesSealed reports whether the sealed entry e commits, under one of
// salts, to the card name w or to the host w (exact: a pattern cannot be
// matched against a commitment).
func MatchesSealed(e Entry, w string, salts [][]byte) bool {
	if !e.Sealed() {
		return false
	}
	for _, s := range salts {
		if e.Card.Name == Commit(s, "name", w) || slices.Contains(e.Card.Hosts, Commit(s, "host", w)) {
			return true
		}
	}
	return false
}

// OpensCaller reports whether the sealed entry e names caller, under salt.
func (e Entry) OpensCaller(salt []byte, caller string) bool {
	return e.Sealed() && e.Caller == Commit(salt, "caller", caller)
}

// SealSecret is the secret AgentSalt derives salts from, the same on every
// replica with the same log keys and never stored: the SHA-256 of the
// first log key's Ed25519 signature (deterministic, RFC 8032) over a text
// that no checkpoint can be (it holds spaces, which an origin may not). A
// rotation of that key changes it, and so every agent's salt for the
// entries after it.
func (s *Signer) SealSecret() ([]byte, error) {
	if len(s.signers) == 0 {
		return nil, errors.New("transparency: no log key to derive the seal secret from")
	}
	sig, err := s.signers[0].Sign([]byte("cardsign log seal secret v1 for " + s.origin + "\n"))
	if err != nil {
		return nil, fmt.Errorf("transparency: seal secret: %w", err)
	}
	sum := sha256.Sum256(sig)
	return sum[:], nil
}
