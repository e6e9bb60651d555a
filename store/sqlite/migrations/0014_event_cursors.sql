-- The event sinks' cursors (store.EventCursors): the Seq of the last audit
-- record delivered to each sink, and when it moved (unix nanoseconds, UTC).
CREATE TABLE event_cursors (
  sink       TEXT    NOT NULL PRIMARY KEY,
  seq        INTEGER NOT NULL CHECK (seq >= 0),
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;
