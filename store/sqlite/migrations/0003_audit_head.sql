-- The audit log's high-water mark: the seq and hash of the last record ever
-- appended. The chain head used to be read from the audit table itself
-- (max(seq)), so deleting the last records (with the append-only trigger
-- dropped, by anyone with write access to the file) left a shorter chain that
-- verified, and the next append reused the deleted seqs. Now the head lives
-- in this one-row table: appends chain from it, deleted records leave a seq
-- gap that VerifyChain reports, and the head the daemon publishes in its
-- signed revocation document never goes back.
--
-- The row starts at the current end of the log (a log truncated before this
-- migration cannot be told from a shorter one) and is advanced by a trigger
-- on every insert, in the same transaction, so it holds however records get
-- in; the guards below refuse moving it back or deleting it.
CREATE TABLE audit_head (
	id   INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
	seq  INTEGER NOT NULL CHECK (seq >= 0),
	hash BLOB    NOT NULL CHECK (length(hash) = 32)
) STRICT;

INSERT INTO audit_head (id, seq, hash)
SELECT 1, coalesce(max(seq), 0), coalesce((SELECT hash FROM audit ORDER BY seq DESC LIMIT 1), zeroblob(32))
FROM audit;

-- A new record must extend the high-water mark, not whatever the audit
-- table's last row is now.
DROP TRIGGER audit_extends_head;

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

CREATE TRIGGER audit_head_forward_only BEFORE UPDATE ON audit_head
WHEN NEW.id IS NOT OLD.id OR NEW.seq <= OLD.seq
BEGIN
	SELECT RAISE(ABORT, 'the audit head only moves forward: sequence numbers are never reused');
END;

CREATE TRIGGER audit_head_no_delete BEFORE DELETE ON audit_head
BEGIN
	SELECT RAISE(ABORT, 'the audit head is never deleted: sequence numbers are never reused');
END;
