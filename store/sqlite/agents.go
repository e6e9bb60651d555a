package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlrows"
)

// agents is the Store's part for store.Agents and store.AgentImporter: the
// card registry.
type agents struct{ *core }

// PutAgentCard stores c as its agent's next version (see store.Agents).
func (s *agents) PutAgentCard(ctx context.Context, c store.AgentCard, keep int) (store.AgentCard, error) {
	if err := store.CheckAgentCard(c); err != nil {
		return store.AgentCard{}, fmt.Errorf("store: put agent card: %w", err)
	}
	err := s.writeFreeingWAL(ctx, func(tx *sql.Tx) error { return putAgentCard(ctx, tx, &c, keep) })
	if err != nil {
		return store.AgentCard{}, fmt.Errorf("store: put agent card %s: %w", c.ID, err)
	}
	return c, nil
}

// PutAgentCards is PutAgentCard for several cards in one transaction, one
// durable commit: the registry's re-signing writes the cards signed
// together at once. errs[i] is cards[i]'s own refusal (invalid, or
// store.ErrSuperseded: it is not written, the others are); err fails them
// all.
func (s *agents) PutAgentCards(ctx context.Context, cards []store.AgentCard, keep int) (out []store.AgentCard, errs []error, err error) {
	err = s.writeFreeingWAL(ctx, func(tx *sql.Tx) error {
		out, errs = slices.Clone(cards), make([]error, len(cards)) // afresh when the write is retried
		for i := range out {
			if errs[i] = store.CheckAgentCard(out[i]); errs[i] != nil {
				continue
			}
			if err := putAgentCard(ctx, tx, &out[i], keep); errors.Is(err, store.ErrSuperseded) {
				errs[i] = err // checked before anything of it is written
			} else if err != nil {
				return fmt.Errorf("agent card %s: %w", out[i].ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: put %d agent cards: %w", len(cards), err)
	}
	return out, errs, nil
}

// putAgentCard stores c as its agent's next version in tx (numbered and
// timed there), keeping keep versions; store.ErrSuperseded, before any
// write, when c replaces a version that is no longer the newest.
func putAgentCard(ctx context.Context, tx *sql.Tx, c *store.AgentCard, keep int) error {
	kids, err := json.Marshal(nonNilStrings(c.KIDs))
	if err != nil {
		return err
	}
	var last int64
	err = tx.QueryRowContext(ctx, `SELECT last_version FROM agents WHERE id = ?`, c.ID).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if c.Replaces != 0 {
		var live int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM agent_cards WHERE id = ? AND version = ?`, c.ID, c.Replaces).Scan(&live); err != nil {
			return err
		}
		if last != c.Replaces || live == 0 {
			return fmt.Errorf("%w: version %d is no longer agent %s's newest", store.ErrSuperseded, c.Replaces, c.ID)
		}
	}
	c.Version = last + 1
	now := time.Now()
	c.StoredAt = store.FromNanos(now.UnixNano())
	if _, err := tx.ExecContext(ctx, `INSERT INTO agents (id, last_version) VALUES (?, ?)
		ON CONFLICT (id) DO UPDATE SET last_version = excluded.last_version`, c.ID, c.Version); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO agent_cards (id, version, visibility, input, options, signed, canonical_sha256, kids, caller, audit_seq, stored_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.Version, string(c.Visibility), nonNil(c.Input), nonNil(c.Options), nonNil(c.Signed), nonNil(c.CanonicalSHA256),
		string(kids), c.Caller, c.AuditSeq, now.UnixNano()); err != nil {
		return err
	}
	if keep > 0 {
		_, err := tx.ExecContext(ctx, `DELETE FROM agent_cards WHERE id = ? AND version <= ?`, c.ID, c.Version-int64(keep))
		return err
	}
	return nil
}

// newestAgentCard reads agent ?'s newest card.
const newestAgentCard = `SELECT ` + sqlrows.AgentCardColumns + ` FROM agent_cards c JOIN agents a ON a.id = c.id AND a.last_version = c.version WHERE c.id = ?`

// AgentCard returns version v of agent id, its newest when v is 0.
func (s *agents) AgentCard(ctx context.Context, id string, v int64) (store.AgentCard, error) {
	var cards []store.AgentCard
	var err error
	if v == 0 {
		var stmt *sql.Stmt
		if stmt, err = s.readStatement(ctx, &s.newestCardStmt, newestAgentCard); err == nil {
			cards, err = sqlrows.AgentCards(ctx, sqlrows.Adapt(func(ctx context.Context, _ string, args ...any) (*sql.Rows, error) {
				return stmt.QueryContext(ctx, args...)
			}), values{}, newestAgentCard, id)
		}
	} else {
		cards, err = queryAgentCards(ctx, s.db, `SELECT `+sqlrows.AgentCardColumns+` FROM agent_cards c WHERE c.id = ? AND c.version = ?`, id, v)
	}
	if err == nil && len(cards) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.AgentCard{}, fmt.Errorf("store: agent %s version %d: %w", id, v, err)
	}
	return cards[0], nil
}

// publicAgentCardQuery reads agent id's public versions from the partial
// index agent_cards_public (migration 11) and only for each of them looks
// at agents for the newest version: a private id's rows are never read, so
// it costs what an unknown id costs. INDEXED BY makes a plan without the
// index an error rather than a slower lookup.
const publicAgentCardQuery = `SELECT ` + sqlrows.AgentCardColumns + ` FROM agent_cards c INDEXED BY agent_cards_public
	WHERE c.id = ? AND c.visibility = 'public'
	AND EXISTS (SELECT 1 FROM agents a WHERE a.id = c.id AND a.last_version = c.version)`

// PublicAgentCard returns agent id's newest version if it is public (see
// store.Agents).
func (s *agents) PublicAgentCard(ctx context.Context, id string) (store.AgentCard, error) {
	cards, err := queryAgentCards(ctx, s.db, publicAgentCardQuery, id)
	if err == nil && len(cards) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.AgentCard{}, fmt.Errorf("store: public agent %s: %w", id, err)
	}
	return cards[0], nil
}

// CountAgents counts the agents, and caller's (see store.Agents).
func (s *agents) CountAgents(ctx context.Context, caller, skip string) (total, byCaller int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(
			(SELECT c.caller FROM agent_cards c WHERE c.id = a.id AND c.caller <> ? ORDER BY c.version DESC LIMIT 1) IS ?), 0)
		FROM agents a WHERE EXISTS (SELECT 1 FROM agent_cards c WHERE c.id = a.id)`, skip, caller).Scan(&total, &byCaller)
	if err != nil {
		return 0, 0, fmt.Errorf("store: count agents: %w", err)
	}
	return total, byCaller, nil
}

// ListAgents returns the newest version of the agents after after, by ID.
func (s *agents) ListAgents(ctx context.Context, after string, limit int) ([]store.AgentCard, error) {
	if limit <= 0 {
		limit = -1
	}
	cards, err := queryAgentCards(ctx, s.db, `SELECT `+sqlrows.AgentCardColumns+` FROM agent_cards c JOIN agents a ON a.id = c.id AND a.last_version = c.version
		WHERE c.id > ? ORDER BY c.id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list agents after %q: %w", after, err)
	}
	return cards, nil
}

// AgentHistory returns the kept versions of agent id, newest first.
func (s *agents) AgentHistory(ctx context.Context, id string) ([]store.AgentCard, error) {
	cards, err := queryAgentCards(ctx, s.db, `SELECT `+sqlrows.AgentCardColumns+` FROM agent_cards c WHERE c.id = ? ORDER BY c.version DESC`, id)
	if err == nil && len(cards) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: agent %s history: %w", id, err)
	}
	return cards, nil
}

// RemoveAgent deletes every version of agent id, its counter kept, and
// appends the audit record that record makes of its newest version, in one
// transaction (see store.Agents).
func (s *agents) RemoveAgent(ctx context.Context, id string, record func(newest store.AgentCard) (audit.Record, error)) (audit.Record, error) {
	var recErr error
	var out []audit.Record
	err := s.writeFreeingWAL(ctx, func(tx *sql.Tx) error {
		var times []int64
		var err error
		out, times, err = sqlrows.PrepareAgentRemoval(ctx, rowsOf(tx), values{}, `SELECT `+sqlrows.AgentCardColumns+` FROM agent_cards c JOIN agents a ON a.id = c.id AND a.last_version = c.version WHERE c.id = ?`, id, record, &recErr)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM agent_cards WHERE id = ?`, id); err != nil {
			return err
		}
		err = s.appendTx(ctx, tx, out, times)
		return err
	})
	if recErr != nil {
		return audit.Record{}, recErr
	}
	if err != nil {
		return audit.Record{}, fmt.Errorf("store: remove agent %s: %w", id, err)
	}
	return out[0], nil
}

// queryAgentCards reads agent cards by q on db, the database or a
// transaction.
func queryAgentCards(ctx context.Context, db querier, q string, args ...any) ([]store.AgentCard, error) {
	return sqlrows.AgentCards(ctx, rowsOf(db), values{}, q, args...)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// RevokeCard records a card revocation and appends rec, its audit record,
// in one transaction (see store.Agents).
func (s *agents) RevokeCard(ctx context.Context, c store.CardRevocation, rec audit.Record) (store.CardRevocation, audit.Record, error) {
	if len(c.CanonicalSHA256) != 32 {
		return store.CardRevocation{}, audit.Record{}, fmt.Errorf("store: revoke card: canonical SHA-256 is %d bytes, want 32", len(c.CanonicalSHA256))
	}
	recs, times, err := store.PrepareRegistryAudit(rec, audit.KindCardRevoke)
	if err != nil {
		return store.CardRevocation{}, audit.Record{}, err
	}
	var out store.CardRevocation
	err = s.writeFreeingWAL(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO revoked_cards (canonical_sha256, agent_id, version, reason, revoked_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (canonical_sha256) DO NOTHING`,
			nonNil(c.CanonicalSHA256), c.AgentID, c.Version, c.Reason, time.Now().UnixNano()); err != nil {
			return err
		}
		var at int64
		if err := tx.QueryRowContext(ctx, `SELECT canonical_sha256, agent_id, version, reason, revoked_at FROM revoked_cards WHERE canonical_sha256 = ?`,
			c.CanonicalSHA256).Scan(&out.CanonicalSHA256, &out.AgentID, &out.Version, &out.Reason, &at); err != nil {
			return err
		}
		out.RevokedAt = store.FromNanos(at)
		err = s.appendTx(ctx, tx, recs, times)
		return err
	})
	if err != nil {
		return store.CardRevocation{}, audit.Record{}, fmt.Errorf("store: revoke card %x: %w", c.CanonicalSHA256, err)
	}
	return out, recs[0], nil
}

// RevokedCards lists every revoked card.
func (s *agents) RevokedCards(ctx context.Context) ([]store.CardRevocation, error) {
	out, err := sqlrows.CardRevocations(ctx, rowsOf(s.db), values{}, `SELECT `+sqlrows.CardRevocationColumns+` FROM revoked_cards ORDER BY canonical_sha256`)
	if err != nil {
		return nil, fmt.Errorf("store: revoked cards: %w", err)
	}
	return out, nil
}

var _ store.AgentImporter = (*Store)(nil)

// ImportAgentCard stores c as it is (see store.AgentImporter): what a store
// copy from PostgreSQL writes.
func (s *agents) ImportAgentCard(ctx context.Context, c store.AgentCard) error {
	if err := store.CheckAgentCard(c); err != nil {
		return fmt.Errorf("store: import agent card: %w", err)
	}
	if c.Version < 1 {
		return fmt.Errorf("store: import agent card %s: version %d", c.ID, c.Version)
	}
	kids, err := json.Marshal(nonNilStrings(c.KIDs))
	if err != nil {
		return fmt.Errorf("store: import agent card %s: %w", c.ID, err)
	}
	stored, err := store.Nanos(c.StoredAt)
	if err != nil {
		return fmt.Errorf("store: import agent card %s: stored_at: %w", c.ID, err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO agents (id, last_version) VALUES (?, ?)
			ON CONFLICT (id) DO UPDATE SET last_version = max(last_version, excluded.last_version)`, c.ID, c.Version); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO agent_cards (id, version, visibility, input, options, signed, canonical_sha256, kids, caller, audit_seq, stored_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id, version) DO NOTHING`,
			c.ID, c.Version, string(c.Visibility), nonNil(c.Input), nonNil(c.Options), nonNil(c.Signed), nonNil(c.CanonicalSHA256),
			string(kids), c.Caller, c.AuditSeq, stored)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: import agent card %s version %d: %w", c.ID, c.Version, err)
	}
	return nil
}

// ImportCardRevocation stores c as it is (see store.AgentImporter).
func (s *agents) ImportCardRevocation(ctx context.Context, c store.CardRevocation) error {
	at, err := store.Nanos(c.RevokedAt)
	if len(c.CanonicalSHA256) != 32 || c.RevokedAt.IsZero() || err != nil {
		return fmt.Errorf("store: import card revocation %x: invalid", c.CanonicalSHA256)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO revoked_cards (canonical_sha256, agent_id, version, reason, revoked_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (canonical_sha256) DO NOTHING`,
			nonNil(c.CanonicalSHA256), c.AgentID, c.Version, c.Reason, at)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: import card revocation %x: %w", c.CanonicalSHA256, err)
	}
	return nil
}
