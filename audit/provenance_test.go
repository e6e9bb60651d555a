package audit

import (
	"bytes"
	"encoding/hex"
	"maps"
	"testing"
)

func sampleProvenance() map[string]string {
	return map[string]string{
		"iss":        "https://token.actions.githubusercontent.com",
		"sub":        "repo:acme/payments:ref:refs/tags/v1.2.0",
		"repository": "acme/payments",
		"run_id":     "42",
		"sha":        "0123abc",
		"ref":        "refs/tags/v1.2.0",
	}
}

// TestProvenanceEncoding: sorted keys, no HTML escaping, no trailing
// newline, and a round trip.
func TestProvenanceEncoding(t *testing.T) {
	const want = `{"iss":"https://token.actions.githubusercontent.com","ref":"refs/tags/v1.2.0","repository":"acme/payments","run_id":"42","sha":"0123abc","sub":"repo:acme/payments:ref:refs/tags/v1.2.0"}`
	if got := EncodeProvenance(sampleProvenance()); got != want {
		t.Fatalf("EncodeProvenance = %s\nwant %s", got, want)
	}
	if got := EncodeProvenance(map[string]string{"a": "<&>"}); got != `{"a":"<&>"}` {
		t.Fatalf("EncodeProvenance escaped HTML: %s", got)
	}
	if EncodeProvenance(nil) != "" || EncodeProvenance(map[string]string{}) != "" {
		t.Fatal("empty provenance must encode as \"\"")
	}
	back, err := DecodeProvenance(EncodeProvenance(sampleProvenance()))
	if err != nil || !maps.Equal(back, sampleProvenance()) {
		t.Fatalf("round trip: %v, %v", back, err)
	}
	if p, err := DecodeProvenance(""); p != nil || err != nil {
		t.Fatalf("DecodeProvenance(\"\") = %v, %v", p, err)
	}
	if _, err := DecodeProvenance("{"); err == nil {
		t.Fatal("DecodeProvenance accepted broken JSON")
	}
}

// TestComputeHashProvenanceGolden pins hashes computed outside Go (Python
// hashlib and json.dumps(sort_keys=True), following the ComputeHash doc
// comment): a signed and a refused record of a caller with provenance.
func TestComputeHashProvenanceGolden(t *testing.T) {
	prev := bytes.Repeat([]byte{0xab}, 32)
	signed := sampleRecord()
	signed.Provenance = EncodeProvenance(sampleProvenance())
	refused := refusedRecord()
	refused.Provenance = signed.Provenance
	for _, tt := range []struct {
		name string
		r    Record
		want string
	}{
		{"signed", signed, "295d0e3355d1e3b9eda04ac09ad1140a737f2cfbf07a2b3aa108c8b411cd1a7a"},
		{"refused", refused, "4afb38022693e5ef476a61214f0864d0f3ede1efe7a13cce65490fafe018103f"},
	} {
		if got := hex.EncodeToString(tt.r.ComputeHash(prev)); got != tt.want {
			t.Errorf("%s: ComputeHash = %s, want %s", tt.name, got, tt.want)
		}
	}
	// Provenance is covered: any change changes the hash, and a record
	// without it hashes as before.
	p := sampleProvenance()
	p["run_id"] = "43"
	other := sampleRecord()
	other.Provenance = EncodeProvenance(p)
	if bytes.Equal(other.ComputeHash(prev), signed.ComputeHash(prev)) {
		t.Error("changing the provenance did not change the hash")
	}
	if bytes.Equal(sampleRecord().ComputeHash(prev), signed.ComputeHash(prev)) {
		t.Error("a record with provenance hashes like one without")
	}
}
