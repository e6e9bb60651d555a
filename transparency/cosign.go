package transparency

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// Witnesses (C2SP tlog-witness) cosign checkpoints they have checked to be
// consistent with every earlier checkpoint of the same log they saw
// (C2SP tlog-cosignature, cosignature/v1: a timestamped Ed25519
// signature line on the checkpoint's note). A verifier that requires a
// quorum of them before trusting a checkpoint is safe from a split view
// unless a quorum of witnesses colludes with the log.

// Witness is a witness a log or a verifier trusts: its name (the name in its
// cosignature lines) and its cosignature verifier key.
type Witness struct {
	Name string // the witness's name, e.g. witness.example.com/w1
	Key  string // its verifier key, NAME+HASH+BASE64, as configured

	verifier note.Verifier
}

// ParseWitnessKey reads a witness's verifier key in the signed-note format:
// NAME+HASH+BASE64 of a cosignature/v1 Ed25519 key (type 0x04), as
// litewitness and the public witness network print them, or of a plain
// Ed25519 key (type 0x01), which C2SP tlog-cosignature reads as the same
// key's cosignature/v1 form.
func ParseWitnessKey(vkey string) (Witness, error) {
	vkey = strings.TrimSpace(vkey)
	v, err := fnote.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		return Witness{}, fmt.Errorf("witness key %q: %v (want NAME+HASH+BASE64 of a cosignature/v1 Ed25519 key, as the witness prints it)", vkey, err)
	}
	return Witness{Name: v.Name(), Key: vkey, verifier: v}, nil
}

// WitnessPolicy is what a checkpoint needs to be trusted as witnessed: valid
// cosignatures from at least Quorum of Witnesses.
type WitnessPolicy struct {
	Witnesses []Witness
	Quorum    int
}

// NewWitnessPolicy parses keys (ParseWitnessKey) into a policy requiring
// quorum of them. Two keys of one name, or a quorum outside 1..len(keys),
// are refused.
func NewWitnessPolicy(keys []string, quorum int) (WitnessPolicy, error) {
	var p WitnessPolicy
	for i, k := range keys {
		w, err := ParseWitnessKey(k)
		if err != nil {
			return WitnessPolicy{}, fmt.Errorf("witness %d: %w", i+1, err)
		}
		if slices.ContainsFunc(p.Witnesses, func(o Witness) bool { return o.Name == w.Name }) {
			return WitnessPolicy{}, fmt.Errorf("witness %d: a witness named %q is already listed: name each witness once", i+1, w.Name)
		}
		p.Witnesses = append(p.Witnesses, w)
	}
	if err := p.checkQuorum(quorum); err != nil {
		return WitnessPolicy{}, err
	}
	p.Quorum = quorum
	return p, nil
}

func (p WitnessPolicy) checkQuorum(q int) error {
	switch {
	case len(p.Witnesses) == 0:
		return errors.New("no witness keys: name at least one witness to require a quorum of")
	case q < 1:
		return fmt.Errorf("witness quorum %d: want at least 1", q)
	case q > len(p.Witnesses):
		return fmt.Errorf("witness quorum %d is more than the %d witnesses named: it could never be met", q, len(p.Witnesses))
	}
	return nil
}

// Enabled reports whether p names any witness.
func (p WitnessPolicy) Enabled() bool { return len(p.Witnesses) > 0 }

// Names returns the witnesses' names, in policy order.
func (p WitnessPolicy) Names() []string {
	out := make([]string, len(p.Witnesses))
	for i, w := range p.Witnesses {
		out[i] = w.Name
	}
	return out
}

// Vouch is a witness's valid cosignature on a checkpoint.
type Vouch struct {
	Witness string
	Time    time.Time // the cosignature's timestamp: when the witness saw the checkpoint
}

// Vouches returns the witnesses of p whose valid cosignatures the signed
// checkpoint msg carries, in policy order. It does not check the log's own
// signature (OpenCheckpoint does). A line by a witness of p that does not
// verify is ignored here, as a line by an unknown key is: the checkpoint
// simply lacks that witness's cosignature.
func (p WitnessPolicy) Vouches(msg []byte) []Vouch {
	text, sigs, ok := splitNote(msg)
	if !ok {
		return nil
	}
	var out []Vouch
	for _, w := range p.Witnesses {
		for _, s := range sigs {
			if s.Name != w.Name || s.Hash != w.verifier.KeyHash() {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(s.Base64)
			if err != nil || len(raw) < 4 || !w.verifier.Verify(text, raw[4:]) {
				continue
			}
			v := Vouch{Witness: w.Name}
			if t, err := fnote.CoSigV1Timestamp(s); err == nil {
				v.Time = t
			}
			out = append(out, v)
			break
		}
	}
	return out
}

// ErrWitnessQuorum is wrapped by every *QuorumError.
var ErrWitnessQuorum = errors.New("witness quorum not met")

// QuorumError is a checkpoint that lacks the quorum of cosignatures a
// policy requires.
type QuorumError struct {
	Want    int      // the policy's quorum
	Vouched []string // the witnesses whose valid cosignatures it carries
	Missing []string // the policy's witnesses that did not vouch
}

func (e *QuorumError) Error() string {
	s := fmt.Sprintf("the checkpoint carries valid cosignatures from %d of the %d witnesses required", len(e.Vouched), e.Want)
	if len(e.Vouched) > 0 {
		s += " (" + strings.Join(e.Vouched, ", ") + ")"
	}
	if len(e.Missing) > 0 {
		s += "; none from " + strings.Join(e.Missing, ", ")
	}
	return s
}

func (e *QuorumError) Unwrap() error { return ErrWitnessQuorum }

// Check returns the vouches of the signed checkpoint msg, and a
// *QuorumError when they are fewer than p.Quorum.
func (p WitnessPolicy) Check(msg []byte) ([]Vouch, error) {
	vs := p.Vouches(msg)
	if len(vs) >= p.Quorum {
		return vs, nil
	}
	e := &QuorumError{Want: p.Quorum}
	for _, w := range p.Witnesses {
		if slices.ContainsFunc(vs, func(v Vouch) bool { return v.Witness == w.Name }) {
			e.Vouched = append(e.Vouched, w.Name)
		} else {
			e.Missing = append(e.Missing, w.Name)
		}
	}
	return vs, e
}

// Cosignature is a witness's cosignature of the log's checkpoint of Size
// leaves, as a store keeps it: the witness's name and its signature line's
// base64 (key hash, timestamp and signature).
type Cosignature struct {
	Size      int64
	Witness   string
	Signature string
}

// Line is c as a signed note's signature line, newline included.
func (c Cosignature) Line() string { return "— " + c.Witness + " " + c.Signature + "\n" }

// ParseCosignatures reads the signature lines a witness returns for the
// checkpoint of size leaves (C2SP tlog-witness: one or more lines
// "— NAME BASE64", each ending in a newline). Lines by other names than
// witness are refused: a witness answers for itself.
func ParseCosignatures(size int64, witness string, body []byte) ([]Cosignature, error) {
	if len(body) == 0 || body[len(body)-1] != '\n' {
		return nil, errors.New("cosignature response does not end in a newline")
	}
	var out []Cosignature
	for _, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		rest, ok := strings.CutPrefix(line, "— ")
		if !ok {
			return nil, fmt.Errorf("cosignature line %q does not start with an em dash and a space", line)
		}
		name, b64, ok := strings.Cut(rest, " ")
		if !ok || name == "" || strings.Contains(b64, " ") {
			return nil, fmt.Errorf("cosignature line %q is not \"— NAME BASE64\"", line)
		}
		if name != witness {
			return nil, fmt.Errorf("cosignature line by %q, not by the witness asked (%q)", name, witness)
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err != nil || len(raw) < 4+8 {
			return nil, fmt.Errorf("cosignature line %q: the signature is not base64 of a key hash, a timestamp and a signature", line)
		}
		out = append(out, Cosignature{Size: size, Witness: name, Signature: b64})
	}
	return out, nil
}

// AddCosignatures appends to the signed checkpoint msg the lines of cs
// (of its size) that it does not carry yet, in the order given.
func AddCosignatures(msg []byte, cs []Cosignature) ([]byte, error) {
	_, sigs, ok := splitNote(msg)
	if !ok {
		return nil, errors.New("transparency: the checkpoint is not a signed note")
	}
	out := bytes.Clone(msg)
	for _, c := range cs {
		if slices.ContainsFunc(sigs, func(s note.Signature) bool { return s.Name == c.Witness && s.Base64 == c.Signature }) {
			continue
		}
		out = append(out, c.Line()...)
		sigs = append(sigs, note.Signature{Name: c.Witness, Base64: c.Signature})
	}
	if len(out) > MaxCheckpointBytes {
		return nil, fmt.Errorf("transparency: the cosigned checkpoint has %d bytes, over the limit of %d", len(out), MaxCheckpointBytes)
	}
	return out, nil
}

// StripCosignatures returns the signed checkpoint msg with only the lines
// signed under the log's origin: the checkpoint as the log signed it.
func StripCosignatures(msg []byte) ([]byte, error) {
	text, sigs, ok := splitNote(msg)
	if !ok {
		return nil, errors.New("transparency: the checkpoint is not a signed note")
	}
	origin, _, _ := strings.Cut(string(text), "\n")
	out := append(bytes.Clone(text), '\n')
	for _, s := range sigs {
		if s.Name == origin {
			out = append(out, "— "+s.Name+" "+s.Base64+"\n"...)
		}
	}
	return out, nil
}

// splitNote splits a signed note into its text (ending in a newline) and
// its signature lines, read without verifying any (a line that is not
// "— NAME BASE64" makes the note malformed).
func splitNote(msg []byte) (text []byte, sigs []note.Signature, ok bool) {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 || len(msg) == 0 || msg[len(msg)-1] != '\n' {
		return nil, nil, false
	}
	text = msg[:i+1]
	for _, line := range strings.Split(strings.TrimSuffix(string(msg[i+2:]), "\n"), "\n") {
		rest, found := strings.CutPrefix(line, "— ")
		if !found {
			return nil, nil, false
		}
		name, b64, found := strings.Cut(rest, " ")
		if !found || name == "" {
			return nil, nil, false
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(raw) < 4 {
			return nil, nil, false
		}
		sigs = append(sigs, note.Signature{Name: name, Hash: binary.BigEndian.Uint32(raw), Base64: b64})
	}
	return text, sigs, true
}
