-- Audit records of refused signing requests (package audit: Record.Outcome
-- and Record.Reason). A refused record keeps caller, request, card and
-- canonical hash but has no kid, alg, profile or signature.
--
-- ADD COLUMN with a constant default rewrites no row: the append-only
-- triggers (audit_no_update, audit_no_delete) do not fire, and every existing
-- record reads back as 'signed' with an empty reason, which hashes exactly as
-- before (a signed record's hash covers neither column), so existing chains
-- still verify. audit_extends_head only reads seq and prev_hash and needs no
-- change. SQLite tests the new CHECK constraints against the existing rows,
-- which all pass.
--
-- The second CHECK on outcome and the CHECK on reason are guards like the
-- triggers in 0001: the store checks the same before writing.
ALTER TABLE audit ADD COLUMN outcome TEXT NOT NULL DEFAULT 'signed'
	CHECK (outcome IN ('signed', 'refused'))
	CHECK (outcome = 'signed' OR (kid = '' AND alg = '' AND profile = '' AND signature = ''));

-- A signed record's hash does not cover reason, so only a refused record may
-- have one.
ALTER TABLE audit ADD COLUMN reason TEXT NOT NULL DEFAULT ''
	CHECK (reason = '' OR outcome = 'refused');
