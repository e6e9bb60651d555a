// Package aicatalog reads, signs and verifies the documents of the Linux
// Foundation's AI Catalog (Agent-Card/ai-catalog, specification/ai-catalog.md)
// as far as the "Trusted" conformance level needs them: the catalog, its
// entries, their signed Trust Manifests and the catalog snapshot signature,
// under the did:web Signer Profile ("did-web-v1": ES256, a detached compact
// JWS over the RFC 8785 form of the signed object, kid = DID#fragment
// authorized by assertionMethod in the DID document), and the DID document
// of a root did:web DID.
//
// It does no I/O of its own: a verifier passes a Resolver (DID documents)
// and a Fetcher (artifacts at entry URLs); package webtrust fetches them
// over HTTPS. Every refusal has a stable reason code (see reasons.go) so
// that scripts can branch on it.
//
// The trust part of the specification is still marked "Proposed"; what it
// leaves open (per-manifest revocation, rollback, caching) cardsign answers
// in its own namespaced extensions, never by changing what a spec-following
// verifier checks.
package aicatalog
