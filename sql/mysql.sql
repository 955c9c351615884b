-- mysql.sql: Leaf's leaf_alloc table for segment mode (MySQL 5.7/8, MariaDB).
-- Same columns and types as Meituan Leaf's scripts/leaf_alloc.sql, so a Leaf
-- database works unchanged. Load into the database named in the URL:
--   mysql leaf < sql/mysql.sql
CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     varchar(128) NOT NULL DEFAULT '',
  max_id      bigint(20)   NOT NULL DEFAULT '1',
  step        int(11)      NOT NULL,
  description varchar(256)          DEFAULT NULL,
  update_time timestamp    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB;
