-- leaf_worker on PostgreSQL: snowflake worker IDs for snowflake.worker_source
-- = postgresql (and snowflake.k8s.fence_store = postgresql), in the database
-- snowflake.postgresql.url names (else segment.postgresql.url's). leafd
-- creates it when missing (the same statement); this file is for DBAs who
-- create tables themselves. The rows mean what they mean on MySQL
-- (sql/leaf_worker.sql): one per worker ID, held by `instance` while
-- heartbeat_ms (the server's clock, ms) is fresh, nothing issued at or below
-- fence_ms after a takeover, released = 1 freed by a clean stop; worker_id
-- -1, identity '~epoch', is the epoch row (docs/operations.md, "The epoch").
-- On a new table nothing was ever issued from, the epoch may be set to 0:
--   INSERT INTO leaf_worker (worker_id, identity, instance, fence_ms,
--       heartbeat_ms, released) VALUES (-1, '~epoch', '~epoch', 0, 0, 1);
-- instance is wider than MySQL's: the epoch row notes the table's OID and
-- the server (system identifier and timeline) there.
CREATE TABLE IF NOT EXISTS leaf_worker (
    worker_id    INT          NOT NULL PRIMARY KEY,
    identity     VARCHAR(128) NOT NULL UNIQUE,
    instance     VARCHAR(64)  NOT NULL,
    fence_ms     BIGINT       NOT NULL DEFAULT 0,
    heartbeat_ms BIGINT       NOT NULL DEFAULT 0,
    released     SMALLINT     NOT NULL DEFAULT 0,
    serial_zones TEXT         NULL
);
