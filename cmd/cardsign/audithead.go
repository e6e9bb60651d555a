package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/jwks/jwksfetch"
)

// headSource is where `audit verify` takes the published head from: the
// --head, --jwks and --revocations flags.
type headSource struct {
	head, jwks, revocations string
}

// publishedHead is a head to check the log against, and where it is from.
type publishedHead struct {
	head audit.Head
	from string   // for messages: "--head" or the document's source
	note []string // things worth saying about the document (expired, say)
	// doc is the signed revocation document the head is from (nil for
	// --head): the keys it lists must be revoked in the key records.
	doc *jwks.Revocations
}

// errNoHeadSource: no flag names a head; the caller says that truncation of
// the tail cannot be detected.
var errNoHeadSource = errors.New("no published head given")

// usageProblem is a flag combination that cannot work (exit 2).
type usageProblem struct{ msg string }

func (u *usageProblem) Error() string { return u.msg }

// load returns the head to check against: --head as given, or the audit head
// of the signed revocation document (--revocations, by default the one
// beside a --jwks URL), whose signature is checked against the --jwks keys.
// A document without a head (from a cardsignd before audit heads) yields
// errNoHeadSource with a note.
func (s headSource) load(ctx context.Context, client *http.Client, now time.Time) (*publishedHead, error) {
	switch {
	case s.head != "" && (s.jwks != "" || s.revocations != ""):
		return nil, &usageProblem{"--head and --jwks/--revocations both name a head: give one"}
	case s.head != "":
		h, err := audit.ParseHead(s.head)
		if err != nil {
			return nil, &usageProblem{"--head: " + err.Error()}
		}
		return &publishedHead{head: h, from: "--head"}, nil
	case s.revocations != "" && s.jwks == "":
		return nil, &usageProblem{"--revocations needs --jwks: the document's signature is checked against keys you name"}
	case s.jwks == "":
		return nil, errNoHeadSource
	}
	src := s.revocations
	if src == "" {
		beside, ok := jwks.RevocationsURLBeside(s.jwks)
		if !ok {
			return nil, &usageProblem{"--jwks is a file: name the revocation document too (--revocations FILE|URL)"}
		}
		src = beside
	}
	trusted, err := jwksfetch.Load(ctx, s.jwks, client)
	if err != nil {
		return nil, err
	}
	// The same reader as cardsign verify: at most jwks.MaxSize bytes, no
	// devices or directories, an HTTP error status named.
	data, err := jwksfetch.ReadDocument(ctx, src, client)
	if err != nil {
		return nil, fmt.Errorf("revocation document %s: %w", src, err)
	}
	doc, note, err := verifyRevocationsForHead(data, trusted, now)
	if err != nil {
		return nil, fmt.Errorf("revocation document %s: %w", src, err)
	}
	if doc.AuditHead == nil {
		return nil, fmt.Errorf("%w: the revocation document %s (sequence %d) has no audit_head: its cardsignd predates published audit heads", errNoHeadSource, src, doc.Sequence)
	}
	p := &publishedHead{head: audit.Head{Seq: doc.AuditHead.Seq, Hash: doc.AuditHead.Hash}, from: fmt.Sprintf("%s (revocation document sequence %d, issued %s)", src, doc.Sequence, doc.IssuedAt.Format(time.RFC3339)), doc: &doc}
	if note != "" {
		p.note = append(p.note, note)
	}
	return p, nil
}

// verifyRevocationsForHead verifies a revocation document for its audit
// head. An expired document is still good for that: a head is a fact about
// the past ("the log had reached record N"), so a copy kept from months ago
// must still catch a truncation. Its signature is then checked as of its
// own issued_at (jwks.VerifyRevocationsSigned), and a note says so.
func verifyRevocationsForHead(data []byte, trusted jwks.KeyLookup, now time.Time) (jwks.Revocations, string, error) {
	doc, err := jwks.VerifyRevocations(data, trusted, now)
	if !errors.Is(err, jwks.ErrRevocationsExpired) {
		return doc, "", err
	}
	doc, err = jwks.VerifyRevocationsSigned(data, trusted)
	if err != nil {
		return jwks.Revocations{}, "", err
	}
	return doc, fmt.Sprintf("the revocation document expired at %s; its audit head still counts (a head only says what the log had reached)", doc.ExpiresAt.Format(time.RFC3339)), nil
}
