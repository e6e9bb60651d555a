package aicatalog

import (
	"context"
	"errors"
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
	// Limits bound the catalog and each DID document parsed.
	Limits strictjson.Limits
}

// Reason is one refusal: a stable code (for scripts) and what it is about.
type Reason struct {
	Code   string
	Detail string
}

// Result is the outcome of one signature's verification.
type Result struct {
	Accepted bool
	// Signer is the authenticated signer (signature.signer) when the
	// signature verified.
	Signer  string
	Reasons []Reason
}

// EntryResult is the outcome for one catalog entry: accepted when a
// publisher-authorized manifest covering it verified.
type EntryResult struct {
	Index      int
	Identifier string
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

// VerifyCatalog verifies a catalog document as the "Trusted" level
// requires. The error is for a document that cannot be read at all;
// every other refusal is a Reason in the report.
func VerifyCatalog(ctx context.Context, data []byte, opts Options) (*Report, error) {
	return nil, errors.New("aicatalog: VerifyCatalog: not built yet")
}
