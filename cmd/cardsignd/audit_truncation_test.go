package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAuditTruncationDetected: someone with write access to the database
// deletes the last audit records. `cardsign audit verify` must catch it
// against the head published in the signed revocation document (fetched from
// the daemon, or a copy kept from before), and the next signature must not
// reuse the deleted sequence numbers.
func TestAuditTruncationDetected(t *testing.T) {
	work := t.TempDir()
	data := filepath.Join(work, "data")
	d := startDaemon(t, data)
	revURL := "http://" + d.http + "/.well-known/cardsign-revocations.json"
	// Seven records: the first key's creation, five signatures and the
	// rotation below.
	for range 5 {
		mustCLI(t, work, "sign", "--server", d.grpc, cardFile("security.json"))
	}
	// The revocation document was signed at start (the cluster duties),
	// with the empty log's head, and follows the head within a minute only;
	// a change of signing key has it re-signed at once, with the head now.
	mustCLI(t, work, "keys", "rotate", "--prepublish", "0s", "--server", d.grpc)

	// Intact, checked against the head the daemon publishes now.
	r := mustCLI(t, work, "audit", "verify", "--server", d.grpc, "--jwks", d.jwksURL())
	if !strings.Contains(r.Stdout, "audit chain intact: 7 records") || !strings.Contains(r.Stdout, "published head record 7 ") {
		t.Fatalf("audit verify of an intact log against the published head:\n%s%s", r.Stdout, r.Stderr)
	}
	// A verifier's copy of the document, kept for later.
	_, doc := httpGet(t, revURL)
	writeFile(t, filepath.Join(work, "revocations.json"), string(doc))
	var head struct {
		Seq  int64  `json:"seq"`
		Hash string `json:"hash"`
	}
	payload(t, doc, "audit_head", &head)
	if head.Seq != 7 || len(head.Hash) != 64 {
		t.Fatalf("audit_head in the revocation document: %+v", head)
	}

	// Without a published head the check is not silently skipped.
	r = mustCLI(t, work, "audit", "verify", "--server", d.grpc)
	if !strings.Contains(r.Stdout, "audit chain intact: 7 records") || !strings.Contains(r.Stdout, "no published head to check against: truncation of the tail cannot be detected") {
		t.Fatalf("audit verify without a head:\n%s%s", r.Stdout, r.Stderr)
	}
	// A head whose hash differs from the log's record at that seq.
	r = cli(t, work, nil, "audit", "verify", "--server", d.grpc, "--head", "7:"+strings.Repeat("ab", 32))
	if r.Code != 1 || !strings.Contains(r.Stdout, "audit log rewritten at record 7") {
		t.Fatalf("audit verify against a different head hash: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// Records 5 on deleted behind the daemon's back.
	tamperDB(t, data, `DROP TRIGGER IF EXISTS audit_no_delete`, `DELETE FROM audit WHERE seq >= 5`)

	truncated := regexp.MustCompile(`audit log truncated: the published head is record 7 \(hash [0-9a-f]{64}\) but the log ends at record 4`)
	for _, args := range [][]string{
		{"--jwks", d.jwksURL()}, // the daemon's current document
		{"--jwks", d.jwksURL(), "--revocations", filepath.Join(work, "revocations.json")}, // the kept copy
		{"--head", "7:" + head.Hash},
	} {
		r = cli(t, work, nil, append([]string{"audit", "verify", "--server", d.grpc}, args...)...)
		if r.Code != 1 || !truncated.MatchString(r.Stdout) {
			t.Fatalf("audit verify %s after deleting records 5..7: exit %d\n%s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		}
	}

	// The next signature gets seq 8, not a reused 5, so the gap stays.
	mustCLI(t, work, "sign", "--server", d.grpc, cardFile("security.json"))
	list := strings.Split(strings.TrimSpace(mustCLI(t, work, "audit", "list", "--json", "--server", d.grpc).Stdout), "\n")
	var last struct{ Sequence int64 }
	if err := json.Unmarshal([]byte(list[len(list)-1]), &last); err != nil || len(list) != 5 || last.Sequence != 8 {
		t.Fatalf("after deleting records 5..7 and signing again: %d records, last seq %d (%v); want 5 records ending at seq 8", len(list), last.Sequence, err)
	}
	r = cli(t, work, nil, "audit", "verify", "--server", d.grpc)
	if r.Code != 1 || !strings.Contains(r.Stdout, "audit chain BROKEN at record 8") {
		t.Fatalf("audit verify with records 5..7 missing: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	d.stop()
}

// payload decodes member name of a flattened JWS's payload into v.
func payload(t *testing.T, doc []byte, name string, v any) {
	t.Helper()
	var env struct{ Payload string }
	if err := json.Unmarshal(doc, &env); err != nil {
		t.Fatalf("revocation document %s: %v", doc, err)
	}
	raw, err := base64URL(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(m[name], v); err != nil {
		t.Fatalf("payload %s: member %q: %v", raw, name, err)
	}
}
