package webtrust

import (
	"encoding/hex"
	"strconv"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/strictjson"
)

// ReleaseExtension is the manifest extension in which cardsign's catalog
// publisher states the registry release a manifest covers:
// {"agentId", "version", "canonicalSha256", …}. The manifest signature
// covers it.
const ReleaseExtension = "dev.cardsign.release"

// CatalogReport is the outcome of VerifyCatalog: aicatalog's report (with
// the trust policy's refusals added) and what the signatures state.
type CatalogReport struct {
	*aicatalog.Report
	// HostIdentifier is the catalog's host.identifier; IssuedAt and
	// ExpiresAt its signature's times (zero when absent).
	HostIdentifier      string
	IssuedAt, ExpiresAt time.Time
	// Releases has one element per entry (index as in Entries).
	Releases []Release
}

// Release is what the newest manifest by an entry's authenticated signer
// states (zero values when the entry has no such manifest).
type Release struct {
	IssuedAt, ExpiresAt time.Time
	// From the ReleaseExtension, when the manifest carries it: the
	// registry's agent id and version (HasVersion false: none) and the
	// SHA-256 of the card's canonical bytes (nil: none).
	AgentID         string
	Version         int64
	HasVersion      bool
	CanonicalSHA256 []byte
}

// readReleases reads the signature times of the catalog and of each
// entry's manifests by its authenticated signer.
func readReleases(data []byte, rep *aicatalog.Report, lim strictjson.Limits) (*CatalogReport, error) {
	if rep == nil {
		return nil, errNoReport
	}
	out := &CatalogReport{Report: rep, Releases: make([]Release, len(rep.Entries))}
	doc, err := strictjson.Parse(data, lim)
	if err != nil {
		return nil, err // aicatalog parsed it already: not reached
	}
	if h, ok := doc.Get("host"); ok {
		out.HostIdentifier, _, _ = h.GetString("identifier")
	}
	if sig, ok := doc.Get("signature"); ok {
		out.IssuedAt, out.ExpiresAt = sigTimes(sig)
	}
	entries, _ := doc.Get("entries")
	for i, er := range rep.Entries {
		if er.Signer == "" || er.Index < 0 || er.Index >= len(entries.Arr) {
			continue
		}
		idx := er.Index
		ms, _ := entries.Arr[idx].Get("trustManifests")
		for _, m := range ms.Arr {
			sig, _ := m.Get("signature")
			if s, _, _ := sig.GetString("signer"); s != er.Signer {
				continue
			}
			issued, expires := sigTimes(sig)
			if !out.Releases[i].IssuedAt.IsZero() && !issued.After(out.Releases[i].IssuedAt) {
				continue
			}
			out.Releases[i] = releaseOf(m, issued, expires)
		}
	}
	return out, nil
}

func sigTimes(sig strictjson.Value) (issued, expires time.Time) {
	if s, ok, _ := sig.GetString("issuedAt"); ok {
		issued, _ = time.Parse(time.RFC3339, s)
	}
	if s, ok, _ := sig.GetString("expiresAt"); ok {
		expires, _ = time.Parse(time.RFC3339, s)
	}
	return issued, expires
}

// releaseOf reads a manifest's ReleaseExtension, if any.
func releaseOf(m strictjson.Value, issued, expires time.Time) Release {
	r := Release{IssuedAt: issued, ExpiresAt: expires}
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
