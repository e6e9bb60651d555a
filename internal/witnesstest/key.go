package witnesstest

import (
	"bytes"
	"crypto/rand"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// Key is an in-process witness key, for tests that need a witness's
// signatures without a witness process: a hostile witness, or a verifier's
// cosignatures.
type Key struct {
	Name   string
	VKey   string      // its cosignature/v1 verifier key, as a witness prints it
	Signer note.Signer // signs cosignature/v1 lines
}

// NewKey makes a fresh cosignature/v1 Ed25519 key for the witness name.
func NewKey(t testing.TB, name string) Key {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := fnote.VKeyToCosignatureV1(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return Key{Name: name, VKey: cv, Signer: s}
}

// Cosign returns k's cosignature of the checkpoint text (ending in a
// newline) as a witness answers add-checkpoint: its signature line.
func (k Key) Cosign(t testing.TB, text string) []byte {
	t.Helper()
	msg, err := note.Sign(&note.Note{Text: text}, k.Signer)
	if err != nil {
		t.Fatal(err)
	}
	_, sigs, _ := bytes.Cut(msg, []byte("\n\n"))
	return sigs
}
