-- Audit records of key and registry administration (package audit:
-- audit.Kind, Record.Detail): the kind is stored in outcome ('key.revoke',
-- 'agent.remove', ...), names a kid and alg for a key, and has a reason
-- where the caller gave one; detail is what the record states about its
-- subject (a key's state after the action, the agent acted on), '' for
-- the signing requests' records, whose hashes do not cover it. Adding a
-- column with a constant default rewrites nothing.
--
-- The CHECKs of migration 1 on outcome and reason allowed signed and
-- refused records only. They were declared without names, so they are
-- found by what they say and replaced by named ones. The store checks the
-- same rules before writing (audit.Record.CheckOutcome): these are guards.

-- +goose Up
ALTER TABLE audit ADD COLUMN detail text NOT NULL DEFAULT '';

-- +goose StatementBegin
DO $$
DECLARE
	c record;
BEGIN
	FOR c IN SELECT conname FROM pg_constraint
		WHERE conrelid = 'audit'::regclass AND contype = 'c'
		AND (pg_get_constraintdef(oid) LIKE '%outcome%')
	LOOP
		EXECUTE format('ALTER TABLE audit DROP CONSTRAINT %I', c.conname);
	END LOOP;
END
$$;
-- +goose StatementEnd

ALTER TABLE audit ADD CONSTRAINT audit_kind CHECK (outcome <> ''),
	ADD CONSTRAINT audit_kind_fields CHECK (outcome = 'signed' OR (profile = '' AND signature = '' AND (outcome <> 'refused' OR (kid = '' AND alg = '')))),
	ADD CONSTRAINT audit_reason CHECK (reason = '' OR outcome <> 'signed'),
	ADD CONSTRAINT audit_detail CHECK ((detail = '') = (outcome IN ('signed', 'refused')));

-- +goose Down
-- Refused while administrative records exist: the old constraints would
-- not hold for them.
ALTER TABLE audit DROP CONSTRAINT audit_kind, DROP CONSTRAINT audit_kind_fields,
	DROP CONSTRAINT audit_reason, DROP CONSTRAINT audit_detail;
ALTER TABLE audit DROP COLUMN detail;
ALTER TABLE audit ADD CHECK (outcome IN ('signed', 'refused')),
	ADD CHECK (outcome = 'signed' OR (kid = '' AND alg = '' AND profile = '' AND signature = '')),
	ADD CHECK (reason = '' OR outcome = 'refused');
