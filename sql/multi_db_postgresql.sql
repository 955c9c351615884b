-- multi_db_postgresql.sql: what `leafd multi-db init URL1 URL2 ...` runs on
-- each PostgreSQL database of a set (segment.postgresql.urls;
-- src/store/store_pg_multi.c). The MySQL form, with the same steps:
-- sql/multi_db.sql. Shown for review and for DBAs; run the command rather
-- than this file: it also computes since_block from every database's rows
-- and freezes the set while it changes it.
--
-- 1. On every database: the tables.
CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     varchar(128) NOT NULL DEFAULT '',
  max_id      bigint       NOT NULL DEFAULT 1,
  step        integer      NOT NULL,
  description varchar(256)          DEFAULT NULL,
  update_time timestamp    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
);
CREATE TABLE IF NOT EXISTS leafd_multi_db (
  id          smallint NOT NULL DEFAULT 1,   -- one row
  db_index    integer  NOT NULL,             -- this database's place in the list, from 0
  db_count    integer  NOT NULL,             -- N, the list's length
  block_size  bigint   NOT NULL,             -- IDs per block
  since_block bigint   NOT NULL,             -- the scheme holds from this block on
  frozen      smallint NOT NULL DEFAULT 0,   -- 1: loads refused (init running)
  update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (id)
);
CREATE TABLE IF NOT EXISTS leafd_multi_member (
  db_id    bigint       NOT NULL,              -- a member's identity (random)
  self     smallint     NOT NULL DEFAULT 0,    -- 1: this database's own row
  pos      integer      NOT NULL DEFAULT -1,   -- its place in the set; -1: not a member now
  location varchar(255) NOT NULL DEFAULT '',   -- host:port/database, for messages
  top      bigint       NOT NULL DEFAULT 0,    -- the highest max_id it is known to have handed out
  update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (db_id)
);
-- This database's identity, once:
INSERT INTO leafd_multi_member (db_id, self) SELECT $1, 1
  WHERE NOT EXISTS (SELECT 1 FROM leafd_multi_member WHERE self = 1);

-- 2. On every database, one transaction each: freeze. The row waits for a
--    set's loads in flight (they hold it FOR SHARE), the table lock for
--    every transaction that changed a leaf_alloc row (a node on
--    segment.postgresql.url alone reads the row after its UPDATE).
BEGIN;
INSERT INTO leafd_multi_db (id, db_index, db_count, block_size, since_block, frozen)
  VALUES (1, -1, 0, 0, 0, 1)
  ON CONFLICT (id) DO UPDATE SET frozen = EXCLUDED.frozen, update_time = LOCALTIMESTAMP;
LOCK TABLE leaf_alloc IN SHARE MODE;
COMMIT;

-- 3. As sql/multi_db.sql: read every row; since_block above all of them,
--    every recorded top and floor - 1.

-- 4. On database r, one transaction: every tag present and at least at the
--    start of since_block, the members, the row set.
BEGIN;
INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ($1, $2, $3, $4)
  ON CONFLICT (biz_tag) DO UPDATE SET max_id = GREATEST(leaf_alloc.max_id, EXCLUDED.max_id);
UPDATE leafd_multi_member SET pos = -1;
INSERT INTO leafd_multi_member (db_id, pos, location, top) VALUES ($1, $2, $3, $4)
  ON CONFLICT (db_id) DO UPDATE SET pos = EXCLUDED.pos, location = EXCLUDED.location,
  top = GREATEST(leafd_multi_member.top, EXCLUDED.top);   -- one per member
UPDATE leafd_multi_db SET db_index = $1, db_count = $2, block_size = $3,
  since_block = $4, frozen = 0 WHERE id = 1;
COMMIT;

-- A load on database r (one transaction):
--   SELECT db_index, db_count, block_size, since_block, frozen
--     FROM leafd_multi_db WHERE id = 1 FOR SHARE;              -- must match
--   SELECT max_id, step FROM leaf_alloc WHERE biz_tag = $1 FOR UPDATE;
--   UPDATE leaf_alloc SET max_id = start + step WHERE biz_tag = $2;
-- After the load, before the range is served, on every other database up:
--   INSERT INTO leafd_multi_member (db_id, top) VALUES ($1, $2)
--     ON CONFLICT (db_id) DO UPDATE SET top = GREATEST(leafd_multi_member.top, EXCLUDED.top);
-- After a serial load on the first database, on every other database up:
--   INSERT INTO leaf_alloc (biz_tag, max_id, step, description)
--     VALUES ($1, $2, $3, 'serial period') ON CONFLICT (biz_tag) DO UPDATE
--     SET max_id = CASE WHEN leaf_alloc.description = 'serial period'
--     THEN GREATEST(leaf_alloc.max_id, EXCLUDED.max_id) ELSE leaf_alloc.max_id END;
