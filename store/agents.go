package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/audit"
)

// Agents is the card registry: the latest signed card of every registered
// agent and the versions before it.
type Agents interface {
	// PutAgentCard stores c as agent c.ID's next version: 1 for a new agent,
	// else the newest version + 1 (c.Version is ignored). When c.Replaces is
	// not 0 the put happens only if version c.Replaces is still the agent's
	// newest (and not removed), else it fails with ErrSuperseded: a
	// re-signature never overwrites a newer registration or revives a
	// removed agent. keep > 0 bounds the
	// versions kept: older ones are deleted in the same transaction. It
	// returns the card as stored (Version and StoredAt set, on the store's
	// clock). An agent removed earlier starts again after its last version,
	// so a version number is never reused.
	PutAgentCard(ctx context.Context, c AgentCard, keep int) (AgentCard, error)

	// AgentCard returns version v of agent id, or its newest when v is 0;
	// an error wrapping ErrNotFound when there is no such agent or version
	// (a removed agent has none).
	AgentCard(ctx context.Context, id string, v int64) (AgentCard, error)

	// PublicAgentCard returns the newest version of agent id when it is
	// public; when the agent is private or there is no such agent, an error
	// wrapping ErrNotFound, by the same query and the same error, so that
	// neither the answer nor the time it takes tells the two apart (the
	// registry serves anonymous callers from it: agent ids of private
	// agents cannot be probed).
	PublicAgentCard(ctx context.Context, id string) (AgentCard, error)

	// CountAgents returns how many agents the registry holds (with a kept
	// version) and how many of them caller registered: those whose newest
	// version not signed by skip (the registry's own re-signatures, which
	// do not change whose an agent is) names caller. The registry's quotas
	// read them before a new agent is signed.
	CountAgents(ctx context.Context, caller, skip string) (total, byCaller int64, err error)

	// ListAgents returns the newest version of up to limit agents with IDs
	// after after, ordered by ID; limit <= 0 means no limit.
	ListAgents(ctx context.Context, after string, limit int) ([]AgentCard, error)

	// AgentHistory returns every kept version of agent id, newest first; an
	// error wrapping ErrNotFound when the agent has none.
	AgentHistory(ctx context.Context, id string) ([]AgentCard, error)

	// RemoveAgent deletes every version of agent id (an error wrapping
	// ErrNotFound when it has none) and appends its audit record in the
	// same transaction, as AppendAudit appends records: record makes it (an
	// audit.KindAgentRemove record) from the agent's newest version as the
	// transaction reads it. A record error is returned as is and nothing is
	// written; so is nothing when the append fails. It returns the record as
	// stored. The agent's version counter is kept.
	RemoveAgent(ctx context.Context, id string, record func(newest AgentCard) (audit.Record, error)) (audit.Record, error)

	// RevokeCard records a single card as revoked, by the SHA-256 of its
	// canonical bytes, with the agent and version it was registered as,
	// at the store's now, and appends rec, its audit record (an
	// audit.KindCardRevoke record), in the same transaction: the
	// revocation is never stored without it. Revoking a card already
	// revoked keeps the first revocation and returns it (rec is appended
	// all the same). Revocations outlive the registry's versions and the
	// agent itself. It returns the revocation and the record as stored.
	RevokeCard(ctx context.Context, c CardRevocation, rec audit.Record) (CardRevocation, audit.Record, error)

	// RevokedCards lists every revoked card, by canonical SHA-256.
	RevokedCards(ctx context.Context) ([]CardRevocation, error)
}

// CardRevocation is a single card revoked while its keys stay good.
type CardRevocation struct {
	CanonicalSHA256 []byte
	AgentID         string
	Version         int64
	Reason          string
	RevokedAt       time.Time
}

// AgentImporter is a Store that takes agent cards as they are, versions and
// times kept: what copying a store needs (cardsignd store copy).
type AgentImporter interface {
	// ImportAgentCard stores c with its Version and StoredAt, raising the
	// agent's version counter to at least c.Version. A version already
	// stored is left as it is, so an interrupted copy can run again.
	ImportAgentCard(ctx context.Context, c AgentCard) error
	// ImportCardRevocation stores c with its RevokedAt; one already stored
	// is left as it is.
	ImportCardRevocation(ctx context.Context, c CardRevocation) error
}

// Visibility says who may read an agent's card from the registry.
type Visibility string

const (
	// Private cards are served to callers with the reader role only (A2A
	// §5.4: a card may describe what should not be public). The default.
	Private Visibility = "private"
	// Public cards are served to anyone.
	Public Visibility = "public"
)

// ParseVisibility reads a visibility name; "" is Private.
func ParseVisibility(s string) (Visibility, error) {
	switch Visibility(s) {
	case "", Private:
		return Private, nil
	case Public:
		return Public, nil
	}
	return "", fmt.Errorf("visibility %q: want public or private", s)
}

// AgentCard is one version of an agent's card in the registry.
type AgentCard struct {
	ID      string
	Version int64
	// Replaces, on a put, is the version this one must replace (0: any).
	Replaces   int64
	Visibility Visibility
	// Input is the card as signed, in its v1.0 shape (its canonical forms
	// follow from it); Options how it was signed (opaque to the store: the
	// signer's settings, to sign it again).
	Input   []byte
	Options []byte
	// Signed is the signed card served to verifiers; CanonicalSHA256 the
	// SHA-256 of its spec-profile canonical bytes.
	Signed          []byte
	CanonicalSHA256 []byte
	// KIDs are the keys whose signatures Signed carries.
	KIDs []string
	// Caller and AuditSeq name the request that signed this version and the
	// audit record of its first signature.
	Caller   string
	AuditSeq int64
	StoredAt time.Time
}

// MaxAgentIDLength bounds an agent ID.
const MaxAgentIDLength = 128

// CheckAgentID accepts 1–128 of a-z, 0-9, '.', '-' and '_', starting with a
// letter or digit: an ID is a URL path segment and a file name, and one
// spelling per agent (no upper case).
func CheckAgentID(id string) error {
	if id == "" || len(id) > MaxAgentIDLength {
		return fmt.Errorf("agent id must be 1–%d characters", MaxAgentIDLength)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '-' && c != '_') {
			return errors.New("agent id must be lower-case letters, digits, '.', '-' and '_', starting with a letter or digit")
		}
	}
	return nil
}

// CheckAgentCard refuses what no store may hold: a bad ID or visibility, an
// empty card, a canonical SHA-256 that is not 32 bytes.
func CheckAgentCard(c AgentCard) error {
	if err := CheckAgentID(c.ID); err != nil {
		return err
	}
	if c.Visibility != Public && c.Visibility != Private {
		return fmt.Errorf("agent %s: visibility %q: want public or private", c.ID, c.Visibility)
	}
	if len(c.Input) == 0 || len(c.Signed) == 0 {
		return fmt.Errorf("agent %s: the card and its signed form are required", c.ID)
	}
	if len(c.CanonicalSHA256) != 32 {
		return fmt.Errorf("agent %s: canonical SHA-256 is %d bytes, want 32", c.ID, len(c.CanonicalSHA256))
	}
	return nil
}
