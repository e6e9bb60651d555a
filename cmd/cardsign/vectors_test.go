package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gojose "github.com/go-jose/go-jose/v4"
)

// TestA2APythonVectorsEndToEnd runs the a2a-python 1.1.0 vectors through the
// built cardsign: the cards that SDK signed verify with cardsign verify and
// are reported as covered for a2a-python ≤1.1; and each vector's card, signed
// by cardsign, carries a signature whose payload is exactly the vector's
// canonical bytes (checked by go-jose, an independent JWS verifier, over
// canonical.txt itself).
func TestA2APythonVectorsEndToEnd(t *testing.T) {
	vectors := filepath.Join(repoRoot, "testdata", "vectors", "a2a-python-1.1.0")
	inputs, err := filepath.Glob(filepath.Join(vectors, "*.input.json"))
	if err != nil || len(inputs) != 8 {
		t.Fatalf("want 8 vectors, found %d (%v)", len(inputs), err)
	}
	dir := t.TempDir()
	mustRun(t, dir, "keygen", "--alg", "EdDSA", "--out", "key")
	var set gojose.JSONWebKeySet
	if err := json.Unmarshal([]byte(mustRun(t, dir, "jwks", "--key", "file:key").Stdout), &set); err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.json")
		t.Run(name, func(t *testing.T) {
			signedBySDK := filepath.Join(vectors, name+".signed.json")
			v := mustRun(t, dir, "verify", "--all", "--revocations", "none", "--jwks", filepath.Join(vectors, "jwks.json"), signedBySDK)
			if !strings.Contains(v.Stdout, "a2a-python ≤1.1 ✔") || strings.Count(v.Stdout, ": valid (") != 2 {
				t.Fatalf("cardsign verify of a2a-python's own signed card:\n%s", v.Stdout)
			}
			// The v0.3 input maps to v1.0 with protocolVersion "0.3" here
			// (DESIGN §3) and "0.3.0" in a2a-python; cardsign signs its own
			// v1.0 form, so the v1.0 card a2a-python made stands in. The v0.3
			// card a2a-python signed verifies as it stands, under
			// a2a-python's reading (issue 24 #20).
			src := in
			if name == "g_v03_legacy" {
				src = signedBySDK
				v := mustRun(t, dir, "verify", "--all", "--revocations", "none", "--jwks", filepath.Join(vectors, "jwks.json"), filepath.Join(vectors, name+".input-signed.json"))
				if strings.Count(v.Stdout, "v0.3 card read as a2a-python maps it (the card's own protocolVersion on every interface)") != 2 || !strings.Contains(v.Stdout, "a2a-python ≤1.1 ✔") {
					t.Fatalf("cardsign verify of the v0.3 card a2a-python signed:\n%s", v.Stdout)
				}
			}
			if name == "h_empty_and_defaults" {
				// Its REQUIRED description is "": invalid per A2A §5.7,
				// and verifiers disagree on it, so cardsign refuses it.
				r := cardsign(t, dir, nil, "sign", "--key", "file:key", src)
				if r.Code != exitFail || !strings.Contains(r.Stderr, "description: REQUIRED field of AgentCard is empty") {
					t.Fatalf("want the empty REQUIRED description refused, got exit %d:\n%s", r.Code, r.Stderr)
				}
				return
			}
			r := mustRun(t, dir, "sign", "--key", "file:key", src)
			if !strings.Contains(r.Stderr, "a2a-python ≤1.1 ✔") {
				t.Fatalf("sign does not report a2a-python ≤1.1 covered:\n%s", r.Stderr)
			}
			want, err := os.ReadFile(filepath.Join(vectors, name+".canonical.txt"))
			if err != nil {
				t.Fatal(err)
			}
			var c struct {
				Signatures []struct{ Protected, Signature string }
			}
			if err := json.Unmarshal([]byte(r.Stdout), &c); err != nil {
				t.Fatal(err)
			}
			covered := false
			for _, s := range c.Signatures {
				obj, err := gojose.ParseSignedCompact(s.Protected+".."+s.Signature, []gojose.SignatureAlgorithm{gojose.EdDSA})
				if err != nil {
					t.Fatal(err)
				}
				covered = covered || obj.DetachedVerify(want, set.Keys[0].Key) == nil
			}
			if !covered {
				t.Fatalf("no signature of %d covers a2a-python's canonical bytes:\n%s", len(c.Signatures), r.Stderr)
			}
		})
	}
}
