-- The witnesses' cosignatures of the transparency log's checkpoints
-- (store.Cosignatures): one row per tree size and witness, the base64 of
-- the witness's signature line.

-- +goose Up
CREATE TABLE log_cosignatures (
  size      BIGINT NOT NULL CHECK (size >= 1),
  witness   TEXT   NOT NULL,
  signature TEXT   NOT NULL,
  stored_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (size, witness)
);
CREATE INDEX log_cosignatures_witness ON log_cosignatures (witness, size);

-- +goose Down
DROP TABLE log_cosignatures;
