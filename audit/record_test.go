package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

func sampleRecord() Record {
	sum := sha256.Sum256([]byte("card"))
	return Record{
		Seq:             7,
		Time:            time.Date(2026, 3, 1, 12, 30, 45, 120000000, time.UTC),
		Caller:          "spiffe://example/signer",
		RequestID:       "req-1",
		CardName:        "Weather Agent",
		CardVersion:     "1.2.0",
		CanonicalSHA256: sum[:],
		KID:             "k1",
		Alg:             "ES256",
		Profile:         "spec",
		Signature:       "c2ln",
	}
}

// TestComputeHashEncoding reimplements the documented encoding independently,
// as an external auditor would, and checks ComputeHash agrees.
func TestComputeHashEncoding(t *testing.T) {
	r := sampleRecord()
	prev := bytes.Repeat([]byte{0xab}, 32)
	fields := auditorHead(r) // nine digits, trailing zeros kept
	for _, s := range []string{r.KID, r.Alg, r.Profile, r.Signature} {
		fields = append(fields, []byte(s))
	}
	want := auditorHash(prev, fields...)
	if got := r.ComputeHash(prev); !bytes.Equal(got, want) {
		t.Fatalf("ComputeHash = %x, want %x", got, want)
	}
}

// TestComputeHashEncodingLong: a record whose encoding outgrows
// ComputeHash's first buffer (a long provenance and detail), with every
// optional field, hashes as the documented encoding says.
func TestComputeHashEncodingLong(t *testing.T) {
	r := sampleRecord()
	r.KID, r.Alg, r.Profile, r.Signature = "", "", "", ""
	r.Outcome, r.Reason = "key.revoke", "compromised"
	r.Provenance = strings.Repeat("p", 700)
	r.Detail = strings.Repeat("d", 900)
	prev := bytes.Repeat([]byte{0xcd}, 32)
	fields := append(auditorHead(r), nil, nil, nil, nil,
		[]byte("key.revoke"), []byte("compromised"), []byte("provenance"), []byte(r.Provenance), []byte("detail"), []byte(r.Detail))
	if got, want := r.ComputeHash(prev), auditorHash(prev, fields...); !bytes.Equal(got, want) {
		t.Fatalf("ComputeHash = %x, want %x", got, want)
	}
}

// auditorHead is the documented encoding's first fields of a record with
// Seq 7 at 2026-03-01T12:30:45.12Z, written out by hand as an external
// auditor would: domain, sequence, time, caller, request, card, canonical
// hash.
func auditorHead(r Record) [][]byte {
	return [][]byte{
		[]byte("cardsign-audit-v1"),
		{0, 0, 0, 0, 0, 0, 0, 7},
		[]byte("2026-03-01T12:30:45.120000000Z"),
		[]byte(r.Caller), []byte(r.RequestID), []byte(r.CardName), []byte(r.CardVersion),
		r.CanonicalSHA256,
	}
}

// auditorHash is SHA-256 over prev and each field with a big-endian 32-bit
// length before it: the documented encoding, independent of ComputeHash.
func auditorHash(prev []byte, fields ...[]byte) []byte {
	buf := bytes.NewBuffer(bytes.Clone(prev))
	for _, f := range fields {
		buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(f))))
		buf.Write(f)
	}
	sum := sha256.Sum256(buf.Bytes())
	return sum[:]
}

func TestComputeHashSensitivity(t *testing.T) {
	base := sampleRecord()
	prev := Genesis()
	h0 := base.ComputeHash(prev)

	// Same instant in another zone, and PrevHash/Hash set: no change.
	same := base
	same.Time = base.Time.In(time.FixedZone("x", 3600))
	same.PrevHash, same.Hash = []byte("ignored"), []byte("ignored")
	if !bytes.Equal(same.ComputeHash(prev), h0) {
		t.Error("hash depends on time zone or on PrevHash/Hash fields")
	}

	tests := []struct {
		name string
		mod  func(r *Record)
	}{
		{"seq", func(r *Record) { r.Seq++ }},
		{"time ns", func(r *Record) { r.Time = r.Time.Add(time.Nanosecond) }},
		{"caller", func(r *Record) { r.Caller += "x" }},
		{"request id", func(r *Record) { r.RequestID += "x" }},
		{"card name", func(r *Record) { r.CardName += "x" }},
		{"card version", func(r *Record) { r.CardVersion += "x" }},
		{"canonical", func(r *Record) { r.CanonicalSHA256 = append([]byte{}, r.CanonicalSHA256...); r.CanonicalSHA256[0] ^= 1 }},
		{"kid", func(r *Record) { r.KID += "x" }},
		{"alg", func(r *Record) { r.Alg = "ES384" }},
		{"profile", func(r *Record) { r.Profile = "sdk" }},
		{"signature", func(r *Record) { r.Signature += "x" }},
		// Moving bytes between adjacent fields must change the hash
		// (length prefixes): "Weather Agent"+"1.2.0" vs "Weather Agent1"+".2.0".
		{"field boundary", func(r *Record) { r.CardName += "1"; r.CardVersion = ".2.0" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleRecord()
			tt.mod(&r)
			if bytes.Equal(r.ComputeHash(prev), h0) {
				t.Errorf("changing %s did not change the hash", tt.name)
			}
		})
	}
	if bytes.Equal(base.ComputeHash(bytes.Repeat([]byte{1}, 32)), h0) {
		t.Error("hash does not depend on prev")
	}
}

func TestGenesisIsFresh(t *testing.T) {
	g := Genesis()
	if len(g) != 32 || !bytes.Equal(g, make([]byte, 32)) {
		t.Fatalf("Genesis() = %s", hex.EncodeToString(g))
	}
	g[0] = 1
	if Genesis()[0] != 0 {
		t.Fatal("modifying one Genesis() result changed the next")
	}
}

// BenchmarkComputeHash is one record's hash, as every append computes it.
func BenchmarkComputeHash(b *testing.B) {
	r := sampleRecord()
	prev := bytes.Repeat([]byte{0xab}, 32)
	b.ReportAllocs()
	for b.Loop() {
		r.ComputeHash(prev)
	}
}
