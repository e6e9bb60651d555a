-- Audit records of key and registry administration (package audit:
-- audit.Kind, Record.Detail): the kind is stored in outcome ('key.revoke',
-- 'agent.remove', ...), names a kid and alg for a key, and has a reason
-- where the caller gave one; detail is what the record states about its
-- subject (a key's state after the action, the agent acted on), '' for
-- the signing requests' records, whose hashes do not cover it.
--
-- The outcome and reason CHECKs of migrations 2 and 5 allowed signed and
-- refused records only, and SQLite cannot change a column's constraints,
-- so the table is rebuilt as migration 5 did (new table, copy, drop,
-- rename, the triggers made again) in this migration's transaction: every
-- row and byte is kept, and a failure leaves the old table as it was. The
-- store checks the same rules before writing (audit.Record.CheckOutcome):
-- these are guards.
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
		CHECK (outcome <> '')
		CHECK (outcome = 'signed' OR (profile = '' AND signature = '' AND (outcome <> 'refused' OR (kid = '' AND alg = '')))),
	reason           TEXT    NOT NULL DEFAULT ''
		CHECK (reason = '' OR outcome <> 'signed'),
	provenance       TEXT    NOT NULL DEFAULT '',
	detail           TEXT    NOT NULL DEFAULT ''
		CHECK ((detail = '') = (outcome IN ('signed', 'refused')))
) STRICT;

INSERT INTO audit_new (seq, time, caller, request_id, card_name, card_version, canonical_sha256,
	kid, alg, profile, signature, prev_hash, hash, outcome, reason, provenance)
SELECT seq, time, caller, request_id, card_name, card_version, canonical_sha256,
	kid, alg, profile, signature, prev_hash, hash, outcome, reason, provenance
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
