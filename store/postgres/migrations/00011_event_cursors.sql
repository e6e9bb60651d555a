-- The event sinks' cursors (store.EventCursors): the Seq of the last audit
-- record delivered to each sink, and when it moved (the database's clock).

-- +goose Up
CREATE TABLE event_cursors (
  sink       TEXT        NOT NULL PRIMARY KEY,
  seq        BIGINT      NOT NULL CHECK (seq >= 0),
  updated_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE event_cursors;
