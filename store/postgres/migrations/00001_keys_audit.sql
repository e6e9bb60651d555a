-- The schema of the SQLite store (store/sqlite/migrations 0001 to 0003) on
-- PostgreSQL, plus the singleton row that key-set changes lock.
--
-- Times given by callers are unix nanoseconds UTC in BIGINT, exact as given
-- (timestamptz keeps microseconds only). The guard triggers below refuse what
-- the store itself never does (deleting keys or audit records, rewriting a
-- key's fixed fields, moving the audit head back), so that a mistaken or
-- hostile statement by someone with write access to the tables fails
-- instead of silently breaking the invariants. They are not a security
-- boundary against the tables' owner, who can disable them.

-- +goose Up

-- The key-set lock: CreateKey, MakeKey and UpdateKeys take
-- SELECT ... FOR UPDATE on this one row before reading the keys, so two
-- replicas changing the key set run one after the other, each seeing the
-- other's result. A row lock, not an advisory lock: it lives as long as the
-- transaction, whatever pool or PgBouncer sits in between.
CREATE TABLE keyset_lock (
	id integer NOT NULL PRIMARY KEY CHECK (id = 1)
);
INSERT INTO keyset_lock (id) VALUES (1);

-- Key records. Lifecycle states are derived from the timestamps, never stored.
CREATE TABLE keys (
	kid           text   NOT NULL PRIMARY KEY CHECK (kid <> ''),
	uri           text   NOT NULL,
	alg           text   NOT NULL,
	public_jwk    text   NOT NULL,
	created_at    bigint NOT NULL,
	publish_at    bigint NOT NULL,
	activate_at   bigint,
	retire_at     bigint,
	expire_at     bigint,
	revoked_at    bigint,
	revoke_reason text   NOT NULL DEFAULT ''
);

-- ListKeys' order: kids compare bytewise, as in SQLite, whatever the
-- database's collation.
CREATE INDEX keys_created ON keys (created_at, kid COLLATE "C");

-- The hash-chained audit log (package audit). seq is gap-free from 1;
-- UNIQUE (prev_hash) makes a fork (two records after one predecessor)
-- impossible, and the statement trigger below refuses rows that do not
-- extend audit_head. hash is not indexed: its uniqueness follows, and an
-- index on a random 32-byte key costs a random page write per record.
CREATE TABLE audit (
	seq              bigint NOT NULL PRIMARY KEY CHECK (seq >= 1),
	time             bigint NOT NULL,
	caller           text   NOT NULL,
	request_id       text   NOT NULL,
	card_name        text   NOT NULL,
	card_version     text   NOT NULL,
	canonical_sha256 bytea  NOT NULL CHECK (octet_length(canonical_sha256) = 32),
	kid              text   NOT NULL,
	alg              text   NOT NULL,
	profile          text   NOT NULL,
	signature        text   NOT NULL,
	prev_hash        bytea  NOT NULL UNIQUE CHECK (octet_length(prev_hash) = 32),
	hash             bytea  NOT NULL CHECK (octet_length(hash) = 32),
	-- A refused request's record has no kid, alg, profile or signature; a
	-- signed record's hash does not cover reason, so only a refused record
	-- may have one (audit.Record.CheckOutcome; the store checks first).
	outcome          text   NOT NULL DEFAULT 'signed'
		CHECK (outcome IN ('signed', 'refused'))
		CHECK (outcome = 'signed' OR (kid = '' AND alg = '' AND profile = '' AND signature = '')),
	reason           text   NOT NULL DEFAULT ''
		CHECK (reason = '' OR outcome = 'refused')
);

-- The audit log's high-water mark: seq and hash of the last record ever
-- appended. Appends chain from it and the statement trigger advances it in
-- the same transaction, so records deleted from the end behind the store's
-- back leave a gap that audit.VerifyChain reports, and a seq is never
-- reused. Appends lock this row (FOR UPDATE): one chain, never forked,
-- whatever the number of writers.
CREATE TABLE audit_head (
	id   integer NOT NULL PRIMARY KEY CHECK (id = 1),
	seq  bigint  NOT NULL CHECK (seq >= 0),
	hash bytea   NOT NULL CHECK (octet_length(hash) = 32)
);
INSERT INTO audit_head (id, seq, hash) VALUES (1, 0, decode(repeat('00', 32), 'hex'));

-- Named durable counters (NextSequence).
CREATE TABLE sequences (
	name  text   NOT NULL PRIMARY KEY CHECK (name <> ''),
	value bigint NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION cardsign_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- TG_ARGV[0] says why, in the words of the invariant.
	RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER keyset_lock_no_delete BEFORE DELETE OR TRUNCATE ON keyset_lock
	FOR EACH STATEMENT EXECUTE FUNCTION cardsign_refuse('the keyset_lock row is never deleted: key-set changes lock it');

-- A kid is never reused, so key rows are never deleted.
CREATE TRIGGER keys_no_delete BEFORE DELETE OR TRUNCATE ON keys
	FOR EACH STATEMENT EXECUTE FUNCTION cardsign_refuse('keys are never deleted: a kid is never reused');

-- +goose StatementBegin
CREATE FUNCTION keys_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.kid IS DISTINCT FROM OLD.kid OR NEW.uri IS DISTINCT FROM OLD.uri OR NEW.alg IS DISTINCT FROM OLD.alg
		OR NEW.public_jwk IS DISTINCT FROM OLD.public_jwk OR NEW.created_at IS DISTINCT FROM OLD.created_at
		OR (OLD.revoked_at IS NOT NULL
			AND (NEW.revoked_at IS DISTINCT FROM OLD.revoked_at OR NEW.revoke_reason IS DISTINCT FROM OLD.revoke_reason)) THEN
		RAISE EXCEPTION 'key kid, uri, alg, public_jwk, created_at and revocation are immutable (key %)', OLD.kid
			USING ERRCODE = 'integrity_constraint_violation';
	END IF;
	RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER keys_immutable BEFORE UPDATE ON keys
	FOR EACH ROW EXECUTE FUNCTION keys_immutable();

CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON audit
	FOR EACH STATEMENT EXECUTE FUNCTION cardsign_refuse('audit records are append-only');

-- Rows inserted by one statement, in seq order, must continue the chain
-- from audit_head: seqs head+1, head+2, ... each with prev_hash the hash
-- before it. Checked once per statement over the transition table (the
-- store inserts a whole batch with one statement), then the head moves to
-- the last row. The head row is locked first, so concurrent inserts, from
-- the store or not, are checked one after the other against the head the
-- previous one left.
-- +goose StatementBegin
CREATE FUNCTION audit_extend_head() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	head_seq  bigint;
	head_hash bytea;
	last_seq  bigint;
	last_hash bytea;
BEGIN
	SELECT seq, hash INTO head_seq, head_hash FROM audit_head WHERE id = 1 FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'the audit_head row is missing: the database was edited outside cardsign; restore it from a backup'
			USING ERRCODE = 'integrity_constraint_violation';
	END IF;
	IF EXISTS (
		SELECT 1 FROM (
			SELECT seq, prev_hash,
				row_number() OVER (ORDER BY seq) AS i,
				lag(hash, 1, head_hash) OVER (ORDER BY seq) AS want_prev
			FROM new_rows
		) r
		WHERE r.seq <> head_seq + r.i OR r.prev_hash <> r.want_prev
	) THEN
		RAISE EXCEPTION 'audit record does not extend the chain head (audit_head seq %)', head_seq
			USING ERRCODE = 'integrity_constraint_violation';
	END IF;
	SELECT seq, hash INTO last_seq, last_hash FROM new_rows ORDER BY seq DESC LIMIT 1;
	IF FOUND THEN
		UPDATE audit_head SET seq = last_seq, hash = last_hash WHERE id = 1;
	END IF;
	RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_extends_head AFTER INSERT ON audit
	REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION audit_extend_head();

-- +goose StatementBegin
CREATE FUNCTION audit_head_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.id IS DISTINCT FROM OLD.id OR NEW.seq <= OLD.seq THEN
		RAISE EXCEPTION 'the audit head only moves forward: sequence numbers are never reused'
			USING ERRCODE = 'integrity_constraint_violation';
	END IF;
	RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_head_forward_only BEFORE UPDATE ON audit_head
	FOR EACH ROW EXECUTE FUNCTION audit_head_forward_only();

CREATE TRIGGER audit_head_no_delete BEFORE DELETE OR TRUNCATE ON audit_head
	FOR EACH STATEMENT EXECUTE FUNCTION cardsign_refuse('the audit head is never deleted: sequence numbers are never reused');
