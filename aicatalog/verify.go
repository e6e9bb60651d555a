package aicatalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"strings"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// Resolver fetches the DID document of a root did:web DID (its bytes, not
// yet parsed). A verifier over HTTPS is webtrust's; tests pass a map.
type Resolver interface {
	ResolveDID(ctx context.Context, did string) ([]byte, error)
}

// Fetcher fetches the artifact an entry's url points at: exactly the bytes
// served, which its digest covers.
type Fetcher interface {
	FetchArtifact(ctx context.Context, url string) ([]byte, error)
}

// MaxCatalogBytes and MaxCatalogDepth bound a catalog read when Options
// give no limits.
const (
	MaxCatalogBytes = 4 << 20
	MaxCatalogDepth = 64
)

// Options are what a verification needs beyond the document.
type Options struct {
	// Now is the instant of verification (default time.Now); ClockSkew
	// the leeway on issuedAt and expiresAt.
	Now       func() time.Time
	ClockSkew time.Duration
	Resolver  Resolver
	// Fetcher fetches url entries' artifacts; nil: a digest over a url
	// entry cannot be checked (reason artifact-unavailable).
	Fetcher Fetcher
	// Limits bound the catalog parsed (zero: MaxCatalogBytes,
	// MaxCatalogDepth); DID documents get their own (ParseDIDDocument).
	Limits strictjson.Limits
}

// Reason is one refusal: a stable code (for scripts) and what it is about.
type Reason struct {
	Code   string
	Detail string
}

func (r Reason) String() string {
	if r.Detail == "" {
		return r.Code
	}
	return r.Code + ": " + r.Detail
}

// Result is the outcome of one signature's verification.
type Result struct {
	Accepted bool
	// Signer is the authenticated signer (signature.signer) when the
	// signature verified; IssuedAt and ExpiresAt (zero: none) the times it
	// states.
	Signer              string
	IssuedAt, ExpiresAt time.Time
	Reasons             []Reason
}

// EntryResult is the outcome for one catalog entry: accepted when a
// publisher-authorized manifest covering it verified (Manifest is its
// index in trustManifests, -1 when none did).
type EntryResult struct {
	Index      int
	Identifier string
	Manifest   int
	Result
}

// Report is the outcome of VerifyCatalog.
type Report struct {
	Catalog Result
	Entries []EntryResult
}

// OK reports whether the catalog signature and every entry were accepted.
func (r *Report) OK() bool {
	if !r.Catalog.Accepted {
		return false
	}
	for _, e := range r.Entries {
		if !e.Accepted {
			return false
		}
	}
	return true
}

// verifier is one VerifyCatalog call: its options and the DID documents
// it resolved (once per DID).
type verifier struct {
	opts Options
	now  time.Time
	dids map[string]didOutcome
}

type didOutcome struct {
	doc *ParsedDIDDocument
	err *Reason
}

func newVerifier(opts Options) *verifier {
	now := time.Now()
	if opts.Now != nil {
		now = opts.Now()
	}
	return &verifier{opts: opts, now: now, dids: map[string]didOutcome{}}
}

// VerifyCatalog verifies a catalog document as the "Trusted" level
// requires: the catalog snapshot signature under the did:web Catalog
// Profile (typ ai-catalog+jws, signer == host.identifier), and for every
// entry a Trust Manifest signed under did-web-v1 by the publisher of its
// urn:air identifier, covering the entry's release (identifier, type,
// version, digest of the artifact bytes, url). The error is for a document
// that cannot be read at all (not JSON, over the caps, duplicate members,
// no entries array); every other refusal is a Reason in the report.
func VerifyCatalog(ctx context.Context, data []byte, opts Options) (*Report, error) {
	lim := opts.Limits
	if lim == (strictjson.Limits{}) {
		lim = strictjson.Limits{MaxBytes: MaxCatalogBytes, MaxDepth: MaxCatalogDepth}
	}
	doc, err := strictjson.ParseAs(data, lim, "catalog", "an AI Catalog is a JSON object")
	if err != nil {
		return nil, fmt.Errorf("aicatalog: %w", err)
	}
	entries, ok := doc.Get("entries")
	if !ok || entries.Kind != strictjson.Array {
		return nil, errors.New("aicatalog: $.entries: missing or not an array")
	}
	v := newVerifier(opts)
	rep := &Report{Catalog: v.catalog(ctx, doc)}
	seen := map[string]int{}
	for i, e := range entries.Arr {
		rep.Entries = append(rep.Entries, v.entry(ctx, i, e, seen))
	}
	return rep, nil
}

// catalog verifies the root: spec version, host.identifier, the snapshot
// signature.
func (v *verifier) catalog(ctx context.Context, doc strictjson.Value) Result {
	var res Result
	sv, _, _ := doc.GetString("specVersion")
	if major, _, _ := strings.Cut(sv, "."); major != "1" {
		res.Reasons = append(res.Reasons, Reason{ReasonSpecVersion, "specVersion " + quote(sv) + " (major version 1 is read)"})
	}
	host, _ := doc.Get("host")
	hostID, ok, _ := host.GetString("identifier")
	if !ok || hostID == "" {
		res.Reasons = append(res.Reasons, Reason{ReasonHostIdentifierMissing, "$.host.identifier is missing: the did:web Catalog Profile attributes the catalog to it"})
	}
	if !doc.Has("signature") {
		res.Reasons = append(res.Reasons, Reason{ReasonCatalogUnsigned, "$.signature is missing"})
		return res
	}
	sig := v.signature(ctx, doc, TypCatalog, "$")
	res.Signer, res.IssuedAt, res.ExpiresAt = sig.Signer, sig.IssuedAt, sig.ExpiresAt
	res.Reasons = append(res.Reasons, sig.Reasons...)
	if sig.Accepted && ok && hostID != sig.Signer {
		res.Reasons = append(res.Reasons, Reason{ReasonHostSignerMismatch, fmt.Sprintf("$.host.identifier %s is not the signer %s", quote(hostID), quote(sig.Signer))})
	}
	res.Accepted = len(res.Reasons) == 0
	if !res.Accepted {
		res.Signer = ""
	}
	return res
}

// entry verifies one entry: its structure, then its manifests by the
// publisher of its identifier, the first accepted one wins.
func (v *verifier) entry(ctx context.Context, i int, e strictjson.Value, seen map[string]int) EntryResult {
	path := fmt.Sprintf("$.entries[%d]", i)
	out := EntryResult{Index: i, Manifest: -1}
	fail := func(code, detail string) EntryResult {
		out.Reasons = append(out.Reasons, Reason{code, detail})
		return out
	}
	if e.Kind != strictjson.Object {
		return fail(ReasonEntryInvalid, path+" is not an object")
	}
	id, _, err := e.GetString("identifier")
	out.Identifier = id
	if err != nil || id == "" {
		return fail(ReasonEntryInvalid, path+".identifier is missing or not a string")
	}
	if typ, _, err := e.GetString("type"); err != nil || typ == "" {
		return fail(ReasonEntryInvalid, path+".type is missing or not a string")
	}
	if e.Has("url") == e.Has("data") {
		return fail(ReasonEntryInvalid, path+" must have exactly one of url and data")
	}
	if _, _, err := e.GetString("url"); err != nil {
		return fail(ReasonEntryInvalid, path+".url is not a string")
	}
	version, _, _ := e.GetString("version")
	key := id + "\x00" + version
	if j, dup := seen[key]; dup {
		return fail(ReasonIdentifierDuplicate, fmt.Sprintf("%s.identifier %s (version %s) is also entry %d's", path, quote(id), quote(version), j))
	}
	seen[key] = i
	publisher, ok := PublisherOf(id)
	if !ok {
		return fail(ReasonNotURNAir, path+".identifier "+quote(id)+" is not urn:air:PUBLISHER:NAMESPACE:NAME")
	}
	if err := CheckDomain(publisher); err != nil {
		return fail(ReasonPublisherNotDomain, fmt.Sprintf("%s.identifier's publisher %s: %v", path, quote(publisher), err))
	}
	want := DID(publisher)
	tms, _ := e.Get("trustManifests")
	if tms.Kind != strictjson.Array {
		return fail(ReasonNoPublisherManifest, path+" has no trustManifests")
	}
	var artifact []byte
	var fetched bool
	tried := 0
	for j, m := range tms.Arr {
		mpath := fmt.Sprintf("%s.trustManifests[%d]", path, j)
		if c, _, _ := m.GetString("contributor"); c != want {
			if m.Kind == strictjson.Object && m.Has("signature") {
				if s, _ := m.Get("signature"); s.Kind == strictjson.Object {
					if signer, _, _ := s.GetString("signer"); signer != want {
						continue // another contributor's manifest: an endorsement, not the publisher's
					}
				}
			}
		}
		tried++
		res := v.manifest(ctx, e, m, mpath, want, &artifact, &fetched)
		if res.Accepted {
			out.Result, out.Manifest = res, j
			out.Reasons = nil
			return out
		}
		out.Reasons = append(out.Reasons, res.Reasons...)
	}
	if tried == 0 {
		return fail(ReasonNoPublisherManifest, fmt.Sprintf("%s has no Trust Manifest by its publisher %s", path, quote(want)))
	}
	return out
}

// manifest verifies one manifest of entry e: the signature (profile,
// signer, times, JWS, key), then the Publisher Profile and Entry Release
// Coverage. artifact caches the entry's fetched bytes across manifests.
func (v *verifier) manifest(ctx context.Context, e, m strictjson.Value, path, publisherDID string, artifact *[]byte, fetched *bool) Result {
	if m.Kind != strictjson.Object {
		return Result{Reasons: []Reason{{ReasonSignatureNotObject, path + " is not an object"}}}
	}
	var pre []Reason
	contributor, _, err := m.GetString("contributor")
	if err != nil || contributor == "" {
		pre = append(pre, Reason{ReasonContributorMissing, path + ".contributor is missing or not a string"})
	}
	if !m.Has("signature") {
		return Result{Reasons: append(pre, Reason{ReasonUnsigned, path + " has no signature"})}
	}
	if !m.Has("subject") {
		return Result{Reasons: append(pre, Reason{ReasonWithoutSubject, path + " is signed but has no subject"})}
	}
	res := v.signature(ctx, m, TypManifest, path)
	res.Reasons = append(pre, res.Reasons...)
	if res.Signer != "" && contributor != res.Signer {
		res.Reasons = append(res.Reasons, Reason{ReasonContributorMismatch, fmt.Sprintf("%s.contributor %s is not the signer %s", path, quote(contributor), quote(res.Signer))})
	}
	if len(res.Reasons) > 0 {
		res.Accepted, res.Signer = false, ""
		return res
	}
	if res.Signer != publisherDID {
		res.Reasons = append(res.Reasons, Reason{ReasonPublisherNotSigner, fmt.Sprintf("%s is signed by %s, not by the identifier's publisher %s", path, quote(res.Signer), quote(publisherDID))})
	}
	res.Reasons = append(res.Reasons, v.coverage(ctx, e, m, path, artifact, fetched)...)
	res.Accepted = len(res.Reasons) == 0
	if !res.Accepted {
		res.Signer = ""
	}
	return res
}

// signature verifies the signature object of obj (a manifest or the
// catalog) for typ, in the order of the did:web Signer Profile: the
// profile first, the kid under the signer before anything is resolved, the
// times after the signature. A fatal refusal ends it; the others are all
// reported.
func (v *verifier) signature(ctx context.Context, obj strictjson.Value, typ, path string) Result {
	var res Result
	add := func(code, format string, args ...any) {
		res.Reasons = append(res.Reasons, Reason{code, fmt.Sprintf(format, args...)})
	}
	spath := path + ".signature"
	sig, _ := obj.Get("signature")
	if sig.Kind != strictjson.Object {
		add(ReasonSignatureNotObject, "%s is not an object", spath)
		return res
	}
	fields := map[string]string{}
	for _, name := range []string{"signer", "profile", "issuedAt", "jws"} {
		s, _, err := sig.GetString(name)
		if err != nil || s == "" {
			add(ReasonSignatureMissing+name, "%s.%s is missing, empty or not a string", spath, name)
			return res
		}
		fields[name] = s
	}
	if p := fields["profile"]; p != Profile {
		add(ReasonUnsupportedProfile, "%s.profile is %s; this verifier implements %q only", spath, quote(p), Profile)
		return res
	}
	signer := fields["signer"]
	if _, err := DomainOf(signer); err != nil {
		add(ReasonSignerNotRootDIDWeb, "%s.signer %s: %v", spath, quote(signer), err)
		return res
	}
	issued, err := parseTime(fields["issuedAt"])
	if err != nil {
		add(ReasonTimestampInvalid, "%s.issuedAt %s: %v", spath, quote(fields["issuedAt"]), err)
		return res
	}
	var expires time.Time
	if s, ok, err := sig.GetString("expiresAt"); ok {
		if err == nil {
			expires, err = parseTime(s)
		}
		if err != nil {
			add(ReasonTimestampInvalid, "%s.expiresAt: %v", spath, err)
			return res
		}
		if !expires.After(issued) {
			add(ReasonExpiresNotAfter, "%s.expiresAt %s is not after issuedAt %s", spath, quote(s), quote(fields["issuedAt"]))
			return res
		}
	}
	header, rawSig, protected, ok := v.jws(fields["jws"], spath, add)
	if !ok {
		return res
	}
	if t, _, _ := header.GetString("typ"); t != typ {
		add(ReasonJWSTypMismatch, "%s.jws typ is %s, want %q", spath, quote(t), typ)
	}
	if a, _, _ := header.GetString("alg"); a != string(jose.ES256) {
		add(ReasonJWSAlgNotES256, "%s.jws alg is %s; did-web-v1 takes ES256 only", spath, quote(a))
		return res
	}
	if header.Has("b64") {
		add(ReasonJWSB64Present, "%s.jws header has b64 (RFC 7797 is not used)", spath)
	}
	for _, name := range []string{"jku", "jwk", "x5u", "x5c"} {
		if header.Has(name) {
			add(ReasonJWSKeySourceHeader, "%s.jws header has %s: did-web-v1 takes the key from the DID document only", spath, name)
		}
	}
	if header.Has("crit") {
		add(ReasonJWSUnsupportedCrit, "%s.jws header has crit; no critical extension is supported", spath)
	}
	kid, _, _ := header.GetString("kid")
	frag, under := strings.CutPrefix(kid, signer+"#")
	if !under || frag == "" || strings.ContainsAny(frag, "/?#") {
		add(ReasonKIDNotUnderSigner, "%s.jws kid %s is not %s followed by a fragment", spath, quote(kid), quote(signer))
		return res
	}
	doc, why := v.resolve(ctx, signer)
	if why != nil {
		res.Reasons = append(res.Reasons, *why)
		return res
	}
	pub, err := doc.AssertionKey(kid, signer)
	if err != nil {
		var ke *keyError
		if errors.As(err, &ke) {
			add(ke.code, "%s: %s", spath, ke.detail)
		} else {
			add(ReasonKeyNotAuthorized, "%s: %v", spath, err)
		}
		return res
	}
	payload, err := Payload(obj)
	if err != nil {
		add(ReasonSignatureInvalid, "%s: the signed object is not RFC 8785 input: %v", path, err)
		return res
	}
	input := protected + "." + base64.RawURLEncoding.EncodeToString(payload)
	if err := jose.Verify(jose.ES256, pub, []byte(input), rawSig); err != nil {
		add(ReasonSignatureInvalid, "%s.jws does not verify with %s over the object as it is", spath, quote(kid))
		return res
	}
	if len(res.Reasons) > 0 {
		return res
	}
	// Time only now: acceptable as current only after the signature is.
	skew := v.opts.ClockSkew
	if v.now.Add(skew).Before(issued) {
		add(ReasonNotYetValid, "%s.issuedAt %s is after now (%s) with %s leeway", spath, issued.Format(time.RFC3339), v.now.UTC().Format(time.RFC3339), skew)
	}
	if !expires.IsZero() && !v.now.Add(-skew).Before(expires) {
		add(ReasonExpired, "%s.expiresAt %s has passed (now %s, %s leeway)", spath, expires.Format(time.RFC3339), v.now.UTC().Format(time.RFC3339), skew)
	}
	if len(res.Reasons) == 0 {
		res.Accepted, res.Signer, res.IssuedAt, res.ExpiresAt = true, signer, issued, expires
	}
	return res
}

// jws splits a detached compact JWS and reads its protected header.
func (v *verifier) jws(s, spath string, add func(code, format string, args ...any)) (header strictjson.Value, sig []byte, protected string, ok bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[1] != "" || parts[0] == "" || parts[2] == "" {
		add(ReasonJWSNotDetached, "%s.jws is not a detached compact JWS (protected..signature)", spath)
		return header, nil, "", false
	}
	hb, err := jose.DecodeBase64URL(parts[0])
	if err == nil {
		sig, err = jose.DecodeBase64URL(parts[2])
	}
	if err != nil {
		add(ReasonJWSSegmentsInvalid, "%s.jws: %v", spath, err)
		return header, nil, "", false
	}
	header, err = strictjson.ParseAs(hb, strictjson.Limits{MaxBytes: 8 << 10, MaxDepth: 4}, "JWS header", "a JWS protected header is a JSON object")
	if err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && se.Rule == strictjson.RuleNotObject {
			add(ReasonJWSHeaderNotObject, "%s.jws: %v", spath, err)
		} else {
			add(ReasonJWSSegmentsInvalid, "%s.jws header: %v", spath, err)
		}
		return header, nil, "", false
	}
	return header, sig, parts[0], true
}

// resolve resolves and parses did's document, once per verification.
func (v *verifier) resolve(ctx context.Context, did string) (*ParsedDIDDocument, *Reason) {
	if o, ok := v.dids[did]; ok {
		return o.doc, o.err
	}
	o := v.resolveOnce(ctx, did)
	v.dids[did] = o
	return o.doc, o.err
}

func (v *verifier) resolveOnce(ctx context.Context, did string) didOutcome {
	if v.opts.Resolver == nil {
		return didOutcome{err: &Reason{ReasonDIDResolutionFailed, "no resolver to fetch the DID document of " + quote(did)}}
	}
	data, err := v.opts.Resolver.ResolveDID(ctx, did)
	if err != nil {
		return didOutcome{err: &Reason{ReasonDIDResolutionFailed, fmt.Sprintf("%s: %v", quote(did), err)}}
	}
	doc, err := ParseDIDDocument(data, strictjson.Limits{})
	if err != nil {
		return didOutcome{err: &Reason{ReasonDIDDocumentInvalid, fmt.Sprintf("%s: %v", quote(did), err)}}
	}
	if doc.ID != did {
		return didOutcome{err: &Reason{ReasonDIDDocumentIDMismatch, fmt.Sprintf("the document of %s has the id %s", quote(did), quote(doc.ID))}}
	}
	return didOutcome{doc: doc}
}

// coverage checks Entry Release Coverage of manifest m for entry e.
func (v *verifier) coverage(ctx context.Context, e, m strictjson.Value, path string, artifact *[]byte, fetched *bool) []Reason {
	var out []Reason
	add := func(code, format string, args ...any) {
		out = append(out, Reason{code, fmt.Sprintf(format, args...)})
	}
	sub, _ := m.Get("subject")
	spath := path + ".subject"
	if sub.Kind != strictjson.Object {
		add(ReasonWithoutSubject, "%s is not an object", spath)
		return out
	}
	get := func(o strictjson.Value, name string) (string, bool) {
		s, ok, err := o.GetString(name)
		return s, ok && err == nil
	}
	sid, _ := get(sub, "identifier")
	eid, _ := get(e, "identifier")
	if sid != eid {
		add(ReasonSubjectIdentifier, "%s.identifier %s is not the entry's %s", spath, quote(sid), quote(eid))
	}
	st, _ := get(sub, "type")
	et, _ := get(e, "type")
	if st != et {
		add(ReasonSubjectType, "%s.type %s is not the entry's %s", spath, quote(st), quote(et))
	}
	sv, hasSV := get(sub, "version")
	ev, hasEV := get(e, "version")
	if hasSV != hasEV || sv != ev {
		add(ReasonVersionCoverage, "%s.version %s and the entry's version %s differ (both absent, or both equal)", spath, present(hasSV, sv), present(hasEV, ev))
	}
	sd, hasSD := get(sub, "digest")
	su, hasSU := get(sub, "url")
	if !hasSD && !hasSU {
		add(ReasonSubjectNoBinding, "%s has neither digest nor url", spath)
		return out
	}
	ed, hasED := get(e, "digest")
	if hasSD != hasED || sd != ed {
		add(ReasonDigestCoverage, "%s.digest %s and the entry's digest %s differ", spath, present(hasSD, sd), present(hasED, ed))
	}
	if hasSU {
		eu, _ := get(e, "url")
		if u, err := url.Parse(su); err != nil || u.Scheme != "https" || u.Host == "" {
			add(ReasonSubjectURLNotHTTPS, "%s.url %s is not an absolute https URL", spath, quote(su))
		} else if su != eu {
			add(ReasonURLCoverage, "%s.url %s is not the entry's url %s", spath, quote(su), quote(eu))
		}
	}
	if len(out) > 0 || !hasSD {
		return out
	}
	h, code, err := digestHash(sd)
	if err != nil {
		add(code, "%s.digest %s: %v", spath, quote(sd), err)
		return out
	}
	var body []byte
	if data, ok := e.Get("data"); ok {
		b, err := data.JCS()
		if err != nil {
			add(ReasonArtifactMismatch, "%s: the entry's data is not RFC 8785 input: %v", path, err)
			return out
		}
		body = b
	} else {
		if !*fetched {
			*fetched = true
			u, _ := get(e, "url")
			if v.opts.Fetcher == nil {
				add(ReasonArtifactUnavailable, "no fetcher for the artifact at %s", quote(u))
				return out
			}
			b, err := v.opts.Fetcher.FetchArtifact(ctx, u)
			if err != nil {
				add(ReasonArtifactUnavailable, "%s: %v", quote(u), err)
				return out
			}
			*artifact = b
		}
		if *artifact == nil {
			add(ReasonArtifactUnavailable, "the artifact could not be fetched")
			return out
		}
		body = *artifact
	}
	h.Write(body)
	want, _ := hex.DecodeString(sd[strings.IndexByte(sd, ':')+1:])
	if !bytes.Equal(h.Sum(nil), want) {
		add(ReasonArtifactMismatch, "the artifact's bytes do not have the digest %s", quote(sd))
	}
	return out
}

// digestHash returns the hash of an "alg:hex" digest: sha256, sha384 or
// sha512, lowercase hex of the right length.
func digestHash(d string) (hash.Hash, string, error) {
	alg, hx, ok := strings.Cut(d, ":")
	if !ok || hx == "" {
		return nil, ReasonDigestFormat, errors.New("want ALGORITHM:HEX")
	}
	var h hash.Hash
	switch alg {
	case "sha256":
		h = sha256.New()
	case "sha384":
		h = sha512.New384()
	case "sha512":
		h = sha512.New()
	case "md5", "sha1", "sha224", "sha-1", "sha512-224", "sha512/224":
		return nil, ReasonDigestWeak, fmt.Errorf("%s is weaker than SHA-256", quote(alg))
	default:
		return nil, ReasonDigestFormat, fmt.Errorf("unknown algorithm %s (sha256, sha384, sha512)", quote(alg))
	}
	if len(hx) != 2*h.Size() || strings.ToLower(hx) != hx {
		return nil, ReasonDigestFormat, fmt.Errorf("want %d lowercase hex digits", 2*h.Size())
	}
	if _, err := hex.DecodeString(hx); err != nil {
		return nil, ReasonDigestFormat, errors.New("not hex")
	}
	return h, "", nil
}

// parseTime reads an RFC 3339 instant with its offset.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("not an RFC 3339 date-time with an offset")
	}
	return t, nil
}

func present(ok bool, s string) string {
	if !ok {
		return "(absent)"
	}
	return quote(s)
}
