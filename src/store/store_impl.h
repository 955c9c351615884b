/* store_impl.h: what store.c (the dispatcher) and the backends share.
 *
 * Internal to the store_*.c files. A backend embeds struct store as the first
 * member of its own struct and fills ops. store.c checks the arguments (tag
 * length, step, description length) before calling a backend, so backends may
 * assume them valid.
 */
#ifndef LEAFD_STORE_IMPL_H
#define LEAFD_STORE_IMPL_H

#include "store.h"

/* Which rows a list keeps: 1 to keep row. */
typedef int (*store_keep_fn)(const struct store_row *row);

/* store_list with a filter (the list op's keep), sorted as store_list. */
enum store_result store_list_keep(struct store *s, store_keep_fn keep,
                                  struct store_row **rows, size_t *n,
                                  char **cause);

#define STORE_DESC_MAX 256          /* bytes kept of description (row field) */
#define STORE_SQLITE_TIMEOUT_MS 5000 /* busy timeout when db_timeout_ms <= 0 */

struct marks_fence;

struct store_ops {
    const char *name;                /* "sqlite", "mysql" or "postgresql" */
    enum store_result (*alloc)(struct store *s, const char *tag, int64_t step,
                               int64_t *max_id, int64_t *db_step, char **cause);
    enum store_result (*get)(struct store *s, const char *tag,
                             struct store_row *row, char **cause);
    /* Every row keep accepts (every row when keep is NULL), unsorted: rows
     * keep refuses are never held, so a filter on a large table costs
     * memory for what it keeps only. */
    enum store_result (*list)(struct store *s, store_keep_fn keep,
                              struct store_row **rows, size_t *n, char **cause);
    enum store_result (*insert)(struct store *s, const char *tag, int64_t max_id,
                                int64_t step, const char *description,
                                char **cause);
    enum store_result (*serial_alloc)(struct store *s, int64_t offset_ms,
                                      store_serial_key_fn key, void *arg,
                                      int64_t step, int64_t *db_ms, char *tag,
                                      size_t cap, int64_t *max_id,
                                      char **cause);
    /* The last row of leafd_fence (id 0: none, or no such table) and
     * the identity of the server that answered ("server_id=N"); NULL:
     * the backend cannot be fenced. */
    enum store_result (*fence_get)(struct store *s, struct marks_fence *last,
                                   char *server, size_t cap, char **cause);
    /* store_fence's transaction on this store. */
    enum store_result (*fence_set)(struct store *s, int64_t floor,
                                   int64_t serial_floor, int64_t *rows,
                                   char **cause);
    void (*close)(struct store *s);
    /* Read and show the server's replication state (store_probe); NULL:
     * nothing to read. */
    void (*probe)(struct store *s);
    /* "host:port/db" for messages; NULL: the name. */
    const char *(*where)(const struct store *s);
    /* The store that holds the serial rows (a set's first database); NULL:
     * this one. */
    struct store *(*serial_home)(struct store *s);
};

struct store {
    const struct store_ops *ops;
};

/* Backend constructors: NULL with *cause on a configuration error. */
struct store *store_sqlite_open(const struct config *cfg, char **cause);
struct store *store_mysql_open(const struct config *cfg, char **cause);
struct store *store_multi_open(const struct config *cfg, char **cause);
struct store *store_pg_open(const struct config *cfg, char **cause);

/* MySQL by URL (key names the config key in errors). */
struct store *store_mysql_open_url(const struct config *cfg, const char *url,
                                   const char *key, char **cause);
const char *store_mysql_where(const struct store *s);
/* The store is segment mode's one database (not a database of a set): its
 * loads check the server (segment.mysql.replication, store_mysql_repl.c). */
void store_mysql_single(struct store *s, const struct config *cfg);
void store_my_probe(struct store *s);

/* Several databases (store_multi.c; the SQL is store_mysql.c's). Each
 * database of a set holds a leafd_multi_db row: its index in the set, the
 * set's size, the block size and the first block of the current scheme,
 * and a freeze flag. */
#include "multi_block.h"             /* struct multi_meta */
enum store_result store_mysql_meta_get(struct store *s, struct multi_meta *mm,
                                       char **cause);
/* Take step IDs for tag on this database, in a block it owns, at or above
 * floor, in one transaction that first checks (in share mode) that the
 * database's meta row is want and not frozen (else STORE_DB_ERROR). A
 * read-only server is STORE_DB_ERROR; *server_id is the server's
 * @@server_id, and when it was not 0 and the server has another, nothing
 * is taken: STORE_REFUSED with the new one in *server_id. */
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
/* leafd_multi_member: who is in the set and the highest max_id each member
 * is known to have handed out (store_multi.c's high-water marks). */
enum store_result store_mysql_members(struct store *s, int64_t new_id,
                                      struct multi_member **rows, size_t *n,
                                      char **cause);
enum store_result store_mysql_top_push(struct store *s, int64_t db_id,
                                       int64_t top, char **cause);
/* A copy of a serial row of the first database in another database of
 * the set (store_multi.c): its max_id raised to at least max_id, made
 * with the serial description when missing. Init merges the copies when
 * the first database is gone or behind. */
enum store_result store_mysql_serial_copy(struct store *s, const char *tag,
                                          int64_t max_id, int64_t step,
                                          char **cause);
/* A serial's load on the first database of a set: as serial_alloc, after
 * the meta check of store_mysql_alloc_block in the same transaction. */
enum store_result store_mysql_serial_alloc_in_set(struct store *s,
                                                  const struct multi_meta *want,
                                                  int64_t offset_ms,
                                                  store_serial_key_fn key,
                                                  void *arg, int64_t step,
                                                  int64_t *db_ms, char *tag,
                                                  size_t cap, int64_t *max_id,
                                                  char **cause);
enum store_result store_mysql_ping(struct store *s, char **cause);

/* Durability degraded (on) or restored, for /health and its log lines
 * (store_mysql_repl.c's state; the PostgreSQL store's sync mode too). */
void store_repl_degraded(int on, const char *why);
/* The PostgreSQL store's replication state for /health: its mode
 * ("async" or "sync") and the server it reaches now ("pg:<system
 * identifier>/<timeline>"); changed: a new server of the same cluster was
 * followed (sync), counted in server_changes. */
void store_repl_show_pg(const char *mode, const char *server, int changed);
void store_repl_pg_dropped(void);

/* Copy at most cap - 1 bytes of src[0, len) into dst and NUL-terminate,
 * cutting before a partial UTF-8 sequence. */
void store_copy_text(char *dst, size_t cap, const char *src, size_t len);

/* Set *cause (if cause is not NULL) to a malloc'd formatted message. */
void store_set_cause(char **cause, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A snapshot of each database of the set (store_multi.c), for the status
 * page and metrics (store_multi_state.c): how many were written to out. */
struct multi_db_status {
    char     where[160];
    char     error[256];           /* the last failure, while down */
    int      up, preferred;
    uint64_t loads, failures, failovers_to;
    int64_t  down_since_ms;        /* wall */
};
int store_multi_status(struct multi_db_status *out, int max);

#endif
