package transparency

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/mod/sumdb/note"
)

// noteSigner signs notes with an Ed25519 crypto.Signer, wherever its private
// key lives (a file, an HSM): note.NewSigner only takes the key itself.
type noteSigner struct {
	name   string
	hash   uint32
	signer crypto.Signer
}

func (s noteSigner) Name() string    { return s.name }
func (s noteSigner) KeyHash() uint32 { return s.hash }
func (s noteSigner) Sign(msg []byte) ([]byte, error) {
	// Ed25519 signs the message itself: crypto.Hash(0).
	return s.signer.Sign(rand.Reader, msg, crypto.Hash(0))
}

// CheckOrigin reports whether origin can name a log: C2SP tlog-checkpoint
// wants a schema-less URL, and a note key name may hold no space or "+".
func CheckOrigin(origin string) error {
	switch {
	case origin == "":
		return errors.New("the log's origin is empty: name it, e.g. \"cardsign.example.com/log\"")
	case strings.Contains(origin, "://"):
		return fmt.Errorf("origin %q has a scheme: C2SP wants a schema-less URL such as \"cardsign.example.com/log\"", origin)
	case strings.ContainsFunc(origin, func(r rune) bool { return r == '+' || unicode.IsSpace(r) || !unicode.IsPrint(r) }):
		return fmt.Errorf("origin %q holds a space, a \"+\" or an unprintable character, which a signed note's key name may not", origin)
	}
	return nil
}

// VerifierKey is the published form of a log key (a note verifier key,
// "ORIGIN+HASH+BASE64"): what verifiers pass to cardsign verify --log-key.
func VerifierKey(origin string, pub crypto.PublicKey) (string, error) {
	ed, ok := pub.(ed25519.PublicKey)
	if !ok {
		return "", fmt.Errorf("transparency: a log key must be Ed25519, not %T", pub)
	}
	if err := CheckOrigin(origin); err != nil {
		return "", fmt.Errorf("transparency: %w", err)
	}
	return note.NewEd25519VerifierKey(origin, ed)
}

// ParseVerifierKeys reads log verifier keys: one per line, blank lines and
// lines starting with "#" skipped. Every key must be Ed25519.
func ParseVerifierKeys(text string) ([]note.Verifier, error) {
	var vs []note.Verifier
	seen := map[string]bool{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || seen[line] {
			// A key listed twice is one key (note.Open would call the
			// pair ambiguous and trust neither).
			continue
		}
		seen[line] = true
		v, err := note.NewVerifier(line)
		if err != nil {
			return nil, fmt.Errorf("transparency: log key on line %d: %w (want ORIGIN+HASH+BASE64, as /.well-known/cardsign-log-key serves)", i+1, err)
		}
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		return nil, errors.New("transparency: no log key (want ORIGIN+HASH+BASE64, as /.well-known/cardsign-log-key serves)")
	}
	return vs, nil
}

// Signer signs checkpoints of one log with each of its keys: during a log
// key rotation the old and the new key both sign, so verifiers that know
// either accept every checkpoint.
type Signer struct {
	origin  string
	signers []note.Signer
	vkeys   []string // of signers, in order
	retired []string // verifier keys that no longer sign
}

// Retire adds the verifier keys of log keys that no longer sign (a rotation
// done): they are published and verified with beside the signing keys, so
// the proofs in cards made before the rotation keep verifying. Each must be
// an Ed25519 key named for this log's origin.
func (s *Signer) Retire(vkeys ...string) error {
	for _, k := range vkeys {
		v, err := note.NewVerifier(k)
		if err != nil {
			return fmt.Errorf("transparency: retired log key %q: %w", k, err)
		}
		if v.Name() != s.origin {
			return fmt.Errorf("transparency: retired log key %q is named %q, not the log's origin %q", k, v.Name(), s.origin)
		}
		if slices.Contains(s.vkeys, k) || slices.Contains(s.retired, k) {
			continue
		}
		s.retired = append(s.retired, k)
	}
	return nil
}

// NewSigner returns a Signer for the log origin with keys (Ed25519, at
// least one; the first is the log's main key).
func NewSigner(origin string, keys ...crypto.Signer) (*Signer, error) {
	if len(keys) == 0 {
		return nil, errors.New("transparency: no log key")
	}
	s := &Signer{origin: origin}
	for i, k := range keys {
		vkey, err := VerifierKey(origin, k.Public())
		if err != nil {
			return nil, fmt.Errorf("log key %d: %w", i+1, err)
		}
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return nil, fmt.Errorf("transparency: log key %d: %w", i+1, err)
		}
		for _, have := range s.signers {
			if have.KeyHash() == v.KeyHash() {
				return nil, fmt.Errorf("transparency: log key %d is listed twice", i+1)
			}
		}
		s.signers = append(s.signers, noteSigner{name: origin, hash: v.KeyHash(), signer: k})
		s.vkeys = append(s.vkeys, vkey)
	}
	return s, nil
}

// Origin is the log's origin.
func (s *Signer) Origin() string { return s.origin }

// SigningKeys are the verifier keys of the keys that sign checkpoints.
func (s *Signer) SigningKeys() []string { return slices.Clone(s.vkeys) }

// VerifierKeys are the log's public keys, as published: the signing keys,
// then the retired ones.
func (s *Signer) VerifierKeys() []string { return append(slices.Clone(s.vkeys), s.retired...) }

// Verifiers are the verifiers of the log's keys.
func (s *Signer) Verifiers() []note.Verifier {
	keys := s.VerifierKeys()
	vs := make([]note.Verifier, len(keys))
	for i, k := range keys {
		v, err := note.NewVerifier(k)
		if err != nil {
			panic("transparency: a key NewSigner accepted does not parse: " + err.Error())
		}
		vs[i] = v
	}
	return vs
}

// GenerateKey makes a new Ed25519 log key.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	return k, err
}
