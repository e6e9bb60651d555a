// Package webtrust verifies what an A2A client finds on the web, starting
// from a URL: an organisation's AI Catalog (every Trust Manifest and the
// catalog signature, DID documents resolved over HTTPS) and an agent's
// card at https://HOST/.well-known/agent-card.json against a trust policy
// that says, per host, which keys to trust, whether a transparency-log
// proof is required and how fresh the revocation document must be. No key
// is ever taken from the document being verified. Fetching is safe by
// default (https only, no private or loopback addresses, size, time and
// redirect caps) and honours HTTP caching headers.
package webtrust
