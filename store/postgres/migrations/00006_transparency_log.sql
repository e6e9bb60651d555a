-- The transparency log (package transparency), as in the SQLite store
-- (store/sqlite/migrations/0009): an RFC 6962 Merkle tree whose leaf idx is
-- the encoded entry of audit record seq idx + 1, and the tree's hashes at
-- their tlog storage indexes (tlog.StoredHashIndex). AppendAudit inserts a
-- batch's entries and the hashes they add in the batch's transaction, under
-- the audit_head lock. Records appended before this migration get their
-- leaves when the store opens (catchUpLog), without hosts, which were not
-- kept.

-- +goose Up
CREATE TABLE log_entries (
	idx   bigint NOT NULL PRIMARY KEY CHECK (idx >= 0),
	entry bytea  NOT NULL CHECK (octet_length(entry) BETWEEN 1 AND 65535)
);

CREATE TABLE log_hashes (
	idx  bigint NOT NULL PRIMARY KEY CHECK (idx >= 0),
	hash bytea  NOT NULL CHECK (octet_length(hash) = 32)
);

-- Both tables grow at their end only, one index after the other, so that
-- max(idx) + 1 is the number of rows (entries are leaves of records that
-- were appended), and a published tree never changes: a checkpoint once
-- signed stays provable. Checked once per statement over the transition
-- table, as audit_extend_head does (the store inserts a batch with one
-- statement per table): the rows are consecutive indexes, the first right
-- after the table's last (by induction, the table holds 0 to lo - 1), and
-- no entry is of a record not yet appended.
-- +goose StatementBegin
CREATE FUNCTION log_extend() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	lo   bigint;
	hi   bigint;
	n    bigint;
	head bigint;
	follows boolean;
BEGIN
	SELECT min(idx), max(idx), count(*) INTO lo, hi, n FROM new_rows;
	IF n = 0 THEN
		RETURN NULL;
	END IF;
	IF TG_TABLE_NAME = 'log_entries' THEN
		follows := lo = 0 OR EXISTS (SELECT 1 FROM log_entries WHERE idx = lo - 1);
		SELECT seq INTO head FROM audit_head WHERE id = 1;
		IF hi >= head THEN
			RAISE EXCEPTION 'transparency log leaf % is of audit record %, which was not appended (audit_head seq %)', hi, hi + 1, head
				USING ERRCODE = 'integrity_constraint_violation';
		END IF;
	ELSE
		follows := lo = 0 OR EXISTS (SELECT 1 FROM log_hashes WHERE idx = lo - 1);
	END IF;
	IF hi - lo + 1 <> n OR NOT follows THEN
		RAISE EXCEPTION '% rows % to % are not the next indexes: the transparency log grows at its end only', TG_TABLE_NAME, lo, hi
			USING ERRCODE = 'integrity_constraint_violation';
	END IF;
	RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER log_entries_extend AFTER INSERT ON log_entries
	REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION log_extend();

CREATE TRIGGER log_hashes_extend AFTER INSERT ON log_hashes
	REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION log_extend();

CREATE TRIGGER log_entries_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON log_entries
	FOR EACH STATEMENT EXECUTE FUNCTION cardsign_refuse('transparency log entries are append-only');

CREATE TRIGGER log_hashes_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON log_hashes
	FOR EACH STATEMENT EXECUTE FUNCTION cardsign_refuse('transparency log hashes are append-only');

-- +goose Down
DROP TABLE log_hashes;
DROP TABLE log_entries;
DROP FUNCTION log_extend();
