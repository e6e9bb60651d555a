-- What replicas share beyond keys and the audit log: leases for duties done
-- once per cluster, and the documents those duties sign, served as stored.
-- Lease expiry and document times are on the database server's clock
-- (clock_timestamp()), the one clock every replica agrees on.

-- +goose Up
CREATE TABLE leases (
	name       text        NOT NULL PRIMARY KEY CHECK (name <> ''),
	holder     text        NOT NULL CHECK (holder <> ''),
	epoch      bigint      NOT NULL CHECK (epoch >= 1),
	expires_at timestamptz NOT NULL
);

CREATE TABLE documents (
	name       text        NOT NULL PRIMARY KEY CHECK (name <> ''),
	seq        bigint      NOT NULL,
	body       bytea       NOT NULL,
	meta       bytea       NOT NULL,
	updated_at timestamptz NOT NULL
);
