package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
)

// listPage is how many agents a build reads at a time.
const listPage = 200

// CardURL is where consumers fetch agent id's card: baseURL (no trailing
// slash needed) + registry.AgentCardPath.
func CardURL(baseURL, id string) string {
	return strings.TrimRight(baseURL, "/") + strings.Replace(registry.AgentCardPath, "{id}", id, 1)
}

// build makes the catalog's entries from the registry's public agents,
// newest versions, in agent id order: a private agent never appears, nor a
// revoked card, nor one whose only signatures are by revoked keys (it
// comes back once the registry signed it again). Each entry's manifest is
// the stored one when it is the same manifest, signed by kid, with more
// than half its lifetime left at now.
func (p *Publisher) build(ctx context.Context, prev *stored, kid string, now time.Time) (*built, error) {
	revoked, err := p.cfg.Registry.RevokedCards(ctx)
	if err != nil {
		return nil, p.cfg.Unavailable("revoked cards", err)
	}
	b := &built{}
	allReused := true
	for after := ""; ; {
		page, err := p.cfg.Store.ListAgents(ctx, after, listPage)
		if err != nil {
			return nil, p.cfg.Unavailable("registry", err)
		}
		for _, c := range page {
			after = c.ID
			if c.Visibility != store.Public || registry.CardRevoked(revoked, c) {
				continue
			}
			served, err := p.cfg.Registry.Served(ctx, c)
			if errors.Is(err, registry.ErrResigning) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("catalog: agent %s: %w", c.ID, err)
			}
			e, err := p.plan(ctx, prev, served, kid, now)
			if err != nil {
				return nil, fmt.Errorf("catalog: agent %s version %d: %w", c.ID, c.Version, err)
			}
			allReused = allReused && e.reused
			b.entries = append(b.entries, e)
		}
		if len(page) < listPage {
			break
		}
	}
	if allReused {
		unsigned, err := p.catalogValue(b).Value().JCS()
		if err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
		b.content = sum(unsigned)
	}
	return b, nil
}

// plan makes the entry and the manifest of card c (as served).
func (p *Publisher) plan(ctx context.Context, prev *stored, c store.AgentCard, kid string, now time.Time) (plannedEntry, error) {
	s := p.cfg.Settings
	did := s.DID()
	v, err := strictjson.Parse(c.Signed, p.cfg.Limits)
	if err != nil {
		return plannedEntry{}, fmt.Errorf("the served card: %w", err)
	}
	name, _ := v.Get("name")
	version, _ := v.Get("version")
	id := aicatalog.Identifier(s.Domain, s.Namespace, c.ID)
	entry := aicatalog.Entry{
		Identifier: id, Type: aicatalog.A2ACardType,
		UpdatedAt: c.StoredAt.UTC().Format(aicatalog.TimeFormat),
		Publisher: &aicatalog.Publisher{Identifier: did, DisplayName: s.PublisherName, IdentityType: "did"},
	}
	subject := aicatalog.Subject{Identifier: id, Type: aicatalog.A2ACardType}
	if s.Inline {
		// The digest of inline data is over its RFC 8785 form, not over any
		// bytes of the catalog.
		jcs, err := v.JCS()
		if err != nil {
			return plannedEntry{}, fmt.Errorf("the served card is not RFC 8785 input: %w", err)
		}
		entry.Data = &v
		entry.Digest = "sha256:" + sum(jcs)
	} else {
		// Exactly the bytes the card URL serves.
		h := sha256.Sum256(c.Signed)
		entry.URL, entry.Digest = CardURL(s.BaseURL, c.ID), "sha256:"+hex.EncodeToString(h[:])
		subject.URL = entry.URL
	}
	subject.Digest = entry.Digest
	// CardKIDs: the card URL serves c without a key's signatures once it is
	// revoked, so the digest listed would no longer match (servable).
	st := entryState{Agent: c.ID, Version: c.Version, CanonicalSHA256: hex.EncodeToString(c.CanonicalSHA256), CardKIDs: slices.Clone(c.KIDs)}
	st.Source, st.Commit, st.Workflow, st.Issuer, err = p.pipeline(ctx, prev, c)
	if err != nil {
		return plannedEntry{}, err
	}
	rel := Release{AgentID: c.ID, Version: c.Version, CanonicalSHA256: st.CanonicalSHA256,
		Source: st.Source, Commit: st.Commit, Workflow: st.Workflow, Issuer: st.Issuer}
	m := aicatalog.Manifest{Contributor: did, Subject: subject,
		Extensions: []strictjson.Member{{Key: ReleaseExtension, Val: rel.Value()}}}
	if rel.Source != "" {
		m.Provenance = []aicatalog.Provenance{{Relation: aicatalog.RelationPublishedFrom, SourceID: rel.Source}}
	}
	unsigned, err := m.Value().JCS()
	if err != nil {
		return plannedEntry{}, fmt.Errorf("manifest: %w", err)
	}
	st.Unsigned = sum(unsigned)
	e := plannedEntry{entry: entry, manifest: m, state: st,
		card: cardInfo{name: name.Str, version: version.Str, hosts: transparency.CardHosts(card.InterfaceHosts(v))}}
	if old, ok := prev.entryOf(c.ID); ok && prev.state.KID == kid && old.Unsigned == st.Unsigned && old.ExpiresAt.Sub(now) > p.cfg.Lifetime/2 {
		if signed, err := strictjson.Parse(old.Manifest, p.cfg.Limits); err == nil {
			e.signed, e.reused = signed, true
			e.state.Manifest, e.state.IssuedAt, e.state.ExpiresAt = old.Manifest, old.IssuedAt, old.ExpiresAt
		}
	}
	return e, nil
}

// pipeline is what the audit record of the registration that made c's
// content said of its pipeline (Pipeline): the registration is the newest
// kept version with c's content not signed by the registry itself (its
// re-signatures carry the content unchanged). When the registry kept no
// such version, the stored catalog's entry of the same content says it.
func (p *Publisher) pipeline(ctx context.Context, prev *stored, c store.AgentCard) (source, commit, workflow, issuer string, err error) {
	canonical := hex.EncodeToString(c.CanonicalSHA256)
	old, known := prev.entryOf(c.ID)
	known = known && old.CanonicalSHA256 == canonical
	if known && (old.Version == c.Version || c.Caller == registry.ResignCaller) {
		return old.Source, old.Commit, old.Workflow, old.Issuer, nil
	}
	hist, err := p.cfg.Store.AgentHistory(ctx, c.ID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", "", "", "", p.cfg.Unavailable("registry", err)
	}
	for _, h := range hist { // newest first
		if h.Version > c.Version {
			continue
		}
		if !bytes.Equal(h.CanonicalSHA256, c.CanonicalSHA256) {
			break
		}
		if h.Caller == registry.ResignCaller {
			continue
		}
		recs, err := p.cfg.Store.ListAudit(ctx, h.AuditSeq-1, 1)
		if err != nil {
			return "", "", "", "", p.cfg.Unavailable("audit log", err)
		}
		if len(recs) == 1 && recs[0].Seq == h.AuditSeq {
			prov, err := audit.DecodeProvenance(recs[0].Provenance)
			if err != nil {
				p.cfg.Log.Warn("catalog: a registration's provenance is unreadable; its manifest names no source", "agent", c.ID, "version", h.Version, "err", err)
				return "", "", "", "", nil
			}
			source, commit, workflow, issuer = Pipeline(prov)
			return source, commit, workflow, issuer, nil
		}
		break
	}
	if known {
		return old.Source, old.Commit, old.Workflow, old.Issuer, nil
	}
	return "", "", "", "", nil
}
