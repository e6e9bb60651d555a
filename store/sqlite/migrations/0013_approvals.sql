-- Signatures held for approval by a signing policy rule (store.Approvals)
-- and the approvers' votes. Times are unix nanoseconds (UTC); seq is the
-- audit record of the request and of each vote.
CREATE TABLE approvals (
  id               TEXT    NOT NULL PRIMARY KEY,
  created_at       INTEGER NOT NULL,
  expires_at       INTEGER NOT NULL,
  requester        TEXT    NOT NULL,
  request_id       TEXT    NOT NULL,
  rule             TEXT    NOT NULL,
  grp              TEXT    NOT NULL,
  required         INTEGER NOT NULL CHECK (required >= 1),
  canonical_sha256 BLOB    NOT NULL CHECK (length(canonical_sha256) = 32),
  card_name        TEXT    NOT NULL,
  card_version     TEXT    NOT NULL,
  agent_id         TEXT    NOT NULL,
  request          BLOB    NOT NULL,
  diff             TEXT    NOT NULL,
  state            TEXT    NOT NULL CHECK (state IN ('pending', 'approved', 'denied')),
  seq              INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX approvals_created ON approvals (created_at, id);
CREATE INDEX approvals_state ON approvals (state, created_at, id);
CREATE INDEX approvals_requester ON approvals (requester, created_at, id);

CREATE TABLE approval_votes (
  approval_id TEXT    NOT NULL REFERENCES approvals (id),
  approver    TEXT    NOT NULL,
  voted_at    INTEGER NOT NULL,
  approve     INTEGER NOT NULL CHECK (approve IN (0, 1)),
  reason      TEXT    NOT NULL,
  seq         INTEGER NOT NULL,
  PRIMARY KEY (approval_id, approver)
) WITHOUT ROWID;
