package server

import (
	"bytes"
	"testing"
	"time"
)

// TestRevocationPublisherCache: the document is signed once, stored, and
// served again until something it says changes: forgetting the cached copy
// (another replica announced a change) reads the stored one again, the same
// bytes, and a revocation re-signs it with the next sequence, listing the
// key.
func TestRevocationPublisherCache(t *testing.T) {
	ctx := t.Context()
	a, _ := newAuthority(t)
	doc0, r0 := verifiedRevocations(t, a)
	if doc, _ := verifiedRevocations(t, a); !bytes.Equal(doc, doc0) {
		t.Fatal("re-signed although nothing changed")
	}
	a.revocations.Forget()
	doc1, r1 := verifiedRevocations(t, a)
	if !bytes.Equal(doc1, doc0) || r1.Sequence != r0.Sequence {
		t.Fatalf("after forget: sequence %d, want the stored document (sequence %d)", r1.Sequence, r0.Sequence)
	}
	pending, err := a.admin.RotateKey(ctx, "", durationPtr(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.RevokeKey(ctx, pending.KID, "superseded", false); err != nil {
		t.Fatal(err)
	}
	_, r2 := verifiedRevocations(t, a)
	if len(r2.Revoked) != 1 || r2.Revoked[0].KID != pending.KID || r2.Sequence <= r1.Sequence {
		t.Fatalf("after a revocation: %+v", r2)
	}
}
