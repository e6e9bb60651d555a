-- Signatures held for approval by a signing policy rule (store.Approvals)
-- and the approvers' votes. Times are on the database server's clock; seq
-- is the audit record of the request and of each vote.

-- +goose Up
CREATE TABLE approvals (
	id               text        NOT NULL PRIMARY KEY,
	created_at       timestamptz NOT NULL,
	expires_at       timestamptz NOT NULL,
	requester        text        NOT NULL,
	request_id       text        NOT NULL,
	rule             text        NOT NULL,
	grp              text        NOT NULL,
	required         integer     NOT NULL CHECK (required >= 1),
	canonical_sha256 bytea       NOT NULL CHECK (octet_length(canonical_sha256) = 32),
	card_name        text        NOT NULL,
	card_version     text        NOT NULL,
	agent_id         text        NOT NULL,
	request          bytea       NOT NULL,
	diff             text        NOT NULL,
	state            text        NOT NULL CHECK (state IN ('pending', 'approved', 'denied')),
	seq              bigint      NOT NULL
);
CREATE INDEX approvals_created ON approvals (created_at, id);
CREATE INDEX approvals_state ON approvals (state, created_at, id);
CREATE INDEX approvals_requester ON approvals (requester, created_at, id);

CREATE TABLE approval_votes (
	approval_id text        NOT NULL REFERENCES approvals (id),
	approver    text        NOT NULL,
	voted_at    timestamptz NOT NULL,
	approve     boolean     NOT NULL,
	reason      text        NOT NULL,
	seq         bigint      NOT NULL,
	PRIMARY KEY (approval_id, approver)
);

-- +goose Down
DROP TABLE approval_votes;
DROP TABLE approvals;
