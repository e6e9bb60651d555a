-- Single cards revoked while their keys stay good, by the SHA-256 of their
-- canonical bytes: listed in the signed revocation document, refused by
-- verifiers. Kept apart from agent_cards, whose old versions are deleted,
-- so a revocation outlives the version and the agent it names.

-- +goose Up
CREATE TABLE revoked_cards (
	canonical_sha256 bytea       NOT NULL PRIMARY KEY CHECK (octet_length(canonical_sha256) = 32),
	agent_id         text        NOT NULL,
	version          bigint      NOT NULL CHECK (version >= 0),
	reason           text        NOT NULL,
	revoked_at       timestamptz NOT NULL
);

CREATE TRIGGER revoked_cards_immutable BEFORE UPDATE OR DELETE OR TRUNCATE ON revoked_cards
	FOR EACH STATEMENT EXECUTE FUNCTION cardsign_refuse('a card revocation is never withdrawn or changed');

-- +goose Down
DROP TABLE revoked_cards;
