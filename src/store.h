/* store.h: where segment mode keeps its leaf_alloc table.
 *
 * One interface, two backends: store_sqlite.c (the embedded default) and
 * store_mysql.c (MySQL/MariaDB through MariaDB Connector/C). The table is
 * Leaf's: biz_tag, max_id, step, description, update_time.
 *
 * A struct store is one connection and is used by one thread at a time (each
 * loader thread opens its own). Calls block; they never run on an I/O thread.
 * Every statement is prepared. Functions return 0 on success and -1 on error
 * with *cause set to a malloc'd message naming the peer's own error text
 * (caller frees). After an error the next call reconnects by itself.
 */
#ifndef LEAFD_STORE_H
#define LEAFD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct config;
struct store;

struct store_row {
    char    biz_tag[TAG_MAX + 1];
    int64_t max_id;
    int64_t step;
    char    description[257];
    char    update_time[32];      /* "YYYY-MM-DD HH:MM:SS" as the store gives it */
};

/* Open a store as the config says (segment.store, paths, URLs). Does not fail
 * when the database is merely down: the connection is made lazily and
 * store_open only fails on a configuration error (bad URL, unusable path).
 * For sqlite it creates the file and the table if missing, and the "demo" tag
 * when create_demo is set. */
struct store *store_open(const struct config *cfg, char **cause);
void store_close(struct store *s);           /* NULL is a no-op */

/* "sqlite" or "mysql". */
const char *store_kind_name(const struct store *s);

/* Take a range for tag in one transaction:
 *   UPDATE leaf_alloc SET max_id = max_id + ? WHERE biz_tag = ?
 *   SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = ?
 * Committed (durably, for sqlite) before returning. The range handed out is
 * [*max_id - step, *max_id). *db_step is the row's step column.
 * Returns 0, 1 if the tag does not exist (nothing changed), -1 on error. */
int store_alloc(struct store *s, const char *tag, int64_t step,
                int64_t *max_id, int64_t *db_step, char **cause);

/* One row. Returns 0 found, 1 not found, -1 error. */
int store_get(struct store *s, const char *tag, struct store_row *row,
              char **cause);

/* Every row, sorted by biz_tag. *rows is malloc'd (caller frees). */
int store_list(struct store *s, struct store_row **rows, size_t *n,
               char **cause);

/* Add a row (for setup and tests): max_id, step, description. Returns 0,
 * 1 if it exists already, -1 on error. */
int store_insert(struct store *s, const char *tag, int64_t max_id, int64_t step,
                 const char *description, char **cause);

/* Parse Leaf's "jdbc:mysql://host:port/db?..." or "mysql://user:pass@host:port/db".
 * Fields are malloc'd; port defaults to 3306. Returns 0 or -1 with *cause. */
struct mysql_target {
    char *host;
    int   port;
    char *user;
    char *password;
    char *database;
    char *socket;     /* from ?socket=/path (leafd extension), or NULL */
};
int  store_parse_mysql_url(const char *url, struct mysql_target *t, char **cause);
void store_mysql_target_free(struct mysql_target *t);

#endif
