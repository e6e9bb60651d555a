-- The card registry: every registered agent's signed card and the versions
-- before it. agents keeps each agent's version counter, also after the
-- agent is removed, so a version number is never reused; agent_cards holds
-- the versions kept (older ones are deleted as new ones arrive, by the
-- configured bound). stored_at is on the database server's clock.

-- +goose Up
CREATE TABLE agents (
	id           text   NOT NULL PRIMARY KEY CHECK (id <> ''),
	last_version bigint NOT NULL CHECK (last_version >= 1)
);

CREATE TABLE agent_cards (
	id               text        NOT NULL REFERENCES agents (id),
	version          bigint      NOT NULL CHECK (version >= 1),
	visibility       text        NOT NULL CHECK (visibility IN ('public', 'private')),
	input            bytea       NOT NULL,
	options          bytea       NOT NULL,
	signed           bytea       NOT NULL,
	canonical_sha256 bytea       NOT NULL CHECK (octet_length(canonical_sha256) = 32),
	kids             text[]      NOT NULL,
	caller           text        NOT NULL,
	audit_seq        bigint      NOT NULL,
	stored_at        timestamptz NOT NULL,
	PRIMARY KEY (id, version)
);

-- +goose Down
DROP TABLE agent_cards;
DROP TABLE agents;
