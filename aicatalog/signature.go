package aicatalog

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// Caps on a JWS protected header: three short members in practice.
const (
	headerMaxBytes  = 8 << 10
	headerMaxDepth  = 4
	headerMaxValues = 256
)

// sigRule is what one signature must satisfy besides did-web-v1 itself.
type sigRule struct {
	typ string
	// path locates the signed object in the catalog for messages ("" for
	// the root).
	path string
	// unsigned is the code of a missing signature.
	unsigned string
	// want is the signer the document names (contributor, host.identifier)
	// and wantCode the code when they differ; "" wantCode: no such rule.
	want, wantCode, wantField string
	// needSubject: a signed Trust Manifest must bind a release.
	needSubject bool
}

// collector gathers the reasons of one signed object, each Detail
// starting with the path of the field it is about.
type collector struct {
	path    string
	reasons []Reason
}

func (c *collector) add(code, field, format string, args ...any) {
	at := field
	switch {
	case c.path != "" && field != "":
		at = c.path + "." + field
	case field == "":
		at = c.path
	}
	c.reasons = append(c.reasons, Reason{Code: code, Detail: at + ": " + fmt.Sprintf(format, args...)})
}

// q quotes a string from a document or a caller for a message.
func q(s string) string { return strictjson.QuoteForMessage(s) }

// verifySignature runs the did-web-v1 Signer Profile over object v in the
// order of the specification's conformance checker: structure, profile (no
// fallback), signer, timestamps, JWS form and header, kid under the signer
// before anything is resolved, the DID document and its key, the ES256
// signature over the rebuilt payload, and only then the endorsement times.
// A fatal refusal stops; a non-fatal one is recorded and the checks go on.
// It returns the signer once the signature verified ("" before), and the
// times the signature states.
func (vf *verifier) verifySignature(ctx context.Context, v strictjson.Value, r sigRule, c *collector) (signer string, issued, expires time.Time) {
	sig, ok := v.Get("signature")
	if !ok {
		c.add(r.unsigned, "signature", "absent")
		return "", time.Time{}, time.Time{}
	}
	if sig.Kind != strictjson.Object {
		c.add(CodeSignatureNotObject, "signature", "is %s, not an object", sig.Kind)
		return "", time.Time{}, time.Time{}
	}
	field := map[string]string{}
	missing := false
	for _, name := range []string{"signer", "profile", "issuedAt", "jws"} {
		s, ok, err := sig.GetString(name)
		switch {
		case err != nil:
			c.add(CodeSignatureMissingPrefix+name, "signature."+name, "%v", err)
		case !ok || s == "":
			c.add(CodeSignatureMissingPrefix+name, "signature."+name, "missing or empty")
		default:
			field[name] = s
			continue
		}
		missing = true
	}
	if missing {
		return "", time.Time{}, time.Time{}
	}
	if r.needSubject {
		if subj, ok := v.Get("subject"); !ok || subj.Kind != strictjson.Object {
			c.add(CodeSignedManifestWithoutSubject, "subject", "a signed manifest must have a subject object")
			return "", time.Time{}, time.Time{}
		}
	}
	if p := field["profile"]; p != Profile {
		c.add(CodeUnsupportedProfile, "signature.profile", "%s is not %q (profiles are compared exactly; no fallback)", q(p), Profile)
		return "", time.Time{}, time.Time{}
	}
	signer = field["signer"]
	if r.wantCode != "" && signer != r.want {
		c.add(r.wantCode, "signature.signer", "%s is not %s %s", q(signer), r.wantField, q(r.want))
	}
	if _, err := DomainOf(signer); err != nil {
		c.add(CodeSignerNotRootDIDWeb, "signature.signer", "%v", err)
		return "", time.Time{}, time.Time{}
	}
	issued, expires, ok = signatureTimes(sig, field["issuedAt"], c)
	if !ok {
		return "", time.Time{}, time.Time{}
	}
	header, raw, ok := splitJWS(field["jws"], c)
	if !ok {
		return "", time.Time{}, time.Time{}
	}
	kid, ok := checkHeader(header.v, r.typ, signer, c)
	if !ok {
		return "", time.Time{}, time.Time{}
	}
	doc, err := vf.resolve(ctx, signer)
	if err != nil {
		addReasonErr(c, "signature.signer", err)
		return "", time.Time{}, time.Time{}
	}
	pub, err := doc.SelectKey(kid, signer)
	if err != nil {
		addReasonErr(c, "signature.jws", err)
		return "", time.Time{}, time.Time{}
	}
	payload, err := Payload(v)
	if err != nil {
		c.add(CodeSignatureInvalid, "signature.jws", "%v", err)
		return "", time.Time{}, time.Time{}
	}
	input := header.segment + "." + base64.RawURLEncoding.EncodeToString(payload)
	if err := jose.Verify(jose.ES256, pub, []byte(input), raw); err != nil {
		c.add(CodeSignatureInvalid, "signature.jws", "ES256 signature by %s does not verify over the document: %v", q(kid), err)
		return "", time.Time{}, time.Time{}
	}
	// Times count only for an authenticated signature: issuedAt is the
	// signer's claim, worth nothing before the signature verifies.
	now := vf.now
	if now.Add(vf.opts.ClockSkew).Before(issued) {
		c.add(CodeNotYetValid, "signature.issuedAt", "%s is after now (%s, clock skew %s)", issued.UTC().Format(TimeFormat), now.UTC().Format(TimeFormat), vf.opts.ClockSkew)
	}
	if !expires.IsZero() && !now.Add(-vf.opts.ClockSkew).Before(expires) {
		c.add(CodeExpired, "signature.expiresAt", "%s is not after now (%s, clock skew %s)", expires.UTC().Format(TimeFormat), now.UTC().Format(TimeFormat), vf.opts.ClockSkew)
	}
	return signer, issued, expires
}

// addReasonErr records err, a Reason from resolution or key selection, at
// field; any other error is a resolution failure.
func addReasonErr(c *collector, field string, err error) {
	var r Reason
	if errors.As(err, &r) {
		c.add(r.Code, field, "%s", r.Detail)
		return
	}
	c.add(CodeDIDResolutionFailed, field, "%v", err)
}

// signatureTimes parses issuedAt and the optional expiresAt (RFC 3339 with
// an offset) and checks that expiresAt is later.
func signatureTimes(sig strictjson.Value, issuedAt string, c *collector) (issued, expires time.Time, ok bool) {
	issued, err := time.Parse(time.RFC3339, issuedAt)
	if err != nil {
		c.add(CodeTimestampInvalid, "signature.issuedAt", "%s is not an RFC 3339 instant with an offset", q(issuedAt))
		return issued, expires, false
	}
	if ev, present := sig.Get("expiresAt"); present {
		if ev.Kind != strictjson.String {
			c.add(CodeTimestampInvalid, "signature.expiresAt", "is %s, not a string", ev.Kind)
			return issued, expires, false
		}
		if expires, err = time.Parse(time.RFC3339, ev.Str); err != nil {
			c.add(CodeTimestampInvalid, "signature.expiresAt", "%s is not an RFC 3339 instant with an offset", q(ev.Str))
			return issued, expires, false
		}
		if !expires.After(issued) {
			c.add(CodeExpiresNotAfterIssued, "signature.expiresAt", "%s is not after issuedAt %s", q(ev.Str), q(issuedAt))
			return issued, expires, false
		}
	}
	return issued, expires, true
}

type protectedHeader struct {
	segment string
	v       strictjson.Value
}

// splitJWS reads a detached compact JWS: header "." "" "." signature.
func splitJWS(jws string, c *collector) (protectedHeader, []byte, bool) {
	parts := strings.Split(jws, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] != "" || parts[2] == "" {
		c.add(CodeJWSNotDetachedCompact, "signature.jws", "want BASE64URL(header) \"..\" BASE64URL(signature), the payload detached")
		return protectedHeader{}, nil, false
	}
	hb, err := jose.DecodeBase64URL(parts[0])
	if err != nil {
		c.add(CodeJWSSegmentsInvalid, "signature.jws", "protected header: %v", err)
		return protectedHeader{}, nil, false
	}
	raw, err := jose.DecodeBase64URL(parts[2])
	if err != nil {
		c.add(CodeJWSSegmentsInvalid, "signature.jws", "signature: %v", err)
		return protectedHeader{}, nil, false
	}
	h, err := strictjson.ParseAs(hb, strictjson.Limits{MaxBytes: headerMaxBytes, MaxDepth: headerMaxDepth, MaxValues: headerMaxValues}, "JWS header", "a JWS protected header is a JSON object")
	if err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && se.Rule == strictjson.RuleNotObject {
			c.add(CodeJWSHeaderNotObject, "signature.jws", "protected header: %v", err)
		} else {
			c.add(CodeJWSSegmentsInvalid, "signature.jws", "protected header: %v", err)
		}
		return protectedHeader{}, nil, false
	}
	return protectedHeader{segment: parts[0], v: h}, raw, true
}

// checkHeader applies the protected header rules and returns the kid.
func checkHeader(h strictjson.Value, typ, signer string, c *collector) (kid string, ok bool) {
	if got, _, _ := h.GetString("typ"); got != typ {
		c.add(CodeJWSTypMismatch, "signature.jws", "protected typ %s is not %q", q(got), typ)
	}
	if alg, _, _ := h.GetString("alg"); alg != string(jose.ES256) {
		c.add(CodeJWSAlgNotES256, "signature.jws", "protected alg %s is not \"ES256\"", q(alg))
		return "", false
	}
	if h.Has("b64") {
		c.add(CodeJWSB64Present, "signature.jws", "protected header has \"b64\" (RFC 7797 is not used)")
	}
	for _, name := range []string{"jku", "jwk", "x5u", "x5c"} {
		if h.Has(name) {
			c.add(CodeJWSKeySourceHeader, "signature.jws", "protected header has %q; did-web-v1 takes the key from the DID document only", name)
		}
	}
	if h.Has("crit") {
		c.add(CodeJWSUnsupportedCrit, "signature.jws", "protected header has \"crit\"; no extension is supported")
	}
	kid, _, _ = h.GetString("kid")
	frag, under := strings.CutPrefix(kid, signer+"#")
	if !under || frag == "" || strings.ContainsAny(frag, "/?") {
		c.add(CodeKIDNotUnderSigner, "signature.jws", "protected kid %s is not %s followed by \"#\" and a fragment", q(kid), q(signer))
		return "", false
	}
	return kid, true
}

// reasonDetail is the Detail of a Reason error, or the error's text.
func reasonDetail(err error) string {
	var r Reason
	if errors.As(err, &r) {
		return r.Detail
	}
	return err.Error()
}

// resolve returns the parsed DID document of did, resolving each DID once
// per verification.
func (vf *verifier) resolve(ctx context.Context, did string) (*ParsedDIDDocument, error) {
	if o, ok := vf.dids[did]; ok {
		return o.doc, o.err
	}
	doc, err := vf.resolveOnce(ctx, did)
	vf.dids[did] = didOutcome{doc, err}
	return doc, err
}

func (vf *verifier) resolveOnce(ctx context.Context, did string) (*ParsedDIDDocument, error) {
	limit := vf.opts.MaxDIDs
	if limit <= 0 {
		limit = DefaultMaxDIDs
	}
	if len(vf.dids) >= limit {
		return nil, Reason{CodeDIDResolutionFailed, fmt.Sprintf("not resolving %s: the document names more than %d DIDs", q(did), limit)}
	}
	if vf.opts.Resolver == nil {
		return nil, Reason{CodeDIDResolutionFailed, fmt.Sprintf("cannot resolve %s: no DID resolver", q(did))}
	}
	data, err := vf.opts.Resolver.ResolveDID(ctx, did)
	if err != nil {
		return nil, Reason{CodeDIDResolutionFailed, fmt.Sprintf("resolving %s: %v", q(did), err)}
	}
	doc, err := ParseDIDDocument(data, vf.opts.DIDLimits)
	if err != nil {
		return nil, Reason{CodeDIDDocumentInvalid, fmt.Sprintf("DID document of %s: %s", q(did), reasonDetail(err))}
	}
	if doc.ID != did {
		return nil, Reason{CodeDIDDocumentIDMismatch, fmt.Sprintf("the DID document of %s has id %s", q(did), q(doc.ID))}
	}
	return doc, nil
}

type didOutcome struct {
	doc *ParsedDIDDocument
	err error
}
