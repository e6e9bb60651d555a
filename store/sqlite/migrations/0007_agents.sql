-- The card registry: every registered agent's signed card and the versions
-- before it. agents keeps each agent's version counter, also after the
-- agent is removed, so a version number is never reused; agent_cards holds
-- the versions kept (older ones are deleted as new ones arrive, by the
-- configured bound).
CREATE TABLE agents (
	id           TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
	last_version INTEGER NOT NULL CHECK (last_version >= 1)
) STRICT;

CREATE TABLE agent_cards (
	id               TEXT    NOT NULL REFERENCES agents (id),
	version          INTEGER NOT NULL CHECK (version >= 1),
	visibility       TEXT    NOT NULL CHECK (visibility IN ('public', 'private')),
	input            BLOB    NOT NULL,
	options          BLOB    NOT NULL,
	signed           BLOB    NOT NULL,
	canonical_sha256 BLOB    NOT NULL CHECK (length(canonical_sha256) = 32),
	kids             TEXT    NOT NULL, -- JSON array of strings
	caller           TEXT    NOT NULL,
	audit_seq        INTEGER NOT NULL,
	stored_at        INTEGER NOT NULL,
	PRIMARY KEY (id, version)
) STRICT;
