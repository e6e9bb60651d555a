package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

const agentCardColumns = `c.id, c.version, c.visibility, c.input, c.options, c.signed, c.canonical_sha256, c.kids, c.caller, c.audit_seq, c.stored_at`

// PutAgentCard stores c as its agent's next version (see store.Agents).
func (s *Store) PutAgentCard(ctx context.Context, c store.AgentCard, keep int) (store.AgentCard, error) {
	if err := store.CheckAgentCard(c); err != nil {
		return store.AgentCard{}, fmt.Errorf("store: put agent card: %w", err)
	}
	kids, err := json.Marshal(nonNilStrings(c.KIDs))
	if err != nil {
		return store.AgentCard{}, fmt.Errorf("store: put agent card %s: %w", c.ID, err)
	}
	err = s.writeFreeingWAL(ctx, func(tx *sql.Tx) error {
		var last int64
		err := tx.QueryRowContext(ctx, `SELECT last_version FROM agents WHERE id = ?`, c.ID).Scan(&last)
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
	})
	if err != nil {
		return store.AgentCard{}, fmt.Errorf("store: put agent card %s: %w", c.ID, err)
	}
	return c, nil
}

// AgentCard returns version v of agent id, its newest when v is 0.
func (s *Store) AgentCard(ctx context.Context, id string, v int64) (store.AgentCard, error) {
	q := `SELECT ` + agentCardColumns + ` FROM agent_cards c WHERE c.id = ? AND c.version = ?`
	args := []any{id, v}
	if v == 0 {
		q = `SELECT ` + agentCardColumns + ` FROM agent_cards c JOIN agents a ON a.id = c.id AND a.last_version = c.version WHERE c.id = ?`
		args = args[:1]
	}
	cards, err := s.queryAgentCards(ctx, q, args...)
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
const publicAgentCardQuery = `SELECT ` + agentCardColumns + ` FROM agent_cards c INDEXED BY agent_cards_public
	WHERE c.id = ? AND c.visibility = 'public'
	AND EXISTS (SELECT 1 FROM agents a WHERE a.id = c.id AND a.last_version = c.version)`

// PublicAgentCard returns agent id's newest version if it is public (see
// store.Agents).
func (s *Store) PublicAgentCard(ctx context.Context, id string) (store.AgentCard, error) {
	cards, err := s.queryAgentCards(ctx, publicAgentCardQuery, id)
	if err == nil && len(cards) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.AgentCard{}, fmt.Errorf("store: public agent %s: %w", id, err)
	}
	return cards[0], nil
}

// CountAgents counts the agents, and caller's (see store.Agents).
func (s *Store) CountAgents(ctx context.Context, caller, skip string) (total, byCaller int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(
			(SELECT c.caller FROM agent_cards c WHERE c.id = a.id AND c.caller <> ? ORDER BY c.version DESC LIMIT 1) IS ?), 0)
		FROM agents a WHERE EXISTS (SELECT 1 FROM agent_cards c WHERE c.id = a.id)`, skip, caller).Scan(&total, &byCaller)
	if err != nil {
		return 0, 0, fmt.Errorf("store: count agents: %w", err)
	}
	return total, byCaller, nil
}

// ListAgents returns the newest version of the agents after after, by ID.
func (s *Store) ListAgents(ctx context.Context, after string, limit int) ([]store.AgentCard, error) {
	if limit <= 0 {
		limit = -1
	}
	cards, err := s.queryAgentCards(ctx, `SELECT `+agentCardColumns+` FROM agent_cards c JOIN agents a ON a.id = c.id AND a.last_version = c.version
		WHERE c.id > ? ORDER BY c.id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list agents after %q: %w", after, err)
	}
	return cards, nil
}

// AgentHistory returns the kept versions of agent id, newest first.
func (s *Store) AgentHistory(ctx context.Context, id string) ([]store.AgentCard, error) {
	cards, err := s.queryAgentCards(ctx, `SELECT `+agentCardColumns+` FROM agent_cards c WHERE c.id = ? ORDER BY c.version DESC`, id)
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
func (s *Store) RemoveAgent(ctx context.Context, id string, record func(newest store.AgentCard) (audit.Record, error)) (audit.Record, error) {
	var recErr error
	var out []audit.Record
	var edge transparency.Edge
	var written []transparency.StoredHash
	err := s.writeFreeingWAL(ctx, func(tx *sql.Tx) error {
		cards, err := queryAgentCards(ctx, tx, `SELECT `+agentCardColumns+` FROM agent_cards c JOIN agents a ON a.id = c.id AND a.last_version = c.version WHERE c.id = ?`, id)
		if err != nil {
			return err
		}
		if len(cards) == 0 {
			return store.ErrNotFound
		}
		rec, err := record(cards[0])
		if err != nil {
			recErr = err
			return err
		}
		var times []int64
		if out, times, err = store.PrepareRegistryAudit(rec, audit.KindAgentRemove); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM agent_cards WHERE id = ?`, id); err != nil {
			return err
		}
		edge, written, err = s.appendTx(ctx, tx, out, times)
		return err
	})
	if recErr != nil {
		return audit.Record{}, recErr
	}
	if err != nil {
		return audit.Record{}, fmt.Errorf("store: remove agent %s: %w", id, err)
	}
	s.edge.Store(&edge)
	s.hashes.Add(written)
	return out[0], nil
}

func (s *Store) queryAgentCards(ctx context.Context, q string, args ...any) ([]store.AgentCard, error) {
	return queryAgentCards(ctx, s.db, q, args...)
}

// queryAgentCards reads agent cards by q on db, the database or a
// transaction.
func queryAgentCards(ctx context.Context, db interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}, q string, args ...any) ([]store.AgentCard, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.AgentCard
	for rows.Next() {
		var c store.AgentCard
		var vis, kids string
		var stored int64
		if err := rows.Scan(&c.ID, &c.Version, &vis, &c.Input, &c.Options, &c.Signed, &c.CanonicalSHA256, &kids, &c.Caller, &c.AuditSeq, &stored); err != nil {
			return nil, err
		}
		c.Visibility = store.Visibility(vis)
		if err := json.Unmarshal([]byte(kids), &c.KIDs); err != nil {
			return nil, fmt.Errorf("agent %s version %d: kids: %w", c.ID, c.Version, err)
		}
		c.StoredAt = store.FromNanos(stored)
		out = append(out, c)
	}
	return out, rows.Err()
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// RevokeCard records a card revocation and appends rec, its audit record,
// in one transaction (see store.Agents).
func (s *Store) RevokeCard(ctx context.Context, c store.CardRevocation, rec audit.Record) (store.CardRevocation, audit.Record, error) {
	if len(c.CanonicalSHA256) != 32 {
		return store.CardRevocation{}, audit.Record{}, fmt.Errorf("store: revoke card: canonical SHA-256 is %d bytes, want 32", len(c.CanonicalSHA256))
	}
	recs, times, err := store.PrepareRegistryAudit(rec, audit.KindCardRevoke)
	if err != nil {
		return store.CardRevocation{}, audit.Record{}, err
	}
	var out store.CardRevocation
	var edge transparency.Edge
	var written []transparency.StoredHash
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
		edge, written, err = s.appendTx(ctx, tx, recs, times)
		return err
	})
	if err != nil {
		return store.CardRevocation{}, audit.Record{}, fmt.Errorf("store: revoke card %x: %w", c.CanonicalSHA256, err)
	}
	s.edge.Store(&edge)
	s.hashes.Add(written)
	return out, recs[0], nil
}

// RevokedCards lists every revoked card.
func (s *Store) RevokedCards(ctx context.Context) ([]store.CardRevocation, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT canonical_sha256, agent_id, version, reason, revoked_at FROM revoked_cards ORDER BY canonical_sha256`)
	if err != nil {
		return nil, fmt.Errorf("store: revoked cards: %w", err)
	}
	defer rows.Close()
	var out []store.CardRevocation
	for rows.Next() {
		var c store.CardRevocation
		var at int64
		if err := rows.Scan(&c.CanonicalSHA256, &c.AgentID, &c.Version, &c.Reason, &at); err != nil {
			return nil, fmt.Errorf("store: revoked cards: %w", err)
		}
		c.RevokedAt = store.FromNanos(at)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: revoked cards: %w", err)
	}
	return out, nil
}
