-- The public cards alone, for the registry's public lookup
-- (PublicAgentCard): it reads this index only, so a private agent's rows
-- are never read there and a private id costs the same lookups as an
-- unknown one (its id cannot be probed by timing).

-- +goose Up
CREATE INDEX agent_cards_public ON agent_cards (id, version) WHERE visibility = 'public';

-- +goose Down
DROP INDEX agent_cards_public;
