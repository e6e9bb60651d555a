package sqlrows

import (
	"context"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

// AuditColumns are the audit table's columns (times as unix nanoseconds),
// in the order ListAudit scans them; its query adds the record's
// transparency-log entry (log_entries.entry, NULL when it has none).
const AuditColumns = `seq, time, caller, request_id, card_name, card_version, canonical_sha256, kid, alg, profile, signature, prev_hash, hash, outcome, reason, provenance, detail`

// ListAudit reads audit records with sql, a SELECT of AuditColumns and the
// record's log entry; each record's Hosts and Sealed come from its entry.
func ListAudit(ctx context.Context, q Querier, sql string, args ...any) ([]audit.Record, error) {
	return query(ctx, q, scanAudit, sql, args...)
}

func scanAudit(rows Rows) (audit.Record, error) {
	var r audit.Record
	var t int64
	var entry []byte
	if err := rows.Scan(&r.Seq, &t, &r.Caller, &r.RequestID, &r.CardName, &r.CardVersion,
		&r.CanonicalSHA256, &r.KID, &r.Alg, &r.Profile, &r.Signature, &r.PrevHash, &r.Hash, &r.Outcome, &r.Reason, &r.Provenance, &r.Detail, &entry); err != nil {
		return audit.Record{}, err
	}
	r.Time = store.FromNanos(t)
	var err error
	if r.Hosts, err = transparency.EntryHosts(r.Seq, entry); err != nil {
		return audit.Record{}, err
	}
	if r.Sealed, err = transparency.EntrySealed(r.Seq, entry); err != nil {
		return audit.Record{}, err
	}
	return r, nil
}
