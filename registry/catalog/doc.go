// Package catalog publishes the organisation's AI Catalog from the
// registry's public agents: one entry per agent with a Trust Manifest
// signed under did:web by the authority's keys (audited and logged like
// every signature), the catalog snapshot signature, both made once per
// change by the duties lease holder and stored, so that every replica
// serves the same bytes.
package catalog
