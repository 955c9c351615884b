-- postgresql.sql: Leaf's leaf_alloc table for segment mode on PostgreSQL
-- (10 or later; tested on 15). The same columns as sql/mysql.sql, in
-- PostgreSQL's types: max_id a bigint, step an integer (Leaf's int(11)).
-- Load it into the database named in the connection string, as the role
-- leafd connects as (or grant that role SELECT, INSERT, UPDATE on the table):
--   psql "postgresql://leaf@db.example/leaf" -f sql/postgresql.sql
-- update_time is set by leafd's UPDATE (PostgreSQL has no ON UPDATE).
CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     varchar(128) NOT NULL DEFAULT '',
  max_id      bigint       NOT NULL DEFAULT 1,
  step        integer      NOT NULL,
  description varchar(256)          DEFAULT NULL,
  update_time timestamp    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
);
