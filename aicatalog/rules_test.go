package aicatalog

import (
	"context"
	"crypto"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// sigMembers are a signature object's members but jws.
func sigMembers(signer, profile string, issuedAt, expiresAt string) []strictjson.Member {
	m := []strictjson.Member{
		{Key: "signer", Val: strictjson.StringValue(signer)},
		{Key: "profile", Val: strictjson.StringValue(profile)},
		{Key: "issuedAt", Val: strictjson.StringValue(issuedAt)},
	}
	if expiresAt != "" {
		m = append(m, strictjson.Member{Key: "expiresAt", Val: strictjson.StringValue(expiresAt)})
	}
	return m
}

// craft signs v as a hostile or careless producer might: its signature
// object's members are sig, the protected header is header (raw JSON), and
// key signs the payload the specification defines; the JWS goes into the
// signature object. Sign cannot make most of these.
func craft(t *testing.T, v strictjson.Value, sig []strictjson.Member, header string, key crypto.Signer) strictjson.Value {
	t.Helper()
	v = without(v, "signature")
	// a copy: the caller's members are shared between cases
	v.Obj = append(v.Obj, strictjson.Member{Key: "signature", Val: strictjson.ObjectValue(slices.Clone(sig)...)})
	payload, err := Payload(v)
	if err != nil {
		t.Fatal(err)
	}
	protected := base64.RawURLEncoding.EncodeToString([]byte(header))
	raw, err := jose.Sign(context.Background(), key, jose.ES256, []byte(protected+"."+base64.RawURLEncoding.EncodeToString(payload)))
	if err != nil {
		t.Fatal(err)
	}
	s := &v.Obj[len(v.Obj)-1].Val
	s.Obj = append(s.Obj, strictjson.Member{Key: "jws", Val: strictjson.StringValue(protected + ".." + base64.RawURLEncoding.EncodeToString(raw))})
	return v
}

func header(kid, typ string, extra ...string) string {
	h := fmt.Sprintf(`{"alg":"ES256","kid":%q,"typ":%q`, kid, typ)
	for _, e := range extra {
		h += "," + e
	}
	return h + "}"
}

// TestManifestRules: every rule of the Signature Object and the did:web
// Signer Profile, each on one manifest of the agent entry, with the code
// it is refused with (the conformance fixtures' cases, re-made with our
// own keys, and those no fixture covers).
func TestManifestRules(t *testing.T) {
	pub := DID(pubDomain)
	pubKID := KID(pub, "release-key")
	at := func(t time.Time) string { return t.UTC().Format(TimeFormat) }
	base := func(w *world) strictjson.Value {
		return Manifest{Contributor: pub, Subject: agentSubject()}.Value()
	}
	key := func(w *world) crypto.Signer { return w.keys[pubKID] }
	good := sigMembers(pub, Profile, at(issued), at(expires))
	tests := []struct {
		name string
		sig  []strictjson.Member // default good
		hdr  string              // default header(pubKID, TypManifest)
		edit func(w *world, m *strictjson.Value)
		skew time.Duration
		now  time.Time // default verifyAt
		want string    // "" accepted
	}{
		{name: "positive control", want: ""},
		{name: "members reversed and an unknown member", edit: func(w *world, m *strictjson.Value) {
			m.Obj = append(m.Obj, strictjson.Member{Key: "x-fixture-note", Val: strictjson.StringValue("kept in the payload")})
			signed := craft(t, *m, good, header(pubKID, TypManifest), key(w))
			for i, j := 0, len(signed.Obj)-1; i < j; i, j = i+1, j-1 {
				signed.Obj[i], signed.Obj[j] = signed.Obj[j], signed.Obj[i]
			}
			*m = signed
		}},
		{name: "unknown member added after signing", want: ReasonSignatureInvalid, edit: func(w *world, m *strictjson.Value) {
			*m = craft(t, *m, good, header(pubKID, TypManifest), key(w))
			m.Obj = append(m.Obj, strictjson.Member{Key: "x-note", Val: strictjson.StringValue("added")})
		}},
		{name: "additionalSignatures added after signing", edit: func(w *world, m *strictjson.Value) {
			*m = craft(t, *m, good, header(pubKID, TypManifest), key(w))
			m.Obj = append(m.Obj, strictjson.Member{Key: "additionalSignatures", Val: strictjson.ArrayValue()})
		}},
		{name: "contributor trailing dot", want: ReasonContributorMismatch, edit: func(w *world, m *strictjson.Value) {
			setString(t, m, pub+".", "contributor")
		}},
		{name: "expired", now: expires.Add(time.Hour), want: ReasonExpired},
		{name: "a second before expiry", now: expires.Add(-time.Second), want: ""},
		{name: "just expired", now: expires, want: ReasonExpired},
		{name: "expired but within clock skew", now: expires.Add(30 * time.Second), skew: time.Minute, want: ""},
		{name: "not yet valid", now: issued.Add(-time.Second), want: ReasonNotYetValid},
		{name: "not yet valid but within clock skew", now: issued.Add(-time.Second), skew: time.Minute, want: ""},
		{name: "expires before issued", sig: sigMembers(pub, Profile, at(issued), at(issued.Add(-time.Hour))), want: ReasonExpiresNotAfter},
		{name: "expires at issue", sig: sigMembers(pub, Profile, at(issued), at(issued)), want: ReasonExpiresNotAfter},
		{name: "no expiry", sig: sigMembers(pub, Profile, at(issued), ""), want: ""},
		{name: "timestamp without offset", sig: sigMembers(pub, Profile, "2026-10-01T00:00:00", at(expires)), want: ReasonTimestampInvalid},
		{name: "timestamp not a date", sig: sigMembers(pub, Profile, "yesterday", at(expires)), want: ReasonTimestampInvalid},
		{name: "timestamp with an offset", sig: sigMembers(pub, Profile, "2026-10-01T02:00:00+02:00", at(expires)), want: ""},
		{name: "profile relabelled, same JWS", want: ReasonUnsupportedProfile, edit: func(w *world, m *strictjson.Value) {
			*m = craft(t, *m, good, header(pubKID, TypManifest), key(w))
			s, _ := m.Get("signature")
			s.Obj[1].Val = strictjson.StringValue("https://example.org/profiles/did-web-v1")
			setMember(m, "signature", s)
		}},
		{name: "unknown profile, signed", sig: sigMembers(pub, "https://example.org/profiles/did-web-v1", at(issued), at(expires)), want: ReasonUnsupportedProfile},
		{name: "profile case variant", sig: sigMembers(pub, "DID-WEB-V1", at(issued), at(expires)), want: ReasonUnsupportedProfile},
		{name: "signer missing", sig: good[1:], want: ReasonSignatureMissing + "signer"},
		{name: "jws missing", want: ReasonSignatureMissing + "jws", edit: func(w *world, m *strictjson.Value) {
			setMember(m, "signature", strictjson.ObjectValue(good...))
		}},
		{name: "signature not an object", want: ReasonSignatureNotObject, edit: func(w *world, m *strictjson.Value) {
			setMember(m, "signature", strictjson.StringValue("eyJ..sig"))
		}},
		{name: "signed without subject", want: ReasonWithoutSubject, edit: func(w *world, m *strictjson.Value) {
			*m = craft(t, without(*m, "subject"), good, header(pubKID, TypManifest), key(w))
		}},
		{name: "signer with a port", sig: sigMembers("did:web:publisher.example%3A8443", Profile, at(issued), at(expires)), hdr: header("did:web:publisher.example%3A8443#release-key", TypManifest), want: ReasonSignerNotRootDIDWeb},
		{name: "signer with a path", sig: sigMembers("did:web:publisher.example:users:alice", Profile, at(issued), at(expires)), want: ReasonSignerNotRootDIDWeb},
		{name: "signer an IP address", sig: sigMembers("did:web:192.0.2.1", Profile, at(issued), at(expires)), want: ReasonSignerNotRootDIDWeb},
		{name: "signer with a trailing dot", sig: sigMembers(pub+".", Profile, at(issued), at(expires)), want: ReasonSignerNotRootDIDWeb},
		{name: "signer in upper case", sig: sigMembers("did:web:Publisher.example", Profile, at(issued), at(expires)), want: ReasonSignerNotRootDIDWeb},
		{name: "signer another method", sig: sigMembers("did:key:z6Mk", Profile, at(issued), at(expires)), want: ReasonSignerNotRootDIDWeb},
		{name: "jws with its payload attached", want: ReasonJWSNotDetached, edit: func(w *world, m *strictjson.Value) {
			*m = craft(t, *m, good, header(pubKID, TypManifest), key(w))
			s, _ := m.Get("signature")
			j := s.Obj[len(s.Obj)-1].Val.Str
			s.Obj[len(s.Obj)-1].Val = strictjson.StringValue(strings.Replace(j, "..", ".e30.", 1))
			setMember(m, "signature", s)
		}},
		{name: "jws header not base64url", want: ReasonJWSSegmentsInvalid, edit: func(w *world, m *strictjson.Value) {
			*m = craft(t, *m, good, header(pubKID, TypManifest), key(w))
			s, _ := m.Get("signature")
			j := s.Obj[len(s.Obj)-1].Val.Str
			s.Obj[len(s.Obj)-1].Val = strictjson.StringValue("%%%" + j[3:])
			setMember(m, "signature", s)
		}},
		{name: "jws header an array", hdr: `["ES256"]`, want: ReasonJWSHeaderNotObject},
		{name: "jws header with duplicate members", hdr: `{"alg":"ES256","alg":"none","kid":"` + pubKID + `","typ":"` + TypManifest + `"}`, want: ReasonJWSSegmentsInvalid},
		{name: "typ missing", hdr: fmt.Sprintf(`{"alg":"ES256","kid":%q}`, pubKID), want: ReasonJWSTypMismatch},
		{name: "typ of a catalog", hdr: header(pubKID, TypCatalog), want: ReasonJWSTypMismatch},
		{name: "alg none", hdr: fmt.Sprintf(`{"alg":"none","kid":%q,"typ":%q}`, pubKID, TypManifest), want: ReasonJWSAlgNotES256},
		{name: "alg ES384", hdr: fmt.Sprintf(`{"alg":"ES384","kid":%q,"typ":%q}`, pubKID, TypManifest), want: ReasonJWSAlgNotES256},
		{name: "b64 false", hdr: header(pubKID, TypManifest, `"b64":false`), want: ReasonJWSB64Present},
		{name: "jku in the header", hdr: header(pubKID, TypManifest, `"jku":"https://evil.example/jwks.json"`), want: ReasonJWSKeySourceHeader},
		{name: "jwk in the header", hdr: header(pubKID, TypManifest, `"jwk":{"kty":"EC"}`), want: ReasonJWSKeySourceHeader},
		{name: "x5c in the header", hdr: header(pubKID, TypManifest, `"x5c":["MIIB"]`), want: ReasonJWSKeySourceHeader},
		{name: "x5u in the header", hdr: header(pubKID, TypManifest, `"x5u":"https://evil.example/c.pem"`), want: ReasonJWSKeySourceHeader},
		{name: "crit in the header", hdr: header(pubKID, TypManifest, `"crit":["exp"]`, `"exp":1`), want: ReasonJWSUnsupportedCrit},
		{name: "kid without a fragment", hdr: header(pub, TypManifest), want: ReasonKIDNotUnderSigner},
		{name: "kid with an empty fragment", hdr: header(pub+"#", TypManifest), want: ReasonKIDNotUnderSigner},
		{name: "kid with a path", hdr: header(pub+"/keys#release-key", TypManifest), want: ReasonKIDNotUnderSigner},
		{name: "kid a relative reference", hdr: header("#release-key", TypManifest), want: ReasonKIDNotUnderSigner},
		{name: "kid in authentication only", want: ReasonKeyNotAuthorized, edit: func(w *world, m *strictjson.Value) {
			auth := testsupport.Key(t, jose.ES256)
			w.resolver[pub] = withMethod(t, w.resolver[pub], pub+"#auth-key", pub, auth, "authentication")
			*m = craft(t, *m, good, header(pub+"#auth-key", TypManifest), auth)
		}},
		{name: "kid in verificationMethod only", want: ReasonKeyNotAuthorized, edit: func(w *world, m *strictjson.Value) {
			other := testsupport.Key(t, jose.ES256)
			w.resolver[pub] = withMethod(t, w.resolver[pub], pub+"#listed-key", pub, other, "")
			*m = craft(t, *m, good, header(pub+"#listed-key", TypManifest), other)
		}},
		{name: "method controlled by another DID", want: ReasonControllerMismatch, edit: func(w *world, m *strictjson.Value) {
			other := testsupport.Key(t, jose.ES256)
			w.resolver[pub] = withMethod(t, w.resolver[pub], pub+"#delegated-key", "did:web:other.example", other, "assertionMethod")
			*m = craft(t, *m, good, header(pub+"#delegated-key", TypManifest), other)
		}},
		{name: "embedded assertion method with a relative id", edit: func(w *world, m *strictjson.Value) {
			k := testsupport.Key(t, jose.ES256)
			w.resolver[pub] = withMethod(t, w.resolver[pub], "#embedded-key", pub, k, "assertionMethod-embedded")
			*m = craft(t, *m, good, header(pub+"#embedded-key", TypManifest), k)
		}},
		{name: "signed by another key than the kid's", want: ReasonSignatureInvalid, edit: func(w *world, m *strictjson.Value) {
			*m = craft(t, *m, good, header(pubKID, TypManifest), testsupport.Key(t, jose.ES256))
		}},
		{name: "no DID document", want: ReasonDIDResolutionFailed, edit: func(w *world, m *strictjson.Value) { delete(w.resolver, pub) }},
		{name: "DID document not JSON", want: ReasonDIDDocumentInvalid, edit: func(w *world, m *strictjson.Value) { w.resolver[pub] = []byte("<html>") }},
		{name: "DID document too deep", want: ReasonDIDDocumentInvalid, edit: func(w *world, m *strictjson.Value) {
			w.resolver[pub] = []byte(`{"id":"` + pub + `","x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`)
		}},
		{name: "DID document too big", want: ReasonDIDDocumentInvalid, edit: func(w *world, m *strictjson.Value) {
			w.resolver[pub] = []byte(`{"id":"` + pub + `","x":"` + strings.Repeat("a", MaxDIDDocumentBytes) + `"}`)
		}},
		{name: "key_ops without verify", want: ReasonJWKKeyOpsForbid, edit: func(w *world, m *strictjson.Value) { editJWK(w, pub, `"key_ops":["sign"],`) }},
		{name: "JWK alg ES384", want: ReasonJWKAlgOrUseMismatch, edit: func(w *world, m *strictjson.Value) {
			w.resolver[pub] = []byte(strings.Replace(string(w.resolver[pub]), `"alg":"ES256"`, `"alg":"ES384"`, 1))
		}},
		{name: "JWK use enc", want: ReasonJWKAlgOrUseMismatch, edit: func(w *world, m *strictjson.Value) {
			w.resolver[pub] = []byte(strings.Replace(string(w.resolver[pub]), `"use":"sig"`, `"use":"enc"`, 1))
		}},
		{name: "JWK P-384", want: ReasonJWKNotP256, edit: func(w *world, m *strictjson.Value) {
			w.resolver[pub] = []byte(strings.Replace(string(w.resolver[pub]), `"crv":"P-256"`, `"crv":"P-384"`, 1))
		}},
		{name: "JWK off the curve", want: ReasonJWKCoordinates, edit: func(w *world, m *strictjson.Value) {
			doc := string(w.resolver[pub])
			i := strings.Index(doc, `"y":"`) + 5
			w.resolver[pub] = []byte(doc[:i] + flipB64(doc[i:i+43]) + doc[i+43:])
		}},
		{name: "JWK with a private member", want: ReasonJWKPrivate, edit: func(w *world, m *strictjson.Value) { editJWK(w, pub, `"p":"AAAA",`) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			m := base(w)
			switch {
			case tc.edit != nil:
				tc.edit(w, &m)
				if !m.Has("signature") || tc.sig != nil || tc.hdr != "" {
					sig, hdr := tc.sig, tc.hdr
					if sig == nil {
						sig = good
					}
					if hdr == "" {
						hdr = header(pubKID, TypManifest)
					}
					if !m.Has("signature") {
						m = craft(t, m, sig, hdr, key(w))
					}
				}
			default:
				sig, hdr := tc.sig, tc.hdr
				if sig == nil {
					sig = good
				}
				if hdr == "" {
					hdr = header(pubKID, TypManifest)
				}
				m = craft(t, m, sig, hdr, key(w))
			}
			e := w.entry()
			e.TrustManifests = []strictjson.Value{m}
			now := verifyAt
			if !tc.now.IsZero() {
				now = tc.now
			}
			rep, err := VerifyCatalog(context.Background(), w.catalog(e).Compact(), Options{
				Now: func() time.Time { return now }, ClockSkew: tc.skew, Resolver: w.resolver, Fetcher: w.fetcher,
			})
			if err != nil {
				t.Fatal(err)
			}
			got := rep.Entries[0]
			if tc.want == "" {
				if !got.Accepted {
					t.Fatalf("refused: %v", got.Reasons)
				}
				return
			}
			if got.Accepted || !contains(codes(got.Reasons), tc.want) {
				t.Fatalf("reasons %v, want %s", got.Reasons, tc.want)
			}
		})
	}
}

// withMethod adds a verification method (id, controller, key) to a DID
// document, referenced from relation ("" none; "assertionMethod-embedded"
// embeds it in assertionMethod).
func withMethod(t *testing.T, doc []byte, id, controller string, k crypto.Signer, relation string) []byte {
	t.Helper()
	v, err := strictjson.Parse(doc, strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := jose.NewJWK(k.Public(), "-", jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	str := strictjson.StringValue
	method := strictjson.ObjectValue(
		strictjson.Member{Key: "id", Val: str(id)},
		strictjson.Member{Key: "type", Val: str("JsonWebKey2020")},
		strictjson.Member{Key: "controller", Val: str(controller)},
		strictjson.Member{Key: "publicKeyJwk", Val: strictjson.ObjectValue(
			strictjson.Member{Key: "kty", Val: str("EC")}, strictjson.Member{Key: "crv", Val: str("P-256")},
			strictjson.Member{Key: "x", Val: str(jwk.X)}, strictjson.Member{Key: "y", Val: str(jwk.Y)})},
	)
	for i := range v.Obj {
		switch {
		case v.Obj[i].Key == "verificationMethod" && relation != "assertionMethod-embedded":
			v.Obj[i].Val.Arr = append(v.Obj[i].Val.Arr, method)
		case v.Obj[i].Key == "assertionMethod" && relation == "assertionMethod":
			v.Obj[i].Val.Arr = append(v.Obj[i].Val.Arr, str(id))
		case v.Obj[i].Key == "assertionMethod" && relation == "assertionMethod-embedded":
			v.Obj[i].Val.Arr = append(v.Obj[i].Val.Arr, method)
		}
	}
	if relation == "authentication" {
		v.Obj = append(v.Obj, strictjson.Member{Key: "authentication", Val: strictjson.ArrayValue(str(id))})
	}
	return v.Compact()
}

// editJWK inserts members at the start of the first publicKeyJwk of did.
func editJWK(w *world, did, members string) {
	w.resolver[did] = []byte(strings.Replace(string(w.resolver[did]), `"publicKeyJwk":{`, `"publicKeyJwk":{`+members, 1))
}

// flipB64 changes the first character of a base64url string.
func flipB64(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}
