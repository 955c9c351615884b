-- leaf_worker: snowflake worker IDs for snowflake.worker_source = mysql, in
-- the segment database (beside leaf_alloc). leafd creates it when missing
-- (the same statement); this file is for DBAs who create tables themselves.
-- One row per worker ID; a row is held by `instance` (a leafd process) while
-- heartbeat_ms (the server's clock, ms) is fresh, and no one may issue at or
-- below fence_ms after taking it over. released = 1: freed by a clean stop.
-- One more row is no worker ID: worker_id -1, identity '~epoch', the epoch
-- (fence_ms: the server's clock, ms, when a claim first found it missing).
-- An ID with no row waits past it (docs/operations.md, "The epoch"); on a
-- new table nothing was ever issued from, it may be set to 0 beforehand:
--   INSERT INTO leaf_worker (worker_id, identity, instance, fence_ms,
--       heartbeat_ms, released) VALUES (-1, '~epoch', '~epoch', 0, 0, 1);
-- serial_zones: the local times the worker ID's snowflake serials reached,
-- per shape (docs/id-kinds.md); leafd adds it to a table made before it.
CREATE TABLE IF NOT EXISTS leaf_worker (
    worker_id    INT         NOT NULL,
    identity     VARCHAR(128) NOT NULL,
    instance     VARCHAR(32) NOT NULL,
    fence_ms     BIGINT      NOT NULL DEFAULT 0,
    heartbeat_ms BIGINT      NOT NULL DEFAULT 0,
    released     TINYINT     NOT NULL DEFAULT 0,
    serial_zones TEXT        NULL,
    PRIMARY KEY (worker_id),
    UNIQUE KEY uk_leaf_worker_identity (identity)
) ENGINE = InnoDB;
