-- The transparency log (package transparency): an RFC 6962 Merkle tree
-- whose leaf idx is the encoded entry of audit record seq idx + 1, and the
-- tree's hashes at their tlog storage indexes (tlog.StoredHashIndex), from
-- which tiles, checkpoints and inclusion proofs are computed. AppendAudit
-- inserts a record's entry and the hashes it adds in the record's
-- transaction. Records appended before this migration get their leaves when
-- the store opens (catchUpLog), without hosts, which were not kept.
--
-- idx is an INTEGER PRIMARY KEY, the rowid itself: the tree is read by
-- index, and the log's size is max(idx) + 1, the B-tree's last key.
CREATE TABLE log_entries (
	idx   INTEGER NOT NULL PRIMARY KEY CHECK (idx >= 0),
	entry BLOB    NOT NULL CHECK (length(entry) BETWEEN 1 AND 65535)
) STRICT;

CREATE TABLE log_hashes (
	idx  INTEGER NOT NULL PRIMARY KEY CHECK (idx >= 0),
	hash BLOB    NOT NULL CHECK (length(hash) = 32)
) STRICT;

-- A published tree never changes: a checkpoint once signed stays provable.
-- As with the audit triggers, the store never does what these refuse. (That
-- rows are only ever added at the next index is the append's own doing: it
-- checks the log's size against the audit head in its transaction; a
-- trigger checking each row cost a tenth of an append.)

CREATE TRIGGER log_entries_no_update BEFORE UPDATE ON log_entries
BEGIN
	SELECT RAISE(ABORT, 'transparency log entries are append-only');
END;

CREATE TRIGGER log_entries_no_delete BEFORE DELETE ON log_entries
BEGIN
	SELECT RAISE(ABORT, 'transparency log entries are append-only');
END;


CREATE TRIGGER log_hashes_no_update BEFORE UPDATE ON log_hashes
BEGIN
	SELECT RAISE(ABORT, 'transparency log hashes are append-only');
END;

CREATE TRIGGER log_hashes_no_delete BEFORE DELETE ON log_hashes
BEGIN
	SELECT RAISE(ABORT, 'transparency log hashes are append-only');
END;
