-- The audit table without the UNIQUE index on prev_hash. Since migration 3
-- an append must extend audit_head (seq = head + 1, prev_hash = head's hash,
-- checked by the audit_extends_head trigger, and the head only moves
-- forward), so two records after one predecessor cannot be inserted while
-- the triggers stand, and whoever can drop the triggers can drop an index
-- too. The index cost a B-tree insert at a random key per record, and with
-- it a WAL page per record at every commit: ≈ 7% of the daemon's CPU per
-- signed card under load.
--
-- SQLite cannot drop a column's UNIQUE constraint, so the table is rebuilt
-- (the documented procedure: new table, copy, drop, rename) in this
-- migration's transaction: the copy keeps every row and every byte, and a
-- failure leaves the old table as it was. DROP TABLE fires no DELETE
-- trigger; the triggers are dropped with the table and made again on the new
-- one, as they were.
CREATE TABLE audit_new (
	seq              INTEGER NOT NULL PRIMARY KEY CHECK (seq >= 1),
	time             INTEGER NOT NULL,
	caller           TEXT    NOT NULL,
	request_id       TEXT    NOT NULL,
	card_name        TEXT    NOT NULL,
	card_version     TEXT    NOT NULL,
	canonical_sha256 BLOB    NOT NULL CHECK (length(canonical_sha256) = 32),
	kid              TEXT    NOT NULL,
	alg              TEXT    NOT NULL,
	profile          TEXT    NOT NULL,
	signature        TEXT    NOT NULL,
	prev_hash        BLOB    NOT NULL CHECK (length(prev_hash) = 32),
	hash             BLOB    NOT NULL CHECK (length(hash) = 32),
	outcome          TEXT    NOT NULL DEFAULT 'signed'
		CHECK (outcome IN ('signed', 'refused'))
		CHECK (outcome = 'signed' OR (kid = '' AND alg = '' AND profile = '' AND signature = '')),
	reason           TEXT    NOT NULL DEFAULT ''
		CHECK (reason = '' OR outcome = 'refused')
) STRICT;

INSERT INTO audit_new (seq, time, caller, request_id, card_name, card_version, canonical_sha256,
	kid, alg, profile, signature, prev_hash, hash, outcome, reason)
SELECT seq, time, caller, request_id, card_name, card_version, canonical_sha256,
	kid, alg, profile, signature, prev_hash, hash, outcome, reason
FROM audit ORDER BY seq;

DROP TABLE audit;
ALTER TABLE audit_new RENAME TO audit;

CREATE TRIGGER audit_extends_head BEFORE INSERT ON audit
WHEN NEW.seq IS NOT (SELECT seq FROM audit_head WHERE id = 1) + 1
	OR NEW.prev_hash IS NOT (SELECT hash FROM audit_head WHERE id = 1)
BEGIN
	SELECT RAISE(ABORT, 'audit record does not extend the chain head (audit_head)');
END;

CREATE TRIGGER audit_advance_head AFTER INSERT ON audit
BEGIN
	UPDATE audit_head SET seq = NEW.seq, hash = NEW.hash WHERE id = 1;
END;

CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
	SELECT RAISE(ABORT, 'audit records are append-only');
END;

CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
	SELECT RAISE(ABORT, 'audit records are append-only');
END;
