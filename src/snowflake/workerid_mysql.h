/* workerid_mysql.h: snowflake worker IDs held in MySQL/MariaDB (the
 * leaf_worker table, sql/leaf_worker.sql, created when missing), behind
 * the lease rule of workerid_lease.h. Every change is one transaction; the
 * claim locks the whole table (SELECT ... FOR UPDATE), so two nodes
 * starting at once never get the same ID. All statements are prepared.
 *
 * Ownership: workerid_mysql_store fills a struct wlease_store whose close
 * frees it.
 * Failure values: -1 with *cause (malloc'd).
 * Thread-safety: one thread at a time (the lease's keeper).
 */
#ifndef LEAFD_WORKERID_MYSQL_H
#define LEAFD_WORKERID_MYSQL_H

#include <stdint.h>

#include "workerid_lease.h"

/* url: as segment.mysql.url (db_mysql_url_parse); user and password
 * (may be NULL) as leaf.jdbc.username/password: used for a JDBC URL, or a
 * URL without a user. timeout_ms bounds each statement of a fence write in
 * service and of a release, start_ms each of a claim and of the start's
 * clock-check write (whole seconds, at least 1: the client's timeouts).
 * Does not connect yet. */
int workerid_mysql_store(const char *url, const char *user,
                         const char *password, int64_t timeout_ms,
                         int64_t start_ms, struct wlease_store *out,
                         char **cause);

#endif
