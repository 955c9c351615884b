/* store_mysql_internal.h: the MySQL segment store's connection, shared by
 * store_mysql.c (leaf_alloc: loads, rows, serial rows) and
 * store_mysql_multi.c (the multi-db tables). Both run their statements
 * through db_mysql_conn.h's steps; store_mysql.c calls into
 * store_mysql_multi.c (store_my_meta_check), never the other way. Not for
 * other modules: they use store.h and store_impl.h. */
#ifndef LEAFD_STORE_MYSQL_INTERNAL_H
#define LEAFD_STORE_MYSQL_INTERNAL_H

#include <mysql.h>
#include <stdint.h>

#include "db_mysql.h"
#include "db_mysql_conn.h"
#include "store.h"
#include "store_impl.h"

#define MY_TIMEOUT_S   5        /* when db_timeout_ms <= 0 */
#define MY_TAG_BUF     (TAG_MAX * 4 + 1)          /* varchar(128), utf8mb4 */
#define MY_DESC_BUF    (STORE_DESC_MAX * 4 + 1)   /* varchar(256), utf8mb4 */
#define MY_USER_MAX     128
#define MY_PASSWORD_MAX 256

/* What a load read of its server (store_mysql_repl.c). */
struct my_repl_state {
    long long server_id, read_only, no_tx, wsrep_state;
    char      semi[8], ready[8], wait_point[16], cluster[40], node[40];
    char      id[96];               /* the identity marks record */
};

struct store_mysql {
    struct store         base;
    struct db_mysql_conn c;     /* the connection and its statements */
    int                  repl;  /* enum db_replication; -1: a database of
                                   a set, no checks (store_mysql_repl.c) */
    long long            no_tx; /* semi-sync: no_tx before this load */
    struct my_repl_state pre;   /* semi-sync, galera: read before the
                                   UPDATE (store_my_repl_pre) */
};

/* The statements every call uses, prepared at connect (db_mysql_conn.h):
 * m->c.stmt[MY_UPDATE] is sql_update's. */
enum my_stmt {
    MY_UPDATE, MY_SELECT, MY_GET, MY_LIST, MY_INSERT, MY_NOW_MS,
    MY_INSERT_SERIAL, MY_SELECT_CHECK, MY_NSTMT
};

/* The body of a call, inside the transaction store_my_tx opened; it ends it
 * (db_mysql_conn_commit, db_mysql_conn_rollback or a failed step). */
typedef enum store_result (*my_tx_fn)(struct store_mysql *m, void *arg,
                                      char **cause);

struct store_my_call {
    struct store_mysql *m;
    my_tx_fn            body;
    void               *arg;
};

/* A body's STORE_DB_ERROR is db_mysql_conn_tx's -1 (the database failed). */
_Static_assert(STORE_DB_ERROR == -1, "db_mysql_tx_fn's failure");

static inline int
store_my_call_body(void *arg, char **cause)
{
    const struct store_my_call *k = arg;

    return (int)k->body(k->m, k->arg, cause);
}

/* One call as one transaction on m's connection (db_mysql_conn_tx: connect
 * if needed, run body, once more on a kept connection found dead at once). */
static inline enum store_result
store_my_tx(struct store_mysql *m, my_tx_fn body, void *arg, char **cause)
{
    struct store_my_call k;

    k.m = m;
    k.body = body;
    k.arg = arg;
    return (enum store_result)db_mysql_conn_tx(&m->c, store_my_call_body, &k,
                                               cause);
}

/* store_my_tx, run again after a deadlock or a Galera certification
 * conflict (db_mysql_conn_tx_retry): for loads, whose rerun is safe. */
static inline enum store_result
store_my_tx_retry(struct store_mysql *m, my_tx_fn body, void *arg,
                  char **cause)
{
    struct store_my_call k;

    k.m = m;
    k.body = body;
    k.arg = arg;
    return (enum store_result)db_mysql_conn_tx_retry(&m->c,
                                                     store_my_call_body, &k,
                                                     cause);
}

/* The member calls of a set (store_member_ops, store_mysql_member_ops in
 * store_mysql_multi.c), as store_impl.h says them; alloc_block's server
 * is MySQL's @@server_id (0: none yet). */
enum store_result store_mysql_meta_get(struct store *s, struct multi_meta *mm,
                                       char **cause);
enum store_result store_mysql_alloc_block(struct store *s,
                                          const struct multi_meta *want,
                                          const char *tag, int64_t step,
                                          int64_t floor, long long *server_id,
                                          int64_t *max_id, int64_t *db_step,
                                          char **cause);
enum store_result store_mysql_prepare_tables(struct store *s, char **cause);
enum store_result store_mysql_freeze(struct store *s, int frozen, char **cause);
enum store_result store_mysql_switch(struct store *s, const struct store_row *rows,
                                     size_t n, int64_t floor,
                                     const struct multi_meta *mm,
                                     const struct multi_member *set, int nset,
                                     char **cause);
enum store_result store_mysql_members(struct store *s, int64_t new_id,
                                      struct multi_member **rows, size_t *n,
                                      char **cause);
enum store_result store_mysql_top_push(struct store *s, int64_t db_id,
                                       int64_t top, char **cause);
enum store_result store_mysql_serial_copy(struct store *s, const char *tag,
                                          int64_t max_id, int64_t step,
                                          char **cause);
enum store_result store_mysql_serial_alloc_in_set(struct store *s,
                                                  const struct multi_meta *want,
                                                  int64_t offset_ms,
                                                  store_serial_key_fn key,
                                                  void *arg, int64_t step,
                                                  int64_t *db_ms, char *tag,
                                                  size_t cap, int64_t *max_id,
                                                  char **cause);
enum store_result store_mysql_ping(struct store *s, char **cause);

/* The set's leafd_multi_db row matches want and is not frozen
 * (store_mysql_multi.c). */
enum store_result store_my_meta_check(struct store_mysql *m,
                                      const struct multi_meta *want,
                                      struct multi_meta *got, char **cause);

/* store_mysql_repl.c (its DESIGN): inside a load's transaction, before
 * its UPDATE (semi-sync and galera: _pre, their state, while the
 * transaction holds no lock a replicated write could abort), and before
 * its COMMIT (_check: the server's identity and role as the load's SELECT
 * read them); STORE_OK, or the
 * transaction rolled back and STORE_DB_ERROR (read-only, a Galera node not
 * synced), STORE_DEGRADED (semi-sync off) or STORE_REFUSED (a failover).
 * After the COMMIT (semi-sync): STORE_OK when a replica acknowledged it,
 * else STORE_DEGRADED (the range must not be used). */
enum store_result store_my_repl_pre(struct store_mysql *m, char **cause);
enum store_result store_my_repl_check(struct store_mysql *m,
                                      long long server_id, long long read_only,
                                      char **cause);
enum store_result store_my_repl_acked(struct store_mysql *m, int64_t max_id,
                                      char **cause);
enum store_result store_my_fence_get(struct store *s, struct marks_fence *last,
                                     char *server, size_t cap, char **cause);
enum store_result store_my_fence_set(struct store *s, int64_t floor,
                                     int64_t serial_floor, int64_t *rows,
                                     char **cause);

/* Inside a single-URL node's load: refused (rolled back, STORE_DB_ERROR)
 * when the database is frozen by multi-db init or a member of a set; tag:
 * the row to lock first (NULL: locked already). store_mysql_multi.c. */
enum store_result store_my_single_check(struct store_mysql *m, const char *tag,
                                        char **cause);

/* A string parameter of *len bytes at s. */
static inline void
store_my_bind_str(MYSQL_BIND *b, const char *s, unsigned long *len)
{
    db_mysql_bind_str(b, (char *)s, *len, len);
}

#endif
