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
/* PostgreSQL by URL (key names the config key in errors): a set's member
 * (no marks' server check, no sync mode), and the one database of
 * segment.postgresql.url or a one-URI segment.postgresql.urls. */
struct store *store_pg_open_url(const struct config *cfg, const char *url,
                                const char *key, char **cause);
struct store *store_pg_open_single(const struct config *cfg, const char *url,
                                   const char *key, char **cause);

/* MySQL by URL (key names the config key in errors). */
struct store *store_mysql_open_url(const struct config *cfg, const char *url,
                                   const char *key, char **cause);
const char *store_mysql_where(const struct store *s);
/* The store is segment mode's one database (not a database of a set): its
 * loads check the server (segment.mysql.replication, store_mysql_repl.c). */
void store_mysql_single(struct store *s, const struct config *cfg);
void store_my_probe(struct store *s);

/* Several databases (store_multi.c, store_multi_init.c). Each database
 * of a set holds a leafd_multi_db row: its index in the set, the set's
 * size, the block size and the first block of the current scheme, and a
 * freeze flag; and its leafd_multi_member rows (its identity, the set's
 * members and their tops). The set calls its members through one table
 * per kind: MySQL/MariaDB's (store_mysql_multi.c, store_mysql.c) and
 * PostgreSQL's (store_pg_multi.c). Every member of a set is of one kind. */
#include "multi_block.h"             /* struct multi_meta */

#define STORE_MEMBER_ID_MAX 96       /* a member server's identity */

struct store_member_ops {
    const char *kind;                /* "mysql", "postgresql" */
    const char *key;                 /* the config key of the list */
    /* A member store of url (key names the config key in errors). */
    struct store *(*open_url)(const struct config *cfg, const char *url,
                              const char *key, char **cause);
    /* url without its password, for init's last line (malloc'd). */
    char *(*redacted)(const char *url);
    /* The leafd_multi_db row: STORE_OK, STORE_NOT_FOUND (no table or no
     * row), STORE_DB_ERROR. */
    enum store_result (*meta_get)(struct store *s, struct multi_meta *mm,
                                  char **cause);
    /* Take step IDs for tag on this database, in a block it owns, at or
     * above floor, in one transaction that first checks (in share mode)
     * that the database's meta row is want and not frozen (else
     * STORE_DB_ERROR). server (cap bytes): the identity of the server
     * expected ("": none yet); on STORE_OK the one that answered; when it
     * was set and the server has another, nothing is taken: STORE_REFUSED
     * with the new one in server. A read-only server (a standby) is
     * STORE_DB_ERROR. */
    enum store_result (*alloc_block)(struct store *s,
                                     const struct multi_meta *want,
                                     const char *tag, int64_t step,
                                     int64_t floor, char *server, size_t cap,
                                     int64_t *max_id, int64_t *db_step,
                                     char **cause);
    /* leaf_alloc, leafd_multi_db and leafd_multi_member where missing. */
    enum store_result (*prepare_tables)(struct store *s, char **cause);
    /* Set frozen (1: loads refused) on the meta row, creating it if
     * missing; a freeze returns once every load in flight has ended
     * (a set's loads, and a single node's: its single-database guard). */
    enum store_result (*freeze)(struct store *s, int frozen, char **cause);
    /* In one transaction: every row of rows present with max_id at least
     * floor (a serial row: at least its own; inserted with its step and
     * description when missing, raised otherwise), the members set[]
     * (every other member row's pos -1, tops only raised), and the meta
     * row set to mm (unfrozen). */
    enum store_result (*switch_set)(struct store *s,
                                    const struct store_row *rows, size_t n,
                                    int64_t floor, const struct multi_meta *mm,
                                    const struct multi_member *set, int nset,
                                    char **cause);
    /* The leafd_multi_member rows (none when the table is missing), after
     * giving this database the identity new_id when it has none (new_id
     * 0: read only). *rows malloc'd. */
    enum store_result (*members)(struct store *s, int64_t new_id,
                                 struct multi_member **rows, size_t *n,
                                 char **cause);
    /* Raise the recorded top of member db_id to at least top (the row
     * made when missing). */
    enum store_result (*top_push)(struct store *s, int64_t db_id, int64_t top,
                                  char **cause);
    /* A copy of a serial row of the first database in another database of
     * the set: its max_id raised to at least max_id, made with the serial
     * description when missing (a segment tag of that name is left as it
     * is). */
    enum store_result (*serial_copy)(struct store *s, const char *tag,
                                     int64_t max_id, int64_t step,
                                     char **cause);
    /* A serial's load on the first database of a set: as serial_alloc,
     * after the meta check of alloc_block in the same transaction. */
    enum store_result (*serial_alloc_in_set)(struct store *s,
                                             const struct multi_meta *want,
                                             int64_t offset_ms,
                                             store_serial_key_fn key,
                                             void *arg, int64_t step,
                                             int64_t *db_ms, char *tag,
                                             size_t cap, int64_t *max_id,
                                             char **cause);
    /* A cheap probe: connect if needed, and ping. */
    enum store_result (*ping)(struct store *s, char **cause);
};

/* Why a load refuses a member whose leafd_multi_db row (got; NULL: none)
 * is frozen or not want: *cause "<kind> <where>: ...", naming key. */
void store_meta_refusal(char **cause, const char *kind, const char *where,
                        const struct multi_meta *got,
                        const struct multi_meta *want, const char *key);

/* switch_set's arguments, as one call's body gets them. */
struct store_switch_arg {
    const struct store_row    *rows;
    size_t                     n;
    int64_t                    floor;
    const struct multi_meta   *mm;
    const struct multi_member *set;
    int                        nset;
};

extern const struct store_member_ops store_mysql_member_ops;
extern const struct store_member_ops store_pg_member_ops;

/* The member table of url's kind (store_multi_is_pg). */
const struct store_member_ops *store_member_ops_for(const char *url);

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
