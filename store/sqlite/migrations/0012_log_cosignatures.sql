-- The witnesses' cosignatures of the transparency log's checkpoints
-- (store.Cosignatures): one row per tree size and witness, the base64 of
-- the witness's signature line.
CREATE TABLE log_cosignatures (
  size      INTEGER NOT NULL CHECK (size >= 1),
  witness   TEXT    NOT NULL,
  signature TEXT    NOT NULL,
  stored_at INTEGER NOT NULL,
  PRIMARY KEY (size, witness)
) WITHOUT ROWID;
CREATE INDEX log_cosignatures_witness ON log_cosignatures (witness, size);
