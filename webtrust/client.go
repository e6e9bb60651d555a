package webtrust

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/jwks/jwksfetch"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
)

// AgentCardPath is where an A2A host serves its agent card (A2A §8.2).
const AgentCardPath = "/.well-known/agent-card.json"

// Reason codes webtrust adds to aicatalog's.
const (
	// ReasonNoTrustRule: the trust policy has no rule for the host.
	ReasonNoTrustRule = "no-trust-rule"
	// ReasonTrustUnavailable: the rule's keys could not be fetched or read.
	ReasonTrustUnavailable = "trust-unavailable"
	// ReasonRevocationsInvalid: the rule's revocation document could not
	// be fetched, does not verify, has expired or is older than
	// max_revocations_age.
	ReasonRevocationsInvalid = "revocations-invalid"
	// ReasonEntryRevoked: the revocation document lists the card an
	// entry's manifest covers (aicatalog's code).
	ReasonEntryRevoked = aicatalog.CodeEntryRevoked
	// ReasonCatalogSigner: the catalog is signed by another DID than the
	// rule's catalog_signer.
	ReasonCatalogSigner = "catalog-signer-not-trusted"
	// ReasonCardRevoked: the revocation document lists the card itself.
	ReasonCardRevoked = "card-revoked"
	// ReasonKeyRevoked: every signature of the card is by a revoked key;
	// for a catalog, its signature or an entry's accepted manifest is.
	ReasonKeyRevoked = "key-revoked"
	// ReasonUnsigned: the card carries no signature (aicatalog's code for
	// an unsigned manifest).
	ReasonUnsigned = aicatalog.CodeUnsigned
	// ReasonLogProofMissing: the rule requires a log proof and no
	// signature with a proof verified.
	ReasonLogProofMissing = "log-proof-missing"
	// ReasonSignatureInvalid: no signature verifies with a trusted key
	// (aicatalog's code for a signature that does not verify).
	ReasonSignatureInvalid = aicatalog.CodeSignatureInvalid
	// ReasonRollback: a release older than one already accepted (State).
	ReasonRollback = "rollback"
)

// Options configure a Client. The zero value fetches with the system's
// roots and the default caps, and trusts no host for cards.
type Options struct {
	// Policy says which keys to trust per host (VerifyCard needs one;
	// VerifyCatalog uses it for revocations and catalog_signer).
	Policy *Policy
	// RootCAs replaces the system roots; CAFile adds the PEM
	// certificates of a file to them.
	RootCAs *x509.CertPool
	CAFile  string
	// Resolve are HOST:PORT:ADDR:TPORT entries (ParseResolve): the
	// operator's own mapping of a host to an address, exempt from the
	// private-address rule.
	Resolve []string
	// Timeout bounds each fetch (default DefaultTimeout); MaxRedirects
	// the redirects followed (0: DefaultMaxRedirects; negative: none).
	Timeout      time.Duration
	MaxRedirects int
	MaxSizes     MaxSizes
	// Cache keeps fetched documents (nil: a cache of the default bounds,
	// on Now).
	Cache *Cache
	// Now is the verification instant (default time.Now), ClockSkew the
	// leeway on signature times.
	Now       func() time.Time
	ClockSkew time.Duration
	// Limits bound each JSON document parsed (zero: strictjson's
	// defaults).
	Limits strictjson.Limits
}

// Client verifies catalogs and agent cards that start from a URL. It is
// safe for concurrent use.
type Client struct {
	opts  Options
	fetch *fetcher
}

// New makes a Client.
func New(opts Options) (*Client, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Cache == nil {
		opts.Cache = NewCache(0, 0, opts.Now)
	}
	f, err := newFetcher(fetchConfig{
		caFile: opts.CAFile, roots: opts.RootCAs, resolve: opts.Resolve, timeout: opts.Timeout,
		maxRedirects: opts.MaxRedirects, sizes: opts.MaxSizes, cache: opts.Cache,
	})
	if err != nil {
		return nil, err
	}
	return &Client{opts: opts, fetch: f}, nil
}

// HTTPClient is the client's safe HTTP client (https only, public
// addresses or Resolve entries, redirect cap, cache), for documents read
// through other packages (jwksfetch).
func (c *Client) HTTPClient() *http.Client { return c.fetch.client }

// ResolveDID fetches the DID document of a root did:web DID from
// https://DOMAIN/.well-known/did.json (aicatalog.Resolver).
func (c *Client) ResolveDID(ctx context.Context, did string) ([]byte, error) {
	domain, err := aicatalog.DomainOf(did)
	if err != nil {
		return nil, err
	}
	u := "https://" + domain + aicatalog.DIDPath
	body, mt, err := c.fetch.get(ctx, u, KindDID, "application/did+json, application/did+ld+json;q=0.9, application/json;q=0.8")
	if err != nil {
		return nil, err
	}
	// What a did:web document may be served as; none of them is processed
	// as JSON-LD (no context is ever fetched).
	switch mt {
	case "application/did+json", "application/did+ld+json", "application/json":
		return body, nil
	}
	return nil, fmt.Errorf("GET %s: served as %s, not a DID document media type (application/did+json, application/did+ld+json, application/json)", u, strictjson.QuoteForMessage(mt))
}

// FetchArtifact fetches the exact bytes an entry's url serves
// (aicatalog.Fetcher).
func (c *Client) FetchArtifact(ctx context.Context, u string) ([]byte, error) {
	body, _, err := c.fetch.get(ctx, u, KindArtifact, aicatalog.A2ACardType+", application/json;q=0.9, */*;q=0.5")
	return body, err
}

// anchor is what a rule trusts, read: its keys, revocations and log keys.
type anchor struct {
	keys        jwks.Set
	revocations *jwks.Revocations
	logKeys     []transparency.Verifier
	witnesses   transparency.WitnessPolicy
}

// anchorOf reads the rule's keys, revocation document and log keys. The
// reason code says which part failed.
func (c *Client) anchorOf(ctx context.Context, r *Rule) (*anchor, *aicatalog.Reason) {
	a := &anchor{}
	var err error
	fail := func(code string, err error) (*anchor, *aicatalog.Reason) {
		return nil, &aicatalog.Reason{Code: code, Detail: err.Error()}
	}
	if r.DID != "" {
		data, err := c.ResolveDID(ctx, r.DID)
		if err != nil {
			return fail(ReasonTrustUnavailable, fmt.Errorf("did %s: %w", r.DID, err))
		}
		if a.keys, err = didKeys(r.DID, data, c.opts.Limits); err != nil {
			return fail(ReasonTrustUnavailable, fmt.Errorf("did %s: %w", r.DID, err))
		}
	} else {
		fctx, cancel := context.WithTimeout(ctx, c.fetch.timeout)
		a.keys, err = jwksfetch.Load(fctx, r.JWKS, c.fetch.client)
		cancel()
		if err != nil {
			return fail(ReasonTrustUnavailable, err)
		}
	}
	if r.Revocations != "" {
		fctx, cancel := context.WithTimeout(ctx, c.fetch.timeout)
		doc, err := ReadRevocations(fctx, r.Revocations, c.fetch.client, a.keys, c.opts.Now(), r.MaxRevocationsAge)
		cancel()
		if err != nil {
			return fail(ReasonRevocationsInvalid, err)
		}
		a.revocations = &doc
	}
	if r.LogKey != "" {
		fctx, cancel := context.WithTimeout(ctx, c.fetch.timeout)
		a.logKeys, err = LoadLogKeys(fctx, r.LogKey, c.fetch.client)
		cancel()
		if err != nil {
			return fail(ReasonTrustUnavailable, fmt.Errorf("log_key: %w", err))
		}
	}
	if r.Witnesses != "" {
		fctx, cancel := context.WithTimeout(ctx, c.fetch.timeout)
		a.witnesses, err = LoadWitnessPolicy(fctx, []string{r.Witnesses}, r.WitnessQuorum, c.fetch.client)
		cancel()
		if err != nil {
			return fail(ReasonTrustUnavailable, fmt.Errorf("witnesses: %w", err))
		}
	}
	return a, nil
}

// CardResult is the outcome of VerifyCard.
type CardResult struct {
	// URL is where the card was fetched; Rule the policy rule applied
	// (nil: none matched).
	URL  string
	Rule *Rule
	// Card is the card's bytes as served.
	Card []byte
	// Verification is signer.Verify's outcome (nil when verification did
	// not get that far).
	Verification *signer.Verification
	// Reasons are the refusals; none means the card is accepted.
	Reasons []aicatalog.Reason
}

// Accepted reports whether the card verified under its host's rule.
func (r *CardResult) Accepted() bool {
	return len(r.Reasons) == 0 && r.Verification != nil && r.Verification.Valid(false)
}

// VerifyCard fetches the agent card of hostURL (https://HOST[:PORT], at
// AgentCardPath) and verifies it with the keys the trust policy's rule for
// HOST names, never a key from the card. The error is for a card that
// could not be fetched or read; a refusal is a Reason.
func (c *Client) VerifyCard(ctx context.Context, hostURL string) (*CardResult, error) {
	u, err := url.Parse(hostURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("host URL %s: want https://HOST or https://HOST:PORT", strictjson.QuoteForMessage(hostURL))
	}
	res := &CardResult{URL: "https://" + u.Host + AgentCardPath}
	res.Rule = c.opts.Policy.Match(u.Hostname())
	if res.Rule == nil {
		res.Reasons = append(res.Reasons, aicatalog.Reason{Code: ReasonNoTrustRule,
			Detail: fmt.Sprintf("the trust policy has no rule for host %s", strictjson.QuoteForMessage(u.Hostname()))})
		return res, nil
	}
	res.Card, _, err = c.fetch.get(ctx, res.URL, KindArtifact, "application/json")
	if err != nil {
		return nil, err
	}
	a, why := c.anchorOf(ctx, res.Rule)
	if why != nil {
		res.Reasons = append(res.Reasons, *why)
		return res, nil
	}
	opts := signer.VerifyOptions{
		Trusted:    a.keys,
		Limits:     c.opts.Limits,
		Now:        c.opts.Now,
		ClockSkew:  c.opts.ClockSkew,
		LogKeys:    a.logKeys,
		RequireLog: res.Rule.RequireLogProof,
		Witnesses:  a.witnesses,
	}
	if a.revocations != nil {
		opts.Revoked = jwks.RevokedKeyLookup(a.revocations.Revoked)
		opts.RevokedCard = jwks.CardLookup(a.revocations.Cards)
	}
	v, err := signer.Verify(ctx, res.Card, opts)
	if err != nil {
		return nil, fmt.Errorf("card %s: %w", res.URL, err)
	}
	res.Verification = v
	res.Reasons = cardReasons(v, res.Rule.RequireLogProof)
	return res, nil
}

// cardReasons names why a card is refused, if it is.
func cardReasons(v *signer.Verification, requireLog bool) []aicatalog.Reason {
	if v.CardRevoked != "" {
		return []aicatalog.Reason{{Code: ReasonCardRevoked, Detail: v.CardRevoked}}
	}
	if len(v.Checks) == 0 {
		return []aicatalog.Reason{{Code: ReasonUnsigned, Detail: "the card carries no signature"}}
	}
	if v.Valid(false) {
		return nil
	}
	var why []string
	revoked, unproven := true, false
	for _, ch := range v.Checks {
		if ch.Revoked {
			why = append(why, fmt.Sprintf("signature[%d]: %s", ch.Index, ch.RevokedReason()))
			continue
		}
		revoked = false
		unproven = unproven || (requireLog && !ch.HasProof)
		why = append(why, fmt.Sprintf("signature[%d]: %s", ch.Index, ch.Reason))
	}
	code := ReasonSignatureInvalid
	switch {
	case revoked:
		code = ReasonKeyRevoked
	case unproven:
		code = ReasonLogProofMissing
	}
	return []aicatalog.Reason{{Code: code, Detail: strings.Join(why, "; ")}}
}

// VerifyCatalog fetches the catalog at u (with Accept
// application/ai-catalog+json) and verifies it (VerifyCatalogDocument).
func (c *Client) VerifyCatalog(ctx context.Context, u string) (*CatalogReport, error) {
	parsed, err := url.Parse(u)
	if err != nil {
		return nil, fmt.Errorf("catalog URL %s: %w", strictjson.QuoteForMessage(u), err)
	}
	data, _, err := c.fetch.get(ctx, u, KindCatalog, aicatalog.MediaType+", application/json;q=0.9")
	if err != nil {
		return nil, err
	}
	return c.VerifyCatalogDocument(ctx, data, parsed.Hostname())
}

// VerifyCatalogDocument verifies a catalog's bytes as the "Trusted" level
// requires (aicatalog.VerifyCatalog: every manifest and the catalog
// signature, DID documents and artifacts fetched safely), then applies
// the trust policy's rule for host (the catalog's host; empty: the
// domain of its host.identifier): catalog_signer, and the revocation
// document, whose revoked cards refuse the entries whose manifests cover
// them (entry-revoked).
func (c *Client) VerifyCatalogDocument(ctx context.Context, data []byte, host string) (*CatalogReport, error) {
	rep, err := aicatalog.VerifyCatalog(ctx, data, aicatalog.Options{
		Now: c.opts.Now, ClockSkew: c.opts.ClockSkew, Resolver: c, Fetcher: c, Limits: c.opts.Limits,
	})
	if err != nil {
		return nil, err
	}
	out, err := readReleases(data, rep, c.opts.Limits)
	if err != nil {
		return nil, err
	}
	if c.opts.Policy == nil {
		return out, nil
	}
	if host == "" {
		host, _ = aicatalog.DomainOf(out.HostIdentifier)
	}
	rule := c.opts.Policy.Match(host)
	if rule == nil {
		refuse(&rep.Catalog, ReasonNoTrustRule, fmt.Sprintf("the trust policy has no rule for host %s", strictjson.QuoteForMessage(host)))
		return out, nil
	}
	if rule.CatalogSigner != "" && rep.Catalog.Signer != rule.CatalogSigner {
		refuse(&rep.Catalog, ReasonCatalogSigner, fmt.Sprintf("signed by %s, the trust policy wants %s",
			strictjson.QuoteForMessage(orNone(rep.Catalog.Signer)), rule.CatalogSigner))
	}
	if rule.Revocations == "" {
		return out, nil
	}
	a, why := c.anchorOf(ctx, rule)
	if why != nil {
		refuse(&rep.Catalog, why.Code, why.Detail)
		return out, nil
	}
	// A signature by a key the revocation document lists is refused as a
	// card's is: aicatalog verified it with the DID document's key, which
	// knows nothing of revocations. cardsign's kid is the DID fragment.
	revokedKey := jwks.RevokedKeyLookup(a.revocations.Revoked)
	doc, err := strictjson.Parse(data, catalogLimits(c.opts.Limits))
	if err != nil {
		return nil, err // aicatalog read it already: not reached
	}
	refuseRevokedKey := func(r *aicatalog.Result, sigOwner strictjson.Value, what string) {
		kid, ok := signatureKid(sigOwner)
		if !ok {
			return
		}
		if why, ok := revokedKey(kid); ok {
			refuse(r, ReasonKeyRevoked, fmt.Sprintf("%s signed with key %s, revoked: %s", what, strictjson.QuoteForMessage(kid), why))
		}
	}
	if rep.Catalog.Accepted {
		refuseRevokedKey(&rep.Catalog, doc, "the catalog is")
	}
	entries, _ := doc.Get("entries")
	for i, er := range rep.Entries {
		if !er.Accepted || er.Index < 0 || er.Index >= len(entries.Arr) {
			continue
		}
		ms, _ := entries.Arr[er.Index].Get("trustManifests")
		if er.Manifest >= 0 && er.Manifest < len(ms.Arr) {
			refuseRevokedKey(&rep.Entries[i].Result, ms.Arr[er.Manifest], fmt.Sprintf("its trust manifest [%d] is", er.Manifest))
		}
	}
	revoked := jwks.CardLookup(a.revocations.Cards)
	for i := range rep.Entries {
		rel := out.Releases[i]
		if rel.CanonicalSHA256 == nil {
			continue
		}
		if why, ok := revoked([32]byte(rel.CanonicalSHA256)); ok {
			refuse(&rep.Entries[i].Result, ReasonEntryRevoked, why)
		}
	}
	return out, nil
}

// signatureKid reads the key ID of v's signature.jws (its protected
// header's kid) as a revocation document names keys: the fragment after
// '#' of a DID URL kid, else the kid itself. ok is false when there is
// none (aicatalog refused such a signature already).
func signatureKid(v strictjson.Value) (string, bool) {
	sig, _ := v.Get("signature")
	jws, ok, _ := sig.GetString("jws")
	if !ok {
		return "", false
	}
	head, _, _ := strings.Cut(jws, ".")
	hb, err := jose.DecodeBase64URL(head)
	if err != nil {
		return "", false
	}
	h, err := strictjson.Parse(hb, strictjson.Limits{MaxBytes: 8 << 10, MaxDepth: 4})
	if err != nil {
		return "", false
	}
	kid, ok, _ := h.GetString("kid")
	if !ok || kid == "" {
		return "", false
	}
	if _, frag, found := strings.Cut(kid, "#"); found {
		kid = frag
	}
	return kid, true
}

func refuse(r *aicatalog.Result, code, detail string) {
	r.Accepted = false
	r.Reasons = append(r.Reasons, aicatalog.Reason{Code: code, Detail: detail})
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// errNoReport guards against a verifier that returns neither.
var errNoReport = errors.New("webtrust: catalog verification returned no report")
