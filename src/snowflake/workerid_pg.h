/* workerid_pg.h: snowflake worker IDs held in PostgreSQL (the leaf_worker
 * table, sql/leaf_worker_postgresql.sql, created when missing), behind
 * the lease rule of workerid_lease.h, with the rules of the MySQL store
 * (workerid_mysql.h): every change is one transaction, and the claim
 * locks the table (LOCK TABLE ... SHARE ROW EXCLUSIVE: one claim at a
 * time, readers not blocked), so two nodes starting at once never get the
 * same ID. All statements are prepared.
 *
 * Ownership: workerid_pg_store fills a struct wlease_store whose close
 * frees it.
 * Failure values: -1 with *cause (malloc'd).
 * Thread-safety: one thread at a time (the lease's keeper).
 */
#ifndef LEAFD_WORKERID_PG_H
#define LEAFD_WORKERID_PG_H

#include <stdint.h>

#include "workerid_lease.h"

/* conninfo: a libpq connection string, checked as segment.postgresql.url
 * is (db_pg_conninfo_check; key names it in a refusal). timeout_ms bounds
 * each statement of a fence write in service and of a release, start_ms
 * each of a claim and of the start's clock-check write. Does not connect
 * yet. */
int workerid_pg_store(const char *conninfo, const char *key,
                      int64_t timeout_ms, int64_t start_ms,
                      struct wlease_store *out, char **cause);

#endif
