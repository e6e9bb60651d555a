-- The provenance of a caller that authenticated with an OIDC identity token
-- (issuer, subject, and the claims naming the pipeline run: repository, ref,
-- sha, run id, ...), as audit.EncodeProvenance renders it; '' for every other
-- caller and for every record written before this migration, whose hashes
-- do not cover it (audit.Record.ComputeHash). Adding a column with a
-- constant default rewrites nothing.

-- +goose Up
ALTER TABLE audit ADD COLUMN provenance text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE audit DROP COLUMN provenance;
