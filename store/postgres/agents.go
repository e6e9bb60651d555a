package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlrows"
	"github.com/cardsign/cardsign/transparency"
)

// agents is the Store's part for store.Agents and store.AgentImporter: the
// card registry.
type agents struct{ *core }

// PutAgentCard stores c as its agent's next version (see store.Agents). The
// agent's row is locked for the transaction, so concurrent puts for one
// agent (two replicas) take consecutive versions.
func (s *agents) PutAgentCard(ctx context.Context, c store.AgentCard, keep int) (store.AgentCard, error) {
	if err := store.CheckAgentCard(c); err != nil {
		return store.AgentCard{}, fmt.Errorf("store: put agent card: %w", err)
	}
	for _, f := range []string{c.ID, c.Caller} {
		if !validText(f) {
			return store.AgentCard{}, fmt.Errorf("store: put agent card %s: the caller is not UTF-8 text without NUL bytes", c.ID)
		}
	}
	kids := c.KIDs
	if kids == nil {
		kids = []string{}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if c.Replaces != 0 {
			// Lock the agent's counter, then check the version replaced is
			// still the newest and still stored.
			var last int64
			var live bool
			err := tx.QueryRow(ctx, `SELECT a.last_version, EXISTS (SELECT 1 FROM agent_cards c WHERE c.id = a.id AND c.version = $2)
				FROM agents a WHERE a.id = $1 FOR UPDATE`, c.ID, c.Replaces).Scan(&last, &live)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if last != c.Replaces || !live {
				return fmt.Errorf("%w: version %d is no longer agent %s's newest", store.ErrSuperseded, c.Replaces, c.ID)
			}
		}
		err := tx.QueryRow(ctx, `INSERT INTO agents AS a (id, last_version) VALUES ($1, 1)
			ON CONFLICT (id) DO UPDATE SET last_version = a.last_version + 1
			RETURNING last_version`, c.ID).Scan(&c.Version)
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `INSERT INTO agent_cards (id, version, visibility, input, options, signed, canonical_sha256, kids, caller, audit_seq, stored_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, clock_timestamp()) RETURNING stored_at`,
			c.ID, c.Version, string(c.Visibility), c.Input, nonNilBytes(c.Options), c.Signed, c.CanonicalSHA256, kids, c.Caller, c.AuditSeq).Scan(&c.StoredAt)
		if err != nil {
			return err
		}
		if keep > 0 {
			_, err = tx.Exec(ctx, `DELETE FROM agent_cards WHERE id = $1 AND version <= $2`, c.ID, c.Version-int64(keep))
		}
		return err
	})
	if err != nil {
		return store.AgentCard{}, wrap(ctx, "put agent card "+c.ID, err)
	}
	c.StoredAt = c.StoredAt.UTC()
	return c, nil
}

// ImportAgentCard stores c as it is (see store.AgentImporter).
func (s *agents) ImportAgentCard(ctx context.Context, c store.AgentCard) error {
	if err := store.CheckAgentCard(c); err != nil {
		return fmt.Errorf("store: import agent card: %w", err)
	}
	if c.Version < 1 || !validText(c.Caller) {
		return fmt.Errorf("store: import agent card %s: version %d or caller invalid", c.ID, c.Version)
	}
	kids := c.KIDs
	if kids == nil {
		kids = []string{}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO agents AS a (id, last_version) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET last_version = greatest(a.last_version, EXCLUDED.last_version)`, c.ID, c.Version); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO agent_cards (id, version, visibility, input, options, signed, canonical_sha256, kids, caller, audit_seq, stored_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id, version) DO NOTHING`,
			c.ID, c.Version, string(c.Visibility), c.Input, nonNilBytes(c.Options), c.Signed, c.CanonicalSHA256, kids, c.Caller, c.AuditSeq, c.StoredAt)
		return err
	})
	return wrap(ctx, fmt.Sprintf("import agent card %s version %d", c.ID, c.Version), err)
}

// AgentCard returns version v of agent id, its newest when v is 0.
func (s *agents) AgentCard(ctx context.Context, id string, v int64) (store.AgentCard, error) {
	q := `SELECT ` + sqlrows.AgentCardColumns + ` FROM agent_cards c WHERE c.id = $1 AND c.version = $2`
	args := []any{id, v}
	if v == 0 {
		q = `SELECT ` + sqlrows.AgentCardColumns + ` FROM agent_cards c JOIN agents a ON a.id = c.id AND a.last_version = c.version WHERE c.id = $1`
		args = args[:1]
	}
	cards, err := queryAgentCards(ctx, s.pool, q, args...)
	if err == nil && len(cards) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.AgentCard{}, wrap(ctx, fmt.Sprintf("agent %s version %d", id, v), err)
	}
	return cards[0], nil
}

// publicAgentCardQuery reads agent id's public versions from the partial
// index agent_cards_public (migration 8) and only for each of them looks at
// agents for the newest version: a private id's rows are never read, so it
// costs what an unknown id costs. OFFSET 0 keeps the EXISTS a subplan run
// per public row (the planner would otherwise turn it into a join it may
// start from agents).
const publicAgentCardQuery = `SELECT ` + sqlrows.AgentCardColumns + ` FROM agent_cards c
	WHERE c.id = $1 AND c.visibility = 'public'
	AND EXISTS (SELECT 1 FROM agents a WHERE a.id = c.id AND a.last_version = c.version OFFSET 0)`

// PublicAgentCard returns agent id's newest version if it is public (see
// store.Agents).
func (s *agents) PublicAgentCard(ctx context.Context, id string) (store.AgentCard, error) {
	cards, err := queryAgentCards(ctx, s.pool, publicAgentCardQuery, id)
	if err == nil && len(cards) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.AgentCard{}, wrap(ctx, fmt.Sprintf("public agent %s", id), err)
	}
	return cards[0], nil
}

// CountAgents counts the agents, and caller's (see store.Agents).
func (s *agents) CountAgents(ctx context.Context, caller, skip string) (total, byCaller int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE
			(SELECT c.caller FROM agent_cards c WHERE c.id = a.id AND c.caller <> $1 ORDER BY c.version DESC LIMIT 1) = $2)
		FROM agents a WHERE EXISTS (SELECT 1 FROM agent_cards c WHERE c.id = a.id)`, skip, caller).Scan(&total, &byCaller)
	if err != nil {
		return 0, 0, wrap(ctx, "count agents", err)
	}
	return total, byCaller, nil
}

// ListAgents returns the newest version of the agents after after, by ID.
func (s *agents) ListAgents(ctx context.Context, after string, limit int) ([]store.AgentCard, error) {
	var lim *int64 // NULL: LIMIT ALL
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	cards, err := queryAgentCards(ctx, s.pool, `SELECT `+sqlrows.AgentCardColumns+` FROM agent_cards c JOIN agents a ON a.id = c.id AND a.last_version = c.version
		WHERE c.id COLLATE "C" > $1 ORDER BY c.id COLLATE "C" LIMIT $2`, after, lim)
	if err != nil {
		return nil, wrap(ctx, fmt.Sprintf("list agents after %q", after), err)
	}
	return cards, nil
}

// AgentHistory returns the kept versions of agent id, newest first.
func (s *agents) AgentHistory(ctx context.Context, id string) ([]store.AgentCard, error) {
	cards, err := queryAgentCards(ctx, s.pool, `SELECT `+sqlrows.AgentCardColumns+` FROM agent_cards c WHERE c.id = $1 ORDER BY c.version DESC`, id)
	if err == nil && len(cards) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, wrap(ctx, "agent "+id+" history", err)
	}
	return cards, nil
}

// RemoveAgent deletes every version of agent id, its counter kept, and
// appends the audit record that record makes of its newest version, in one
// transaction (see store.Agents). The agent's row is locked first, as
// PutAgentCard locks it: no version is added between the read and the
// removal.
func (s *agents) RemoveAgent(ctx context.Context, id string, record func(newest store.AgentCard) (audit.Record, error)) (audit.Record, error) {
	var recErr error
	var out []audit.Record
	var app transparency.Appended
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM agents WHERE id = $1 FOR UPDATE`, id); err != nil {
			return err
		}
		var times []int64
		var err error
		out, times, err = sqlrows.PrepareAgentRemoval(ctx, rowsOf(tx), values{}, `SELECT `+sqlrows.AgentCardColumns+` FROM agent_cards c JOIN agents a ON a.id = c.id AND a.last_version = c.version WHERE c.id = $1`, id, record, &recErr)
		if err != nil {
			return err
		}
		if err := checkText(out[0]); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM agent_cards WHERE id = $1`, id); err != nil {
			return err
		}
		app, err = s.appendTx(ctx, tx, out, times, nil)
		return err
	})
	if recErr != nil {
		return audit.Record{}, recErr
	}
	if err != nil {
		return audit.Record{}, wrap(ctx, "remove agent "+id, err)
	}
	s.tail.Committed(app)
	return out[0], nil
}

// queryAgentCards reads agent cards by q on db, the pool or a transaction.
func queryAgentCards(ctx context.Context, db querier, q string, args ...any) ([]store.AgentCard, error) {
	return sqlrows.AgentCards(ctx, rowsOf(db), values{}, q, args...)
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return bytes.Clone(b)
}

// validText is what a text column takes: UTF-8 without NUL bytes.
func validText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// RevokeCard records a card revocation and appends rec, its audit record,
// in one transaction (see store.Agents).
func (s *agents) RevokeCard(ctx context.Context, c store.CardRevocation, rec audit.Record) (store.CardRevocation, audit.Record, error) {
	if len(c.CanonicalSHA256) != 32 {
		return store.CardRevocation{}, audit.Record{}, fmt.Errorf("store: revoke card: canonical SHA-256 is %d bytes, want 32", len(c.CanonicalSHA256))
	}
	if !validText(c.AgentID) || !validText(c.Reason) {
		return store.CardRevocation{}, audit.Record{}, fmt.Errorf("store: revoke card %x: agent id or reason is not UTF-8 text without NUL bytes", c.CanonicalSHA256)
	}
	recs, times, err := store.PrepareRegistryAudit(rec, audit.KindCardRevoke)
	if err != nil {
		return store.CardRevocation{}, audit.Record{}, err
	}
	if err := checkText(recs[0]); err != nil {
		return store.CardRevocation{}, audit.Record{}, fmt.Errorf("store: revoke card %x: %w", c.CanonicalSHA256, err)
	}
	var out store.CardRevocation
	var app transparency.Appended
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO revoked_cards (canonical_sha256, agent_id, version, reason, revoked_at)
			VALUES ($1, $2, $3, $4, clock_timestamp()) ON CONFLICT (canonical_sha256) DO NOTHING`,
			c.CanonicalSHA256, c.AgentID, c.Version, c.Reason); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT canonical_sha256, agent_id, version, reason, revoked_at FROM revoked_cards WHERE canonical_sha256 = $1`,
			c.CanonicalSHA256).Scan(&out.CanonicalSHA256, &out.AgentID, &out.Version, &out.Reason, &out.RevokedAt); err != nil {
			return err
		}
		var err error
		app, err = s.appendTx(ctx, tx, recs, times, nil)
		return err
	})
	if err != nil {
		return store.CardRevocation{}, audit.Record{}, wrap(ctx, fmt.Sprintf("revoke card %x", c.CanonicalSHA256), err)
	}
	s.tail.Committed(app)
	out.RevokedAt = out.RevokedAt.UTC()
	return out, recs[0], nil
}

// RevokedCards lists every revoked card.
func (s *agents) RevokedCards(ctx context.Context) ([]store.CardRevocation, error) {
	out, err := sqlrows.CardRevocations(ctx, rowsOf(s.pool), values{}, `SELECT `+sqlrows.CardRevocationColumns+` FROM revoked_cards ORDER BY canonical_sha256`)
	if err != nil {
		return nil, wrap(ctx, "revoked cards", err)
	}
	return out, nil
}

// ImportCardRevocation stores c as it is (see store.AgentImporter).
func (s *agents) ImportCardRevocation(ctx context.Context, c store.CardRevocation) error {
	if len(c.CanonicalSHA256) != 32 || c.RevokedAt.IsZero() || !validText(c.AgentID) || !validText(c.Reason) {
		return fmt.Errorf("store: import card revocation %x: invalid", c.CanonicalSHA256)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO revoked_cards (canonical_sha256, agent_id, version, reason, revoked_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (canonical_sha256) DO NOTHING`,
		c.CanonicalSHA256, c.AgentID, c.Version, c.Reason, c.RevokedAt)
	return wrap(ctx, fmt.Sprintf("import card revocation %x", c.CanonicalSHA256), err)
}
