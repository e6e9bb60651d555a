package aicatalog

import (
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/strictjson"
)

// vcase is one verification scenario: mut edits the fixture, then the
// reasons of one result must be exactly want (nil: accepted).
type vcase struct {
	name string
	mut  func(f *fixture)
	// at selects the result: "catalog", "entry E" (the entry's own
	// result) or "manifest E M".
	at    string
	want  []string
	check func(t *testing.T, f *fixture, rep *Report)
}

// Where the fixture's manifests are.
const (
	atPubData  = "manifest 0 0" // publisher, inline data entry, digest only
	atAssessor = "manifest 0 1" // assessor, inline data entry
	atPubURL   = "manifest 1 0" // publisher, url entry, url and digest
	atEntryURL = "entry 1"
)

func runCases(t *testing.T, cases []vcase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.mut != nil {
				tc.mut(f)
			}
			rep := f.run()
			var got Result
			var e, m int
			switch {
			case tc.at == "catalog":
				got = rep.Catalog
			case strings.HasPrefix(tc.at, "entry "):
				mustScan(t, tc.at, "entry %d", &e)
				got = rep.Entries[e].Result
			default:
				mustScan(t, tc.at, "manifest %d %d", &e, &m)
				got = rep.Entries[e].Manifests[m].Result
			}
			if !sameCodes(got.Reasons, tc.want) || got.Accepted != (len(tc.want) == 0) {
				t.Errorf("%s: accepted %v, reasons %q; want %q", tc.at, got.Accepted, got.Reasons, tc.want)
			}
			for _, r := range got.Reasons {
				if r.Detail == "" {
					t.Errorf("reason %s has no detail", r.Code)
				}
			}
			if tc.check != nil {
				tc.check(t, f, rep)
			}
		})
	}
}

func mustScan(t *testing.T, s, format string, args ...any) {
	t.Helper()
	if _, err := fmt.Sscanf(s, format, args...); err != nil {
		t.Fatalf("bad at %q: %v", s, err)
	}
}

// Helpers that edit parts of the fixture.

func (f *fixture) assessor() *manifestSpec { return f.entries[0].manifests[1] }
func (f *fixture) pubURL() *manifestSpec   { return f.entries[1].manifests[0] }

func editSig(key string, val strictjson.Value) func(strictjson.Value) strictjson.Value {
	return func(v strictjson.Value) strictjson.Value { return setSig(v, key, val) }
}

func str(s string) strictjson.Value { return strictjson.StringValue(s) }

// setHeader returns a header hook setting key to val.
func setHeader(key string, val strictjson.Value) func(strictjson.Value) strictjson.Value {
	return func(h strictjson.Value) strictjson.Value { return h.With(key, val) }
}

// editJWK edits the publicKeyJwk of the first verification method of did.
func (f *fixture) editJWK(did string, edit func(strictjson.Value) strictjson.Value) {
	doc := f.docs[did]
	vms, _ := doc.Get("verificationMethod")
	vm := vms.Arr[0]
	jwk, _ := vm.Get("publicKeyJwk")
	vms.Arr[0] = vm.With("publicKeyJwk", edit(jwk))
	f.docs[did] = doc.With("verificationMethod", vms)
}

func editMember(key string, val strictjson.Value) func(strictjson.Value) strictjson.Value {
	return func(v strictjson.Value) strictjson.Value { return v.With(key, val) }
}

// TestVerifyConformanceScenarios re-creates every case of the
// specification's conformance suite (notes §16) with this test's keys.
func TestVerifyConformanceScenarios(t *testing.T) {
	runCases(t, []vcase{
		{name: "00-positive-control-reordered", at: atAssessor, mut: func(f *fixture) {
			f.rootPost = reverseAll
			f.entries[0].post = reverseManifests
		}, check: func(t *testing.T, _ *fixture, rep *Report) {
			if !rep.OK() {
				t.Errorf("not OK: %+v", rep)
			}
		}},
		{name: "01-contributor-case-variant", at: atAssessor, want: []string{CodeContributorSignerMismatch}, mut: func(f *fixture) {
			f.assessor().m.Contributor = "did:web:Assessor.example"
		}},
		{name: "01-contributor-trailing-dot", at: atAssessor, want: []string{CodeContributorSignerMismatch}, mut: func(f *fixture) {
			f.assessor().m.Contributor = "did:web:assessor.example."
		}},
		{name: "02-kid-authentication-only", at: atPubURL, want: []string{CodeKeyNotAuthorized}, mut: func(f *fixture) {
			f.pubURL().key = f.keys["auth"]
		}},
		{name: "03-kid-under-other-did", at: atAssessor, want: []string{CodeKIDNotUnderSigner}, mut: func(f *fixture) {
			// The JWS verifies under other.example's key; the rule, not
			// the signature, refuses it, before anything is resolved.
			a := f.assessor()
			a.key = SigningKey{Signer: f.keys["other"].Signer, DID: assessorDID, Fragment: "key-1"}
			a.header = setHeader("kid", str(KID(otherDID, "key-1")))
		}, check: func(t *testing.T, f *fixture, _ *Report) {
			if n := f.resolver.calls[assessorDID] + f.resolver.calls[otherDID]; n != 0 {
				t.Errorf("resolved %d DID documents before checking the kid", n)
			}
		}},
		{name: "03-controller-other-did", at: atAssessor, want: []string{CodeControllerMismatch}, mut: func(f *fixture) {
			d := key(t, assessorDID, "delegated-key")
			f.assessor().key = d
			doc := didDocValue(t, "assessor.example", f.keys["assessor"], d)
			vms, _ := doc.Get("verificationMethod")
			vms.Arr[1] = vms.Arr[1].With("controller", str(otherDID))
			f.docs[assessorDID] = doc.With("verificationMethod", vms)
		}},
		{name: "04-expired-endorsement", at: atAssessor, want: []string{CodeExpired}, mut: func(f *fixture) {
			f.opts.Now = func() time.Time { return time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC) }
		}},
		{name: "04-expires-before-issued", at: atAssessor, want: []string{CodeExpiresNotAfterIssued}, mut: func(f *fixture) {
			f.assessor().edit = editSig("expiresAt", str("2026-09-01T00:00:00Z"))
		}},
		{name: "04-not-yet-valid", at: atAssessor, want: []string{CodeNotYetValid}, mut: func(f *fixture) {
			f.opts.Now = func() time.Time { return time.Date(2026, 9, 30, 23, 59, 59, 0, time.UTC) }
		}},
		{name: "05-version-added-after-signing", at: atAssessor, want: []string{CodeVersionCoverageFailed}, mut: func(f *fixture) {
			f.entries[0].e.Version = "1.2.0"
		}},
		{name: "05-digest-and-url-swapped", at: atPubURL, want: []string{CodeSignatureInvalid}, mut: func(f *fixture) {
			// The operator points the entry at other bytes and rewrites
			// the subject to match; the signature covers the old subject.
			other := []byte(`{"name":"Other Agent"}`)
			u := "https://publisher.example/other.json"
			f.artifacts[u] = other
			f.entries[1].e.URL, f.entries[1].e.Digest = u, sha(other)
			f.pubURL().post = func(v strictjson.Value) strictjson.Value {
				subj, _ := v.Get("subject")
				return v.With("subject", subj.With("url", str(u)).With("digest", str(sha(other))))
			}
		}},
		{name: "05-url-binding-moved-to-mirror", at: atPubURL, want: []string{CodeURLCoverageFailed}, mut: func(f *fixture) {
			mirror := "https://mirror.example/finance.json"
			f.artifacts[mirror] = f.artifacts[agentURL]
			f.entries[1].e.Digest = ""
			f.pubURL().m.Subject.Digest = ""
			f.entries[1].post = editMember("url", str(mirror))
		}},
		{name: "06-profile-relabelled-same-jws", at: atAssessor, want: []string{CodeUnsupportedProfile}, mut: func(f *fixture) {
			f.assessor().post = editSig("profile", str("https://example.org/profiles/did-web-v1"))
		}},
		{name: "06-unknown-profile-resigned", at: atAssessor, want: []string{CodeUnsupportedProfile}, mut: func(f *fixture) {
			f.assessor().edit = editSig("profile", str("https://example.org/profiles/did-web-v1"))
		}},
		{name: "06-profile-case-variant", at: atAssessor, want: []string{CodeUnsupportedProfile}, mut: func(f *fixture) {
			f.assessor().edit = editSig("profile", str("DID-WEB-V1"))
		}},
	})
}

// TestVerifyPublisherProfile: the did:web Publisher Profile (no fixture
// covers it): the urn:air publisher must be the authenticated signer.
func TestVerifyPublisherProfile(t *testing.T) {
	runCases(t, []vcase{
		{name: "assessor only", at: atEntryURL, want: []string{CodePublisherNotSigner}, mut: func(f *fixture) {
			f.entries[1].manifests = []*manifestSpec{f.spec("assessor", f.pubURL().m.Subject)}
		}, check: func(t *testing.T, _ *fixture, rep *Report) {
			if m := rep.Entries[1].Manifests[0]; !m.Accepted || m.Publisher {
				t.Errorf("the assessor's endorsement verifies but is not the publisher's: %+v", m)
			}
		}},
		{name: "assessor's endorsement does not excuse a broken publisher manifest", at: atEntryURL, want: []string{CodePublisherNotSigner, CodeKeyNotAuthorized}, mut: func(f *fixture) {
			f.pubURL().key = f.keys["auth"]
			f.entries[1].manifests = append(f.entries[1].manifests, f.spec("assessor", f.pubURL().m.Subject))
		}},
		{name: "subdomain is not the publisher", at: atEntryURL, want: []string{CodePublisherNotSigner}, mut: func(f *fixture) {
			id := "urn:air:www.publisher.example:agent:finance"
			f.entries[1].e.Identifier, f.pubURL().m.Subject.Identifier = id, id
		}},
		{name: "identifier not urn:air", at: atEntryURL, want: []string{CodeIdentifierNotURNAIR}, mut: func(f *fixture) {
			id := "https://publisher.example/agents/finance"
			f.entries[1].e.Identifier, f.pubURL().m.Subject.Identifier = id, id
		}},
		{name: "publisher not a root domain", at: atEntryURL, want: []string{CodePublisherNotRootDomain}, mut: func(f *fixture) {
			id := "urn:air:Publisher.example:agent:finance"
			f.entries[1].e.Identifier, f.pubURL().m.Subject.Identifier = id, id
		}},
		{name: "publisher with port", at: atEntryURL, want: []string{CodePublisherNotRootDomain}, mut: func(f *fixture) {
			id := "urn:air:publisher.example%3A8443:agent:finance"
			f.entries[1].e.Identifier, f.pubURL().m.Subject.Identifier = id, id
		}},
		{name: "no manifest", at: atEntryURL, want: []string{CodeNoPublisherManifest}, mut: func(f *fixture) {
			f.entries[1].manifests = nil
		}},
		{name: "unsigned manifest only", at: atEntryURL, want: []string{CodeUnsigned}, mut: func(f *fixture) {
			f.pubURL().post = func(v strictjson.Value) strictjson.Value { return v.Without("signature") }
		}},
		{name: "revoked", at: atEntryURL, want: []string{CodeEntryRevoked}, mut: func(f *fixture) {
			f.opts.Revoked = func(e strictjson.Value, artifact []byte) (string, bool) {
				id, _, _ := e.GetString("identifier")
				return "key compromise", id == agentID && string(artifact) == string(f.artifacts[agentURL])
			}
		}, check: func(t *testing.T, _ *fixture, rep *Report) {
			if !rep.Entries[0].Accepted {
				t.Errorf("entry 0 not revoked but refused: %+v", rep.Entries[0])
			}
		}},
	})
}

// TestVerifyCatalogRoot: the did:web Catalog Profile on the root signature.
func TestVerifyCatalogRoot(t *testing.T) {
	runCases(t, []vcase{
		{name: "accepted", at: "catalog"},
		{name: "unsigned", at: "catalog", want: []string{CodeCatalogUnsigned}, mut: func(f *fixture) { f.root = nil }},
		{name: "host.identifier missing", at: "catalog", want: []string{CodeHostIdentifierMissing}, mut: func(f *fixture) { f.host.Identifier = "" }},
		{name: "host.identifier case variant", at: "catalog", want: []string{CodeHostIdentifierSignerMismatch}, mut: func(f *fixture) {
			f.host.Identifier = "did:web:Registry.example"
		}},
		{name: "signed by another DID", at: "catalog", want: []string{CodeHostIdentifierSignerMismatch}, mut: func(f *fixture) {
			f.root.key = f.keys["other"]
		}},
		{name: "manifest typ on the catalog", at: "catalog", want: []string{CodeJWSTypMismatch}, mut: func(f *fixture) { f.root.typ = TypManifest }},
		{name: "catalog typ on a manifest", at: atAssessor, want: []string{CodeJWSTypMismatch}, mut: func(f *fixture) { f.assessor().typ = TypCatalog }},
		{name: "manifest replayed as the catalog signature", at: "catalog", want: []string{CodeJWSTypMismatch, CodeSignatureInvalid}, mut: func(f *fixture) {
			f.rootPost = func(root strictjson.Value) strictjson.Value {
				entries, _ := root.Get("entries")
				tm, _ := entries.Arr[0].Get("trustManifests")
				msig, _ := tm.Arr[0].Get("signature")
				jws, _, _ := msig.GetString("jws")
				return setJWS(root, jws)
			}
			f.host.Identifier = pubDID
			f.root.key = f.keys["release"]
		}},
		{name: "entry changed after signing", at: "catalog", want: []string{CodeSignatureInvalid}, mut: func(f *fixture) {
			f.rootPost = func(root strictjson.Value) strictjson.Value {
				entries, _ := root.Get("entries")
				entries.Arr[1] = entries.Arr[1].With("updatedAt", str("2026-10-02T00:00:00Z"))
				return root.With("entries", entries)
			}
		}},
		{name: "additionalSignatures excluded", at: "catalog", mut: func(f *fixture) {
			f.rootPost = editMember("additionalSignatures", strictjson.ArrayValue(str("anything")))
			f.assessor().post = editMember("additionalSignatures", strictjson.ObjectValue())
		}, check: func(t *testing.T, _ *fixture, rep *Report) {
			if !rep.OK() {
				t.Errorf("additionalSignatures changed a payload: %+v", rep)
			}
		}},
		{name: "spec version 2", at: "catalog", want: []string{CodeSpecVersionUnsupported}, mut: func(f *fixture) {
			f.rootExtra = []strictjson.Member{{Key: "specVersion", Val: str("2.0")}}
		}},
		{name: "spec version minor 7", at: "catalog", mut: func(f *fixture) {
			f.rootExtra = []strictjson.Member{{Key: "specVersion", Val: str("1.7")}}
		}},
		{name: "spec version not a string", at: "catalog", want: []string{CodeSpecVersionUnsupported}, mut: func(f *fixture) {
			f.rootExtra = []strictjson.Member{{Key: "specVersion", Val: strictjson.IntValue(1)}}
		}},
		{name: "unknown extension kept in payload", at: "catalog", mut: func(f *fixture) {
			f.rootExtra = []strictjson.Member{{Key: "x-unknown", Val: strictjson.ObjectValue(strictjson.Member{Key: "n", Val: strictjson.IntValue(7)})}}
		}},
	})
}

// TestVerifySignatureRules: the Signer Profile's structure, header, key and
// time rules that no conformance fixture covers.
func TestVerifySignatureRules(t *testing.T) {
	runCases(t, []vcase{
		{name: "signature not object", at: atAssessor, want: []string{CodeSignatureNotObject}, mut: func(f *fixture) {
			f.assessor().post = editMember("signature", str("sig"))
		}},
		{name: "jws missing", at: atAssessor, want: []string{CodeSignatureMissingPrefix + "jws"}, mut: func(f *fixture) {
			f.assessor().post = func(v strictjson.Value) strictjson.Value {
				sig, _ := v.Get("signature")
				return v.With("signature", sig.Without("jws"))
			}
		}},
		{name: "signer empty and profile not a string", at: atAssessor, want: []string{CodeSignatureMissingPrefix + "signer", CodeSignatureMissingPrefix + "profile"}, mut: func(f *fixture) {
			f.assessor().post = func(v strictjson.Value) strictjson.Value {
				return setSig(setSig(v, "signer", str("")), "profile", strictjson.IntValue(1))
			}
		}},
		{name: "without subject", at: atAssessor, want: []string{CodeSignedManifestWithoutSubject}, mut: func(f *fixture) {
			f.assessor().edit = func(v strictjson.Value) strictjson.Value { return v.Without("subject") }
		}},
		{name: "contributor missing", at: atAssessor, want: []string{CodeContributorMissing, CodeContributorSignerMismatch}, mut: func(f *fixture) {
			f.assessor().edit = func(v strictjson.Value) strictjson.Value { return v.Without("contributor") }
		}},
		{name: "issuedAt without offset", at: atAssessor, want: []string{CodeTimestampInvalid}, mut: func(f *fixture) {
			f.assessor().edit = editSig("issuedAt", str("2026-10-01T00:00:00"))
		}},
		{name: "expiresAt not a string", at: atAssessor, want: []string{CodeTimestampInvalid}, mut: func(f *fixture) {
			f.assessor().edit = editSig("expiresAt", strictjson.IntValue(1798675200))
		}},
		{name: "issuedAt with offset", at: atAssessor, mut: func(f *fixture) {
			f.assessor().edit = editSig("issuedAt", str("2026-10-01T02:00:00+02:00"))
		}},
		{name: "no expiresAt", at: atAssessor, mut: func(f *fixture) { f.assessor().expires = time.Time{} }},
		{name: "clock skew covers early issuedAt", at: atAssessor, mut: func(f *fixture) {
			f.opts.Now = func() time.Time { return fxIssued.Add(-30 * time.Second) }
			f.opts.ClockSkew = time.Minute
		}},
		{name: "clock skew too small", at: atAssessor, want: []string{CodeNotYetValid}, mut: func(f *fixture) {
			f.opts.Now = func() time.Time { return fxIssued.Add(-2 * time.Minute) }
			f.opts.ClockSkew = time.Minute
		}},
		{name: "clock skew covers late expiresAt", at: atAssessor, mut: func(f *fixture) {
			f.opts.Now = func() time.Time { return fxExpires.Add(30 * time.Second) }
			f.opts.ClockSkew = time.Minute
		}},
		{name: "at expiresAt exactly", at: atAssessor, want: []string{CodeExpired}, mut: func(f *fixture) {
			f.opts.Now = func() time.Time { return fxExpires }
		}},
		{name: "jws with attached payload", at: atAssessor, want: []string{CodeJWSNotDetachedCompact}, mut: func(f *fixture) {
			f.assessor().post = func(v strictjson.Value) strictjson.Value {
				sig, _ := v.Get("signature")
				jws, _, _ := sig.GetString("jws")
				h, s, _ := strings.Cut(jws, "..")
				return setJWS(v, h+".e30."+s)
			}
		}},
		{name: "jws header not base64url", at: atAssessor, want: []string{CodeJWSSegmentsInvalid}, mut: func(f *fixture) {
			f.assessor().post = func(v strictjson.Value) strictjson.Value {
				sig, _ := v.Get("signature")
				jws, _, _ := sig.GetString("jws")
				_, s, _ := strings.Cut(jws, "..")
				return setJWS(v, "e30+.."+s)
			}
		}},
		{name: "jws header duplicate alg", at: atAssessor, want: []string{CodeJWSSegmentsInvalid}, mut: func(f *fixture) {
			f.assessor().post = rawHeader(`{"alg":"ES256","alg":"none","kid":"did:web:assessor.example#assessment-key","typ":"ai-catalog-trust-manifest+jws"}`)
		}},
		{name: "jws header an array", at: atAssessor, want: []string{CodeJWSHeaderNotObject}, mut: func(f *fixture) {
			f.assessor().post = rawHeader(`["ES256"]`)
		}},
		{name: "alg ES384", at: atAssessor, want: []string{CodeJWSAlgNotES256}, mut: func(f *fixture) {
			f.assessor().header = setHeader("alg", str("ES384"))
		}},
		{name: "alg none", at: atAssessor, want: []string{CodeJWSAlgNotES256}, mut: func(f *fixture) {
			f.assessor().header = setHeader("alg", str("none"))
		}},
		{name: "typ missing", at: atAssessor, want: []string{CodeJWSTypMismatch}, mut: func(f *fixture) {
			f.assessor().header = func(h strictjson.Value) strictjson.Value { return h.Without("typ") }
		}},
		{name: "b64 false", at: atAssessor, want: []string{CodeJWSB64Present}, mut: func(f *fixture) {
			f.assessor().header = setHeader("b64", strictjson.BoolValue(false))
		}},
		{name: "jku", at: atAssessor, want: []string{CodeJWSKeySourceHeader}, mut: func(f *fixture) {
			f.assessor().header = setHeader("jku", str("https://assessor.example/jwks.json"))
		}},
		{name: "jwk", at: atAssessor, want: []string{CodeJWSKeySourceHeader}, mut: func(f *fixture) {
			f.assessor().header = setHeader("jwk", strictjson.ObjectValue(strictjson.Member{Key: "kty", Val: str("EC")}))
		}},
		{name: "x5u", at: atAssessor, want: []string{CodeJWSKeySourceHeader}, mut: func(f *fixture) {
			f.assessor().header = setHeader("x5u", str("https://assessor.example/cert.pem"))
		}},
		{name: "x5c and crit", at: atAssessor, want: []string{CodeJWSKeySourceHeader, CodeJWSUnsupportedCrit}, mut: func(f *fixture) {
			f.assessor().header = func(h strictjson.Value) strictjson.Value {
				return h.With("x5c", strictjson.ArrayValue(str("MIIB"))).With("crit", strictjson.ArrayValue(str("exp")))
			}
		}},
		{name: "kid without fragment", at: atAssessor, want: []string{CodeKIDNotUnderSigner}, mut: func(f *fixture) {
			f.assessor().header = setHeader("kid", str(assessorDID+"#"))
		}},
		{name: "kid with path", at: atAssessor, want: []string{CodeKIDNotUnderSigner}, mut: func(f *fixture) {
			f.assessor().header = setHeader("kid", str(assessorDID+"#a/b"))
		}},
		{name: "kid missing", at: atAssessor, want: []string{CodeKIDNotUnderSigner}, mut: func(f *fixture) {
			f.assessor().header = func(h strictjson.Value) strictjson.Value { return h.Without("kid") }
		}},
		{name: "signature flipped", at: atAssessor, want: []string{CodeSignatureInvalid}, mut: func(f *fixture) {
			f.assessor().post = func(v strictjson.Value) strictjson.Value {
				sig, _ := v.Get("signature")
				jws, _, _ := sig.GetString("jws")
				h, s, _ := strings.Cut(jws, "..")
				raw, _ := base64.RawURLEncoding.DecodeString(s)
				raw[10] ^= 1
				return setJWS(v, h+".."+base64.RawURLEncoding.EncodeToString(raw))
			}
		}},
		{name: "signature high bytes zero", at: atAssessor, want: []string{CodeSignatureInvalid}, mut: func(f *fixture) {
			f.assessor().post = func(v strictjson.Value) strictjson.Value {
				sig, _ := v.Get("signature")
				jws, _, _ := sig.GetString("jws")
				h, _, _ := strings.Cut(jws, "..")
				return setJWS(v, h+".."+base64.RawURLEncoding.EncodeToString(make([]byte, 64)))
			}
		}},
		{name: "extension changed after signing", at: atPubData, want: []string{CodeSignatureInvalid}, mut: func(f *fixture) {
			f.entries[0].manifests[0].post = func(v strictjson.Value) strictjson.Value {
				return v.With("provenance", strictjson.ArrayValue())
			}
		}},
	})
}

// rawHeader returns a post hook that replaces the protected header by raw
// bytes (keeping the signature segment).
func rawHeader(raw string) func(strictjson.Value) strictjson.Value {
	return func(v strictjson.Value) strictjson.Value {
		sig, _ := v.Get("signature")
		jws, _, _ := sig.GetString("jws")
		_, s, _ := strings.Cut(jws, "..")
		return setJWS(v, base64.RawURLEncoding.EncodeToString([]byte(raw))+".."+s)
	}
}

// TestVerifySigner: signers that are not root did:web DIDs.
func TestVerifySigner(t *testing.T) {
	var cases []vcase
	for _, signer := range []string{
		"did:web:assessor.example:users:alice", // path
		"did:web:assessor.example%3A8443",      // port
		"did:web:127.0.0.1",                    // IP address
		"did:web:assessor.example.",            // trailing dot
		"did:web:Assessor.example",             // not lowercase
		"did:web:localhost",                    // single label
		"did:key:z6Mkexample",                  // not did:web
	} {
		cases = append(cases, vcase{name: signer, at: atAssessor, want: []string{CodeSignerNotRootDIDWeb}, mut: func(f *fixture) {
			f.assessor().edit = func(v strictjson.Value) strictjson.Value {
				return setSig(v.With("contributor", str(signer)), "signer", str(signer))
			}
			f.assessor().header = setHeader("kid", str(signer+"#assessment-key"))
		}})
	}
	runCases(t, cases)
}

// TestVerifyDIDDocument: resolution and key selection.
func TestVerifyDIDDocument(t *testing.T) {
	jwkWith := func(key string, val strictjson.Value) func(f *fixture) {
		return func(f *fixture) {
			f.editJWK(assessorDID, func(j strictjson.Value) strictjson.Value { return j.With(key, val) })
		}
	}
	nested := strings.Repeat(`[`, 40) + strings.Repeat(`]`, 40)
	runCases(t, []vcase{
		{name: "more DIDs than MaxDIDs", at: atAssessor, want: []string{CodeDIDResolutionFailed}, mut: func(f *fixture) {
			// registry (root), then publisher: the assessor is the third.
			f.opts.MaxDIDs = 2
		}, check: func(t *testing.T, f *fixture, rep *Report) {
			if !rep.Catalog.Accepted || !rep.Entries[1].Accepted || f.resolver.calls[assessorDID] != 0 {
				t.Errorf("the first two DIDs resolve, the third is not asked for: %+v %v", rep, f.resolver.calls)
			}
		}},
		{name: "unresolvable", at: atAssessor, want: []string{CodeDIDResolutionFailed}, mut: func(f *fixture) { delete(f.docs, assessorDID) }},
		{name: "id mismatch", at: atAssessor, want: []string{CodeDIDDocumentIDMismatch}, mut: func(f *fixture) {
			f.docs[assessorDID] = f.docs[assessorDID].With("id", str(otherDID))
		}},
		{name: "id missing", at: atAssessor, want: []string{CodeDIDDocumentInvalid}, mut: func(f *fixture) {
			f.docs[assessorDID] = f.docs[assessorDID].Without("id")
		}},
		{name: "duplicate id", at: atAssessor, want: []string{CodeDIDDocumentInvalid}, mut: func(f *fixture) {
			b := f.docs[assessorDID].Compact()
			f.rawDocs[assessorDID] = append([]byte(`{"id":"did:web:assessor.example",`), b[1:]...)
		}},
		{name: "bad UTF-8", at: atAssessor, want: []string{CodeDIDDocumentInvalid}, mut: func(f *fixture) {
			f.rawDocs[assessorDID] = []byte("{\"id\":\"did:web:assessor.example\",\"x\":\"\xff\"}")
		}},
		{name: "deeply nested", at: atAssessor, want: []string{CodeDIDDocumentInvalid}, mut: func(f *fixture) {
			b := f.docs[assessorDID].Compact()
			f.rawDocs[assessorDID] = append([]byte(`{"x":`+nested+`,`), b[1:]...)
		}},
		{name: "oversized", at: atAssessor, want: []string{CodeDIDDocumentInvalid}, mut: func(f *fixture) {
			f.opts.DIDLimits.MaxBytes = 200
		}},
		{name: "not an object", at: atAssessor, want: []string{CodeDIDDocumentInvalid}, mut: func(f *fixture) {
			f.rawDocs[assessorDID] = []byte(`[]`)
		}},
		{name: "assertionMethod not an array", at: atAssessor, want: []string{CodeDIDDocumentInvalid}, mut: func(f *fixture) {
			f.docs[assessorDID] = f.docs[assessorDID].With("assertionMethod", str(KID(assessorDID, "assessment-key")))
		}},
		{name: "no assertionMethod", at: atAssessor, want: []string{CodeKeyNotAuthorized}, mut: func(f *fixture) {
			f.docs[assessorDID] = f.docs[assessorDID].Without("assertionMethod")
		}},
		{name: "relative references", at: atAssessor, mut: func(f *fixture) {
			doc := f.docs[assessorDID]
			vms, _ := doc.Get("verificationMethod")
			vms.Arr[0] = vms.Arr[0].With("id", str("#assessment-key"))
			f.docs[assessorDID] = doc.With("verificationMethod", vms).With("assertionMethod", strictjson.ArrayValue(str("#assessment-key")))
		}},
		{name: "embedded method", at: atAssessor, mut: func(f *fixture) {
			doc := f.docs[assessorDID]
			vms, _ := doc.Get("verificationMethod")
			f.docs[assessorDID] = doc.Without("verificationMethod").With("assertionMethod", strictjson.ArrayValue(vms.Arr[0]))
		}},
		{name: "listed twice", at: atAssessor, want: []string{CodeKeyNotAuthorized}, mut: func(f *fixture) {
			doc := f.docs[assessorDID]
			vms, _ := doc.Get("verificationMethod")
			f.docs[assessorDID] = doc.With("assertionMethod", strictjson.ArrayValue(str(KID(assessorDID, "assessment-key")), vms.Arr[0]))
		}},
		{name: "reference to nothing", at: atAssessor, want: []string{CodeKeyNotAuthorized}, mut: func(f *fixture) {
			f.docs[assessorDID] = f.docs[assessorDID].Without("verificationMethod")
		}},
		{name: "private member d", at: atAssessor, want: []string{CodeJWKPrivateMaterial}, mut: jwkWith("d", str("AAAA"))},
		{name: "private member k", at: atAssessor, want: []string{CodeJWKPrivateMaterial}, mut: jwkWith("k", str("AAAA"))},
		{name: "P-384", at: atAssessor, want: []string{CodeJWKNotP256}, mut: jwkWith("crv", str("P-384"))},
		{name: "OKP", at: atAssessor, want: []string{CodeJWKNotP256}, mut: jwkWith("kty", str("OKP"))},
		{name: "no publicKeyJwk", at: atAssessor, want: []string{CodeJWKNotP256}, mut: func(f *fixture) {
			doc := f.docs[assessorDID]
			vms, _ := doc.Get("verificationMethod")
			vms.Arr[0] = vms.Arr[0].Without("publicKeyJwk").With("publicKeyMultibase", str("zDn"))
			f.docs[assessorDID] = doc.With("verificationMethod", vms)
		}},
		{name: "jwk alg ES384", at: atAssessor, want: []string{CodeJWKAlgOrUseMismatch}, mut: jwkWith("alg", str("ES384"))},
		{name: "jwk use enc", at: atAssessor, want: []string{CodeJWKAlgOrUseMismatch}, mut: jwkWith("use", str("enc"))},
		{name: "jwk without alg and use", at: atAssessor, mut: func(f *fixture) {
			f.editJWK(assessorDID, func(j strictjson.Value) strictjson.Value { return j.Without("alg", "use") })
		}},
		{name: "key_ops sign only", at: atAssessor, want: []string{CodeJWKKeyOpsForbidVerify}, mut: jwkWith("key_ops", strictjson.ArrayValue(str("sign")))},
		{name: "key_ops verify", at: atAssessor, mut: jwkWith("key_ops", strictjson.ArrayValue(str("verify")))},
		{name: "off-curve point", at: atAssessor, want: []string{CodeJWKCoordinatesInvalid}, mut: func(f *fixture) {
			f.editJWK(assessorDID, func(j strictjson.Value) strictjson.Value {
				x, _, _ := j.GetString("x")
				return j.With("y", str(x))
			})
		}},
		{name: "short coordinate", at: atAssessor, want: []string{CodeJWKCoordinatesInvalid}, mut: jwkWith("x", str("AAAA"))},
		{name: "another key of the signer", at: atAssessor, want: []string{CodeSignatureInvalid}, mut: func(f *fixture) {
			// The document's key is not the one that signed.
			f.docs[assessorDID] = didDocValue(t, "assessor.example", key(t, assessorDID, "assessment-key"))
		}},
	})
}

// TestVerifyCoverage: Entry Release Coverage and the artifact digest.
func TestVerifyCoverage(t *testing.T) {
	weak := "sha1:" + strings.Repeat("ab", 20)
	runCases(t, []vcase{
		{name: "type changed", at: atAssessor, want: []string{CodeSubjectTypeMismatch}, mut: func(f *fixture) {
			f.entries[0].post = editMember("type", str("application/json"))
		}},
		{name: "identifier mismatch", at: atAssessor, want: []string{CodeSubjectIdentifierMismatch}, mut: func(f *fixture) {
			f.assessor().m.Subject.Identifier = "urn:air:publisher.example:mcp:other"
		}},
		{name: "version in subject only", at: atAssessor, want: []string{CodeVersionCoverageFailed}, mut: func(f *fixture) {
			f.assessor().m.Subject.Version = "1.0.0"
		}},
		{name: "version in both", at: atAssessor, mut: func(f *fixture) {
			f.assessor().m.Subject.Version = "1.0.0"
			f.entries[0].e.Version = "1.0.0"
		}},
		{name: "no binding", at: atAssessor, want: []string{CodeSubjectWithoutBinding}, mut: func(f *fixture) {
			f.assessor().m.Subject.Digest = ""
		}},
		{name: "digest in entry only", at: atPubURL, want: []string{CodeDigestCoverageFailed}, mut: func(f *fixture) {
			f.pubURL().m.Subject.Digest = ""
		}},
		{name: "url only, no entry digest", at: atPubURL, mut: func(f *fixture) {
			f.pubURL().m.Subject.Digest = ""
			f.entries[1].e.Digest = ""
		}},
		{name: "artifact changed", at: atPubURL, want: []string{CodeArtifactDigestMismatch}, mut: func(f *fixture) {
			f.artifacts[agentURL] = []byte(`{"name":"Finance Agent","version":"2.0.2"}`)
		}},
		{name: "artifact changed (entry refused)", at: atEntryURL, want: []string{CodeArtifactDigestMismatch}, mut: func(f *fixture) {
			f.artifacts[agentURL] = []byte(`{}`)
		}},
		{name: "artifact unavailable", at: atPubURL, want: []string{CodeArtifactUnavailable}, mut: func(f *fixture) {
			delete(f.artifacts, agentURL)
		}},
		{name: "inline data changed", at: atPubData, want: []string{CodeArtifactDigestMismatch}, mut: func(f *fixture) {
			d := strictjson.ObjectValue(strictjson.Member{Key: "name", Val: str("Changed")})
			f.entries[0].e.Data = &d
		}},
		{name: "inline data reordered", at: atPubData, mut: func(f *fixture) {
			d := reverseAll(*f.entries[0].e.Data)
			f.entries[0].e.Data = &d
		}},
		{name: "weak digest algorithm", at: atPubURL, want: []string{CodeDigestAlgorithmWeak}, mut: func(f *fixture) {
			f.pubURL().m.Subject.Digest, f.entries[1].e.Digest = weak, weak
		}},
		{name: "md5", at: atPubURL, want: []string{CodeDigestAlgorithmWeak}, mut: func(f *fixture) {
			d := "md5:" + strings.Repeat("ab", 16)
			f.pubURL().m.Subject.Digest, f.entries[1].e.Digest = d, d
		}},
		{name: "uppercase hex", at: atPubURL, want: []string{CodeDigestFormatInvalid}, mut: func(f *fixture) {
			d := strings.ToUpper(f.entries[1].e.Digest)
			d = "sha256" + d[6:]
			f.pubURL().m.Subject.Digest, f.entries[1].e.Digest = d, d
		}},
		{name: "no algorithm", at: atPubURL, want: []string{CodeDigestFormatInvalid}, mut: func(f *fixture) {
			d := strings.TrimPrefix(f.entries[1].e.Digest, "sha256:")
			f.pubURL().m.Subject.Digest, f.entries[1].e.Digest = d, d
		}},
		{name: "sha512", at: atPubURL, mut: func(f *fixture) {
			d := sha512hex(f.artifacts[agentURL])
			f.pubURL().m.Subject.Digest, f.entries[1].e.Digest = d, d
		}},
		{name: "http subject url", at: atPubURL, want: []string{CodeSubjectURLNotHTTPS}, mut: func(f *fixture) {
			u := "http://publisher.example/finance.json"
			f.artifacts[u] = f.artifacts[agentURL]
			f.pubURL().m.Subject.URL, f.entries[1].e.URL = u, u
		}},
		{name: "relative subject url", at: atPubURL, want: []string{CodeSubjectURLNotHTTPS}, mut: func(f *fixture) {
			f.pubURL().m.Subject.URL = "/finance.json"
		}},
		{name: "extension digest matched", at: atAssessor, mut: func(f *fixture) {
			f.assessor().edit = selectPolicy(f)
		}, check: func(t *testing.T, _ *fixture, rep *Report) {
			if got := rep.Entries[0].Manifests[1].Extensions; len(got) != 1 || got[policyExt] != ExtensionMatched {
				t.Errorf("extensions %v", got)
			}
		}},
		{name: "extension changed: failed, manifest still accepted", at: atAssessor, mut: func(f *fixture) {
			f.assessor().edit = selectPolicy(f)
			f.entries[0].extra = []strictjson.Member{{Key: "extensions", Val: strictjson.ObjectValue(strictjson.Member{Key: policyExt, Val: strictjson.ObjectValue()})}}
		}, check: func(t *testing.T, _ *fixture, rep *Report) {
			if got := rep.Entries[0].Manifests[1].Extensions; len(got) != 1 || got[policyExt] != ExtensionFailed {
				t.Errorf("extensions %v", got)
			}
		}},
		{name: "url on an inline entry", at: atAssessor, want: []string{CodeURLCoverageFailed}, mut: func(f *fixture) {
			f.assessor().m.Subject.URL = agentURL
		}},
	})
}

// TestVerifyEntryStructure: Level 1 structure and unique identifiers.
func TestVerifyEntryStructure(t *testing.T) {
	runCases(t, []vcase{
		{name: "url and data", at: atEntryURL, want: []string{CodeEntryInvalid}, mut: func(f *fixture) {
			f.entries[1].post = editMember("data", strictjson.ObjectValue())
		}},
		{name: "neither url nor data", at: atEntryURL, want: []string{CodeEntryInvalid}, mut: func(f *fixture) {
			f.entries[1].post = func(v strictjson.Value) strictjson.Value { return v.Without("url") }
		}},
		{name: "no type", at: atEntryURL, want: []string{CodeEntryInvalid}, mut: func(f *fixture) {
			f.entries[1].post = func(v strictjson.Value) strictjson.Value { return v.Without("type") }
		}},
		{name: "identifier a number", at: atEntryURL, want: []string{CodeEntryInvalid}, mut: func(f *fixture) {
			f.entries[1].post = editMember("identifier", strictjson.IntValue(3))
		}},
		{name: "trustManifests an object", at: atEntryURL, want: []string{CodeEntryInvalid}, mut: func(f *fixture) {
			f.entries[1].post = editMember("trustManifests", strictjson.ObjectValue())
		}},
		{name: "manifest not an object", at: atEntryURL, want: []string{CodeEntryInvalid}, mut: func(f *fixture) {
			f.entries[1].post = editMember("trustManifests", strictjson.ArrayValue(str("m")))
		}},
		{name: "duplicate identifier", at: "entry 2", want: []string{CodeIdentifierDuplicate}, mut: func(f *fixture) {
			f.entries = append(f.entries, f.entries[1])
		}},
		{name: "same identifier, other versions", at: "entry 2", mut: func(f *fixture) {
			e1 := *f.entries[1]
			e2 := *f.entries[1]
			m1, m2 := *e1.manifests[0], *e2.manifests[0]
			e1.e.Version, m1.m.Subject.Version = "1", "1"
			e2.e.Version, m2.m.Subject.Version = "2", "2"
			e1.manifests, e2.manifests = []*manifestSpec{&m1}, []*manifestSpec{&m2}
			f.entries[1] = &e1
			f.entries = append(f.entries, &e2)
		}},
	})
}

func sha512hex(b []byte) string {
	s := sha512.Sum512(b)
	return "sha512:" + hex.EncodeToString(s[:])
}

// selectPolicy is an edit hook that selects the fixture's policy-urls
// extension in subject.extensionDigests.
func selectPolicy(f *fixture) func(strictjson.Value) strictjson.Value {
	ext := f.entries[0].extra[0].Val
	policy, _ := ext.Get(policyExt)
	b, err := policy.JCS()
	if err != nil {
		f.t.Fatal(err)
	}
	return func(v strictjson.Value) strictjson.Value {
		subj, _ := v.Get("subject")
		sel := strictjson.ObjectValue(strictjson.Member{Key: policyExt, Val: str(sha(b))})
		return v.With("subject", subj.With("extensionDigests", sel))
	}
}
