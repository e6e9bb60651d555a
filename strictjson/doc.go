// Package strictjson is the one JSON codec of cardsign: a strict parser with
// caps on size, depth and counts (Parse, Limits) that refuses what would let
// two parties read different documents from the same bytes (duplicate keys,
// invalid UTF-8, lone surrogates, numbers a double cannot hold, trailing
// data); the value tree it yields (Value, keeping members in document order
// and numbers as their literal text); the RFC 8785 writer (Value.JCS,
// JCSWriter) and compact/indented printing; JSON paths (Path, PathStack);
// and the located error every refusal is (Error: path, rule, reason, byte
// offset).
//
// Cards, JOSE headers and JWKs, JWK Sets, revocation documents, log entries
// and OIDC tokens are all read and written here, so that no two parts of
// cardsign can disagree on what a document says. The package knows no
// schema: card reads the Agent Card schema over its tree.
package strictjson
