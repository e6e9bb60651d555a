-- The provenance of a caller that authenticated with an OIDC identity token
-- (issuer, subject, and the claims naming the pipeline run: repository, ref,
-- sha, run id, ...), as audit.EncodeProvenance renders it; '' for every other
-- caller and for every record written before this migration, whose hashes
-- do not cover it (audit.Record.ComputeHash). The audit_no_update trigger
-- fires on UPDATE statements only, not on ADD COLUMN.
ALTER TABLE audit ADD COLUMN provenance TEXT NOT NULL DEFAULT '';
