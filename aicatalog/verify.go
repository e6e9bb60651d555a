package aicatalog

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	// Limits bound the catalog document (zero: MaxCatalogBytes and
	// MaxCatalogDepth); DIDLimits each DID document (zero fields: 64 KiB, depth
	// 8, 4096 values).
	Limits    strictjson.Limits
	DIDLimits strictjson.Limits
	// MaxDIDs caps the distinct DIDs one verification resolves (zero:
	// DefaultMaxDIDs), so that a hostile catalog of many manifests by
	// many signers cannot make a verifier fetch without end; the DIDs
	// beyond it fail with did-resolution-failed.
	MaxDIDs int
	// MaxArtifacts caps the artifacts one verification fetches (zero:
	// DefaultMaxArtifacts): every manifest that verifies has its entry's
	// url fetched, and a hostile catalog can list thousands of entries;
	// the fetches beyond it fail with artifact-unavailable. (An artifact's
	// bytes are kept only while its entry is checked.)
	MaxArtifacts int
	// Revoked, when set, is asked about every entry that is otherwise
	// accepted, with the entry and its artifact bytes (those its digest
	// covers; nil when they could not be had). revoked true refuses the
	// entry with CodeEntryRevoked and reason as the detail: a client's own
	// revocation source goes here. (webtrust applies cardsign's revocation
	// document to the report instead, so that refused entries are marked
	// revoked too.)
	Revoked func(entry strictjson.Value, artifact []byte) (reason string, revoked bool)
}

// MaxCatalogBytes and MaxCatalogDepth bound a catalog read when Options
// give no Limits: a catalog of a few thousand agents with their manifests.
const (
	MaxCatalogBytes = 4 << 20
	MaxCatalogDepth = 64
)

// DefaultMaxArtifacts is Options.MaxArtifacts when zero: an organisation's
// catalog of a thousand agents verifies whole.
const DefaultMaxArtifacts = 1024

// DefaultMaxDIDs is Options.MaxDIDs when zero: a catalog names its host
// and its publishers, and a few assessors; 64 leaves room.
const DefaultMaxDIDs = 64

// Reason is one refusal: a stable code (for scripts) and what it is about.
// It is also an error, so that helpers can return it.
type Reason struct {
	Code   string
	Detail string
}

// Error is the detail followed by the code.
func (r Reason) Error() string { return r.Detail + " (" + r.Code + ")" }

// Result is the outcome of one signature's verification.
type Result struct {
	Accepted bool
	// Signer is the authenticated signer (signature.signer) when the
	// signature verified; IssuedAt and ExpiresAt (zero: none) the times it
	// states.
	Signer              string
	IssuedAt, ExpiresAt time.Time
	Reasons             []Reason
	// Extensions is, for an accepted Trust Manifest with
	// subject.extensionDigests, each selected entry extension's outcome:
	// ExtensionMatched or ExtensionFailed. A failed one refuses nothing
	// else (the specification keeps it apart from the release binding);
	// only a matched extension is covered by the signature.
	Extensions map[string]string
}

// Outcomes of an extension digest (Result.Extensions), the checker's words.
const (
	ExtensionMatched = "matched"
	ExtensionFailed  = "failed"
)

// ManifestResult is the outcome for one Trust Manifest of an entry.
type ManifestResult struct {
	Index int
	Result
	// Publisher: the manifest was accepted and its signer is the entry's
	// urn:air publisher (the did:web Publisher Profile).
	Publisher bool
}

// EntryResult is the outcome for one catalog entry: accepted when a
// publisher-authorized manifest covering it verified. When it is refused,
// Reasons holds the entry's own reasons and every reason of every
// manifest (each Detail names the manifest's index and field).
type EntryResult struct {
	Index      int
	Identifier string
	// Result is the entry's: when accepted, Signer, IssuedAt and
	// ExpiresAt are those of Manifest, the index of its accepted
	// publisher manifest (-1: none).
	Result
	Manifest  int
	Manifests []ManifestResult
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

// verifier is one verification's state: the instant, and the DID
// documents and artifacts already fetched, so that each is fetched once.
type verifier struct {
	opts      Options
	now       time.Time
	dids      map[string]didOutcome
	artifacts map[string]artifactOutcome // this entry's, by url
	fetched   int                        // artifacts fetched in all
}

func newVerifier(opts Options) *verifier {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	return &verifier{opts: opts, now: now(), dids: map[string]didOutcome{}, artifacts: map[string]artifactOutcome{}}
}

// VerifyCatalog verifies a catalog document as the "Trusted" level
// requires: the root signature under the did:web Catalog Profile, then
// each entry's Trust Manifests under the Signer and Publisher Profiles
// with Entry Release Coverage and the artifact digest. The error is for a
// document that cannot be read at all (not strict JSON within
// opts.Limits, not RFC 8785 input, no entries array); every other refusal
// is a Reason in the report.
func VerifyCatalog(ctx context.Context, data []byte, opts Options) (*Report, error) {
	lim := opts.Limits
	if lim == (strictjson.Limits{}) {
		lim = strictjson.Limits{MaxBytes: MaxCatalogBytes, MaxDepth: MaxCatalogDepth}
	}
	root, err := strictjson.ParseAs(data, lim, "catalog", "an AI Catalog is a JSON object")
	if err != nil {
		return nil, fmt.Errorf("aicatalog: catalog: %w", err)
	}
	if _, err := root.JCS(); err != nil {
		return nil, fmt.Errorf("aicatalog: catalog is not RFC 8785 input: %w", err)
	}
	entries, ok := root.Get("entries")
	if !ok || entries.Kind != strictjson.Array {
		return nil, fmt.Errorf("aicatalog: catalog: member \"entries\" must be an array")
	}
	vf := newVerifier(opts)
	rep := &Report{Catalog: vf.root(ctx, root)}
	seen := map[string]int{}
	for i, e := range entries.Arr {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("aicatalog: catalog: %w", err)
		}
		rep.Entries = append(rep.Entries, vf.entry(ctx, i, e, seen))
	}
	return rep, nil
}

// VerifyCatalogSignature verifies the root signature of a parsed catalog
// under the did:web Catalog Profile: specVersion 1.x, typ TypCatalog, and
// host.identifier exactly the authenticated signer. Entries are not
// looked at beyond the payload the signature covers.
func VerifyCatalogSignature(ctx context.Context, catalog strictjson.Value, opts Options) Result {
	return newVerifier(opts).root(ctx, catalog)
}

func (vf *verifier) root(ctx context.Context, root strictjson.Value) Result {
	c := &collector{}
	if sv, ok, err := root.GetString("specVersion"); err != nil || !ok || !specVersionOK(sv) {
		c.add(CodeSpecVersionUnsupported, "specVersion", "%s: want \"1.MINOR\"", q(sv))
	}
	rule := sigRule{typ: TypCatalog, unsigned: CodeCatalogUnsigned}
	host, _ := root.Get("host")
	if id, ok, err := host.GetString("identifier"); err != nil || !ok || id == "" {
		c.add(CodeHostIdentifierMissing, "host.identifier", "the did:web Catalog Profile requires the operator's DID here")
	} else {
		rule.want, rule.wantCode, rule.wantField = id, CodeHostIdentifierSignerMismatch, "host.identifier"
	}
	signer, issued, expires := vf.verifySignature(ctx, root, rule, c)
	return Result{Accepted: len(c.reasons) == 0, Signer: signer, IssuedAt: issued, ExpiresAt: expires, Reasons: c.reasons}
}

// specVersionOK: "MAJOR.MINOR" with major 1; any minor is accepted.
func specVersionOK(v string) bool {
	major, minor, ok := strings.Cut(v, ".")
	if !ok || major != "1" {
		return false
	}
	n, err := strconv.ParseUint(minor, 10, 32)
	return err == nil && strconv.FormatUint(n, 10) == minor
}

// VerifyManifest verifies one Trust Manifest for entry: the did:web Signer
// Profile (contributor == signer) and, once the signature is accepted,
// Entry Release Coverage including the artifact digest. It does not apply
// the Publisher Profile (any authenticated contributor may endorse).
func VerifyManifest(ctx context.Context, entry, manifest strictjson.Value, opts Options) Result {
	return newVerifier(opts).manifest(ctx, entry, manifest, "trustManifest")
}

func (vf *verifier) manifest(ctx context.Context, entry, m strictjson.Value, path string) Result {
	c := &collector{path: path}
	if m.Kind != strictjson.Object {
		c.add(CodeEntryInvalid, "", "a Trust Manifest is a JSON object, not %s", m.Kind)
		return Result{Reasons: c.reasons}
	}
	contributor, ok, err := m.GetString("contributor")
	if err != nil || !ok {
		c.add(CodeContributorMissing, "contributor", "missing or not a string")
	}
	rule := sigRule{
		typ: TypManifest, path: path, unsigned: CodeUnsigned, needSubject: true,
		want: contributor, wantCode: CodeContributorSignerMismatch, wantField: "contributor",
	}
	signer, issued, expires := vf.verifySignature(ctx, m, rule, c)
	if len(c.reasons) == 0 {
		vf.coverage(ctx, entry, m, c)
	}
	res := Result{Accepted: len(c.reasons) == 0, Signer: signer, IssuedAt: issued, ExpiresAt: expires, Reasons: c.reasons}
	if res.Accepted {
		res.Extensions = extensionDigests(entry, m)
	}
	return res
}

// entry checks one entry's structure, verifies its manifests and applies
// the Publisher Profile; seen maps identifier and version to the first
// entry that had them.
func (vf *verifier) entry(ctx context.Context, i int, e strictjson.Value, seen map[string]int) EntryResult {
	path := fmt.Sprintf("entries[%d]", i)
	c := &collector{path: path}
	res := EntryResult{Index: i, Manifest: -1}
	// One entry's artifact is kept while its manifests are checked, not
	// every entry's until the end.
	clear(vf.artifacts)
	if !vf.entryStructure(e, c, seen, i) {
		res.Identifier, _, _ = optString(e, "identifier")
		res.Reasons = c.reasons
		return res
	}
	res.Identifier, _, _ = optString(e, "identifier")
	publisherDID := ""
	if pub, ok := PublisherOf(res.Identifier); !ok {
		c.add(CodeIdentifierNotURNAIR, "identifier", "%s is not urn:air:PUBLISHER:NAMESPACE:NAME", q(res.Identifier))
	} else if err := CheckDomain(pub); err != nil {
		c.add(CodePublisherNotRootDomain, "identifier", "publisher %s: %v", q(pub), err)
	} else {
		publisherDID = DID(pub)
	}
	tms, _ := e.Get("trustManifests")
	if len(tms.Arr) == 0 {
		c.add(CodeNoPublisherManifest, "trustManifests", "the entry has no Trust Manifest")
	}
	var manifestReasons []Reason
	var others []string
	publisher := false
	for j, m := range tms.Arr {
		r := vf.manifest(ctx, e, m, fmt.Sprintf("%s.trustManifests[%d]", path, j))
		mr := ManifestResult{Index: j, Result: r, Publisher: r.Accepted && publisherDID != "" && r.Signer == publisherDID}
		res.Manifests = append(res.Manifests, mr)
		manifestReasons = append(manifestReasons, r.Reasons...)
		// Among several acceptable publisher manifests the most recent
		// authenticated issuedAt wins (the spec's SHOULD), never the first.
		if mr.Publisher && (!publisher || r.IssuedAt.After(res.IssuedAt)) {
			res.Manifest, res.IssuedAt, res.ExpiresAt = j, r.IssuedAt, r.ExpiresAt
		}
		publisher = publisher || mr.Publisher
		if r.Signer != "" && r.Signer != publisherDID {
			others = append(others, q(r.Signer))
		}
	}
	if !publisher && publisherDID != "" && len(others) > 0 {
		c.add(CodePublisherNotSigner, "trustManifests", "signed by %s, not the publisher %s", strings.Join(others, ", "), q(publisherDID))
	}
	if publisher && len(c.reasons) == 0 {
		if vf.opts.Revoked != nil {
			content, _ := vf.artifact(ctx, e)
			if why, revoked := vf.opts.Revoked(e, content); revoked {
				c.add(CodeEntryRevoked, "identifier", "%s is revoked: %s", q(res.Identifier), q(why))
			}
		}
		res.Signer = publisherDID
	}
	res.Accepted = publisher && len(c.reasons) == 0
	res.Reasons = c.reasons
	if !res.Accepted {
		res.Manifest, res.IssuedAt, res.ExpiresAt = -1, time.Time{}, time.Time{}
		res.Reasons = append(res.Reasons, manifestReasons...)
	}
	return res
}

// entryStructure checks what Level 1 requires of an entry and that its
// identifier (and version) is unique.
func (vf *verifier) entryStructure(e strictjson.Value, c *collector, seen map[string]int, i int) bool {
	if e.Kind != strictjson.Object {
		c.add(CodeEntryInvalid, "", "an entry is a JSON object, not %s", e.Kind)
		return false
	}
	ok := true
	for _, key := range []string{"identifier", "type"} {
		if s, _, isString := optString(e, key); !isString || s == "" {
			c.add(CodeEntryInvalid, key, "must be a non-empty string")
			ok = false
		}
	}
	_, hasURL, urlIsString := optString(e, "url")
	if hasURL == e.Has("data") {
		c.add(CodeEntryInvalid, "url", "an entry has exactly one of url and data")
		ok = false
	} else if hasURL && !urlIsString {
		c.add(CodeEntryInvalid, "url", "must be a string")
		ok = false
	}
	if tm, present := e.Get("trustManifests"); present && tm.Kind != strictjson.Array {
		c.add(CodeEntryInvalid, "trustManifests", "is %s, not an array", tm.Kind)
		ok = false
	}
	if !ok {
		return false
	}
	id, _, _ := optString(e, "identifier")
	key := id
	if v, present, _ := optString(e, "version"); present {
		key += "\x00" + v
	}
	if first, dup := seen[key]; dup {
		c.add(CodeIdentifierDuplicate, "identifier", "%s (and version) already used by entries[%d]", q(id), first)
		return false
	}
	seen[key] = i
	return true
}
