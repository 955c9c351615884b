-- multi_db.sql: what `leafd multi-db init URL1 URL2 ...` runs on each
-- database of a set (segment.mysql.urls). Shown for review and for DBAs;
-- run the command rather than this file: it also computes since_block from
-- every database's rows and freezes the set while it changes it.
--
-- 1. On every database: the tables.
CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     varchar(128) NOT NULL DEFAULT '',
  max_id      bigint(20)   NOT NULL DEFAULT '1',
  step        int(11)      NOT NULL,
  description varchar(256)          DEFAULT NULL,
  update_time timestamp    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS leafd_multi_db (
  id          tinyint  NOT NULL DEFAULT 1,   -- one row
  db_index    int      NOT NULL,             -- this database's place in the list, from 0
  db_count    int      NOT NULL,             -- N, the list's length
  block_size  bigint   NOT NULL,             -- IDs per block
  since_block bigint   NOT NULL,             -- the scheme holds from this block on
  frozen      tinyint  NOT NULL DEFAULT 0,   -- 1: loads refused (init running)
  update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (id)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS leafd_multi_member (
  db_id    bigint       NOT NULL,              -- a member's identity (random)
  self     tinyint      NOT NULL DEFAULT 0,    -- 1: this database's own row
  pos      int          NOT NULL DEFAULT -1,   -- its place in the set; -1: not a member now
  location varchar(255) NOT NULL DEFAULT '',   -- host:port/database, for messages
  top      bigint       NOT NULL DEFAULT 0,    -- the highest max_id it is known to have handed out
  update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (db_id)
) ENGINE=InnoDB;
-- This database's identity, once:
INSERT INTO leafd_multi_member (db_id, self) SELECT ?, 1 FROM DUAL
  WHERE NOT EXISTS (SELECT 1 FROM leafd_multi_member WHERE self = 1);
-- Init refuses a list that lacks a member (a row with pos >= 0 in any
-- listed database) unless --floor is given.

-- 2. On every database, one transaction each: freeze (waits for loads in
--    flight, which read the row in share mode).
INSERT INTO leafd_multi_db (id, db_index, db_count, block_size, since_block, frozen)
  VALUES (1, -1, 0, 0, 0, 1) ON DUPLICATE KEY UPDATE frozen = VALUES(frozen);

-- 3. Read every tag's max_id on every database; since_block =
--    max(highest max_id anywhere, every recorded top, floor - 1)
--    / block_size + 1. Serial rows ('serial period') of every database are
--    merged, the greatest max_id per biz_tag, into every database of the
--    new set (the first one's counters, the others' copies).

-- 4. On database r, one transaction: every tag present and at least at the
--    start of since_block, and the row set; for each tag (step and
--    description from the database that has it):
INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)
  ON DUPLICATE KEY UPDATE max_id = GREATEST(max_id, VALUES(max_id));
UPDATE leafd_multi_member SET pos = -1;
INSERT INTO leafd_multi_member (db_id, pos, location, top) VALUES (?, ?, ?, ?)
  ON DUPLICATE KEY UPDATE pos = VALUES(pos), location = VALUES(location),
  top = GREATEST(top, VALUES(top));                 -- one per member
UPDATE leafd_multi_db SET db_index = ?, db_count = ?, block_size = ?,
  since_block = ?, frozen = 0 WHERE id = 1;

-- A load on database r (one transaction):
--   SELECT db_index, db_count, block_size, since_block, frozen
--     FROM leafd_multi_db WHERE id = 1 LOCK IN SHARE MODE;   -- must match
--   SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE;
--   -- start: the first ID >= max(max_id, the node's floor, since_block *
--   -- block_size) inside a block k with k mod db_count = db_index, such
--   -- that start + step stays inside that block
--   UPDATE leaf_alloc SET max_id = start + step WHERE biz_tag = ?;
-- After the load, before the range is served, on every other database up:
--   INSERT INTO leafd_multi_member (db_id, top) VALUES (?, ?)
--     ON DUPLICATE KEY UPDATE top = GREATEST(top, VALUES(top));
-- After a serial load on the first database, before the range is served,
-- on every other database up (the copy of the serial row):
--   INSERT INTO leaf_alloc (biz_tag, max_id, step, description)
--     VALUES (?, ?, ?, 'serial period') ON DUPLICATE KEY UPDATE max_id =
--     IF(description = 'serial period', GREATEST(max_id, VALUES(max_id)), max_id);
