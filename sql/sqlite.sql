-- sqlite.sql: the leaf_alloc table for leafd's embedded SQLite store.
-- Leaf's columns; SQLite has no ON UPDATE, so leafd's UPDATE sets update_time
-- itself. store_sqlite.c creates this table when the file is new; the text
-- there must stay the same as this file.
CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     TEXT    NOT NULL DEFAULT '' PRIMARY KEY,
  max_id      INTEGER NOT NULL DEFAULT 1,
  step        INTEGER NOT NULL,
  description TEXT             DEFAULT NULL,
  update_time TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
);
