package webtrust

import (
	"encoding/hex"
	"strconv"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/strictjson"
)

// ReleaseExtension is the manifest extension in which cardsign's catalog
// publisher states the registry release a manifest covers:
// {"agentId", "version", "canonicalSha256", …}. The manifest signature
// covers it.
const ReleaseExtension = "dev.cardsign.release"

// CatalogReport is the outcome of VerifyCatalog: aicatalog's report (with
// the trust policy's refusals added; each Result carries the times its
// signature states) and the releases the accepted manifests state.
type CatalogReport struct {
	*aicatalog.Report
	// HostIdentifier is the catalog's host.identifier.
	HostIdentifier string
	// Releases has one element per entry (index as in Entries).
	Releases []Release
}

// Release is what the ReleaseExtension of the manifest accepted for an
// entry states (zero values when there is none; for a refused entry, its
// publisher's manifest's, not verified: use it only to refuse).
type Release struct {
	// AgentID and Version (HasVersion false: none) are the registry's;
	// CanonicalSHA256 (nil: none) the SHA-256 of the card's canonical
	// bytes, as the revocation document lists revoked cards.
	AgentID         string
	Version         int64
	HasVersion      bool
	CanonicalSHA256 []byte
}

// readReleases reads the catalog's host.identifier and the release each
// entry's accepted manifest states (for a refused entry: its publisher's
// manifest, unverified; see below).
func readReleases(data []byte, rep *aicatalog.Report, lim strictjson.Limits) (*CatalogReport, error) {
	if rep == nil {
		return nil, errNoReport
	}
	lim = catalogLimits(lim)
	out := &CatalogReport{Report: rep, Releases: make([]Release, len(rep.Entries))}
	doc, err := strictjson.Parse(data, lim)
	if err != nil {
		return nil, err // aicatalog read it already: not reached
	}
	if h, ok := doc.Get("host"); ok {
		out.HostIdentifier, _, _ = h.GetString("identifier")
	}
	entries, _ := doc.Get("entries")
	for i, er := range rep.Entries {
		if er.Index < 0 || er.Index >= len(entries.Arr) {
			continue
		}
		ms, _ := entries.Arr[er.Index].Get("trustManifests")
		if er.Accepted && er.Manifest >= 0 && er.Manifest < len(ms.Arr) {
			out.Releases[i] = releaseOf(ms.Arr[er.Manifest])
			continue
		}
		// A refused entry's release is read from its publisher's manifest
		// all the same, so that the revocation document refuses it too: a
		// copy of a revoked card's entry whose artifact is gone (410) says
		// so. Only refusals come of it; the state keeps accepted ones only.
		if p, ok := aicatalog.PublisherOf(er.Identifier); ok {
			for _, m := range ms.Arr {
				sig, _ := m.Get("signature")
				if s, _, _ := sig.GetString("signer"); s == aicatalog.DID(p) {
					out.Releases[i] = releaseOf(m)
					break
				}
			}
		}
	}
	return out, nil
}

// releaseOf reads a manifest's ReleaseExtension, if any.
func releaseOf(m strictjson.Value) Release {
	var r Release
	ext, _ := m.Get("extensions")
	rel, ok := ext.Get(ReleaseExtension)
	if !ok {
		return r
	}
	r.AgentID, _, _ = rel.GetString("agentId")
	if v, ok := rel.Get("version"); ok && (v.Kind == strictjson.Number || v.Kind == strictjson.String) {
		if n, err := strconv.ParseInt(v.Str, 10, 64); err == nil {
			r.Version, r.HasVersion = n, true
		}
	}
	if s, ok, _ := rel.GetString("canonicalSha256"); ok {
		if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
			r.CanonicalSHA256 = b
		}
	}
	return r
}

// catalogLimits is lim, or aicatalog's limits of a catalog when lim is zero.
func catalogLimits(lim strictjson.Limits) strictjson.Limits {
	if lim == (strictjson.Limits{}) {
		return strictjson.Limits{MaxBytes: aicatalog.MaxCatalogBytes, MaxDepth: aicatalog.MaxCatalogDepth}
	}
	return lim
}
