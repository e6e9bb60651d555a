-- Key records. Lifecycle states are derived from the timestamps, never stored.
-- Times are unix nanoseconds UTC.
CREATE TABLE keys (
	kid           TEXT    NOT NULL PRIMARY KEY CHECK (kid <> ''),
	uri           TEXT    NOT NULL,
	alg           TEXT    NOT NULL,
	public_jwk    TEXT    NOT NULL,
	created_at    INTEGER NOT NULL,
	publish_at    INTEGER NOT NULL,
	activate_at   INTEGER,
	retire_at     INTEGER,
	expire_at     INTEGER,
	revoked_at    INTEGER,
	revoke_reason TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX keys_created ON keys (created_at, kid);

-- A kid is never reused, so key rows are never deleted, and the fields fixed
-- at creation never change. The store checks this before writing; the
-- triggers catch anything else that writes to the file.
CREATE TRIGGER keys_no_delete BEFORE DELETE ON keys
BEGIN
	SELECT RAISE(ABORT, 'keys are never deleted: a kid is never reused');
END;

CREATE TRIGGER keys_immutable BEFORE UPDATE ON keys
WHEN NEW.kid IS NOT OLD.kid OR NEW.uri IS NOT OLD.uri OR NEW.alg IS NOT OLD.alg
	OR NEW.public_jwk IS NOT OLD.public_jwk OR NEW.created_at IS NOT OLD.created_at
	OR (OLD.revoked_at IS NOT NULL
		AND (NEW.revoked_at IS NOT OLD.revoked_at OR NEW.revoke_reason IS NOT OLD.revoke_reason))
BEGIN
	SELECT RAISE(ABORT, 'key kid, uri, alg, public_jwk, created_at and revocation are immutable');
END;

-- The hash-chained audit log (package audit). seq is gap-free from 1;
-- UNIQUE(prev_hash) makes a fork (two records after one predecessor)
-- impossible, and the insert trigger refuses any record that does not extend
-- the current head. hash is deliberately not indexed: its uniqueness follows
-- from the above, and every index on a random 32-byte key costs a random
-- page write per record (UNIQUE(hash) cut batched append throughput by a
-- third).
CREATE TABLE audit (
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
	prev_hash        BLOB    NOT NULL UNIQUE CHECK (length(prev_hash) = 32),
	hash             BLOB    NOT NULL CHECK (length(hash) = 32)
) STRICT;

CREATE TRIGGER audit_extends_head BEFORE INSERT ON audit
WHEN NEW.seq IS NOT coalesce((SELECT max(seq) FROM audit), 0) + 1
	OR NEW.prev_hash IS NOT coalesce((SELECT hash FROM audit WHERE seq = NEW.seq - 1), zeroblob(32))
BEGIN
	SELECT RAISE(ABORT, 'audit record does not extend the chain head');
END;

CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
	SELECT RAISE(ABORT, 'audit records are append-only');
END;

CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
	SELECT RAISE(ABORT, 'audit records are append-only');
END;

-- Named durable counters (NextSequence).
CREATE TABLE sequences (
	name  TEXT    NOT NULL PRIMARY KEY CHECK (name <> ''),
	value INTEGER NOT NULL
) STRICT;
