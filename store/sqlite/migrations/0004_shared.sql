-- What several processes share beyond keys and the audit log: leases for
-- duties done once (re-signing the revocation document) and the documents
-- they sign, served as stored. Times are unix nanoseconds UTC; a SQLite
-- file is shared only by processes on one host, so its clock is theirs.
CREATE TABLE leases (
	name       TEXT    NOT NULL PRIMARY KEY CHECK (name <> ''),
	holder     TEXT    NOT NULL CHECK (holder <> ''),
	epoch      INTEGER NOT NULL CHECK (epoch >= 1),
	expires_at INTEGER NOT NULL
) STRICT;

CREATE TABLE documents (
	name       TEXT    NOT NULL PRIMARY KEY CHECK (name <> ''),
	seq        INTEGER NOT NULL,
	body       BLOB    NOT NULL,
	meta       BLOB    NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;
