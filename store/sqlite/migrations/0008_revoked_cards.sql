-- Single cards revoked while their keys stay good, by the SHA-256 of their
-- canonical bytes: listed in the signed revocation document, refused by
-- verifiers. Kept apart from agent_cards, whose old versions are deleted,
-- so a revocation outlives the version and the agent it names.
CREATE TABLE revoked_cards (
	canonical_sha256 BLOB    NOT NULL PRIMARY KEY CHECK (length(canonical_sha256) = 32),
	agent_id         TEXT    NOT NULL,
	version          INTEGER NOT NULL CHECK (version >= 0),
	reason           TEXT    NOT NULL,
	revoked_at       INTEGER NOT NULL
) STRICT;

CREATE TRIGGER revoked_cards_no_delete BEFORE DELETE ON revoked_cards
BEGIN
	SELECT RAISE(ABORT, 'a card revocation is never withdrawn');
END;

CREATE TRIGGER revoked_cards_no_update BEFORE UPDATE ON revoked_cards
BEGIN
	SELECT RAISE(ABORT, 'a card revocation is never changed');
END;
