/* store_mysql.c: the segment store in MySQL/MariaDB (Leaf's own setup),
 * through MariaDB Connector/C's prepared-statement API.
 *
 * Connection rule: connect lazily on the first call; every call is one
 * explicit transaction (autocommit off) ended by COMMIT or ROLLBACK, so no
 * read snapshot outlives a call. On a database error the transaction is
 * rolled back if the connection still answers, the connection is closed and
 * the call returns -1; the next call reconnects. There is no backoff here
 * (the caller backs off). One exception: when a connection kept from an
 * earlier call turns out dead at once (server restarted, connection killed)
 * before anything was committed, the call reconnects and runs again once.
 * These steps are db_mysql_conn.c's, shared with the worker-ID store. A
 * load (store_mysql_alloc, multi-db's store_mysql_alloc_block) also runs
 * again after ER_LOCK_DEADLOCK, a deadlock or a Galera certification
 * conflict, after a short random pause (db_mysql_conn_tx_retry).
 *
 * Timeouts: MYSQL_OPT_CONNECT/READ/WRITE_TIMEOUT are db_timeout_ms rounded up
 * to whole seconds (the C API's unit), so a hung server costs a call at most
 * about that long per network wait, never forever.
 *
 * Threads: each thread using a store calls store_thread_init() first and
 * store_thread_end() before exit (db_mysql.c's thread calls). The
 * connection and its options are db_mysql_connect's.
 */
#include <mysql.h>
#include <mysqld_error.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "csprng.h"
#include "db_mysql.h"
#include "db_mysql_conn.h"
#include "log.h"
#include "store.h"
#include "store_impl.h"
#include "store_mysql_internal.h"
#include "multi_block.h"

/* Result buffers for get and list (bound to a row of sql_get/sql_list). */
struct my_rowbuf {
    char          tag[MY_TAG_BUF];
    unsigned long tag_len;
    long long     max_id;
    long long     step;
    char          desc[MY_DESC_BUF];
    unsigned long desc_len;
    my_bool       desc_null;
    MYSQL_TIME    ut;
    my_bool       ut_null;
    MYSQL_BIND    bind[5];
};

static const char sql_update[] =
    "UPDATE leaf_alloc SET max_id = max_id + ?, update_time = "
    "CURRENT_TIMESTAMP WHERE biz_tag = ? AND max_id <= ?";
static const char sql_select[] =
    "SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = ?";
static const char sql_get[] =
    "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc "
    "WHERE biz_tag = ?";
static const char sql_list[] =
    "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc "
    "ORDER BY biz_tag";
static const char sql_insert[] =
    "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
    "VALUES (?, ?, ?, ?)";

/* The server's clock in unix ms, whatever the session time zone
 * (UTC_TIMESTAMP and TIMESTAMPDIFF on DATETIMEs do no zone conversion). */
static const char sql_now_ms[] =
    "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
    "UTC_TIMESTAMP(6)) DIV 1000 + ?";
/* A single store's SELECT after its UPDATE: the row, and in the same round
 * trip the server's identity and role (store_mysql_repl.c) and whether
 * leafd_multi_db exists (store_my_single_check reads it only then). */
static const char sql_select_check[] =
    "SELECT biz_tag, max_id, step, @@GLOBAL.server_id, @@GLOBAL.read_only, "
    "(SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
    "DATABASE() AND TABLE_NAME = 'leafd_multi_db') FROM leaf_alloc "
    "WHERE biz_tag = ?";
/* A serial period's row, unless another node made it first (only a
 * duplicate key is ignored; any other error is one). */
static const char sql_insert_serial[] =
    "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
    "VALUES (?, 1, ?, '" STORE_SERIAL_DESCRIPTION "') "
    "ON DUPLICATE KEY UPDATE biz_tag = biz_tag";

/* The floor of a serial row: the largest max_id of the rows its key names
 * (STORE_SERIAL_FLOOR_MAX patterns; unused ones repeat the first), locked
 * so that no other load moves them before this one commits. */
#define MY_LIKE "biz_tag LIKE ? ESCAPE '!'"
#define MY_DEADLOCK_RETRIES 8
static const char sql_serial_floor[] =
    "SELECT COALESCE(MAX(max_id), 0) FROM leaf_alloc WHERE " MY_LIKE " OR "
    MY_LIKE " OR " MY_LIKE " OR " MY_LIKE " OR " MY_LIKE " OR " MY_LIKE " OR "
    MY_LIKE " OR " MY_LIKE " FOR UPDATE";
_Static_assert(STORE_SERIAL_FLOOR_MAX == 8, "sql_serial_floor has 8 patterns");
static const char sql_serial_raise[] =
    "UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ? AND max_id < ?";
/* A floor row marked raise, to the end of the range about to be taken
 * (its rows are locked by the floor's read). */
static const char sql_serial_raise_old[] =
    "UPDATE leaf_alloc SET max_id = GREATEST(max_id, ?) WHERE " MY_LIKE;

static const char *const my_sql[MY_NSTMT] = {
    [MY_UPDATE] = sql_update, [MY_SELECT] = sql_select, [MY_GET] = sql_get,
    [MY_LIST] = sql_list, [MY_INSERT] = sql_insert, [MY_NOW_MS] = sql_now_ms,
    [MY_INSERT_SERIAL] = sql_insert_serial, [MY_SELECT_CHECK] = sql_select_check,
};
_Static_assert(MY_NSTMT <= DB_MYSQL_CONN_STMTS, "room for the statements");

/* The store's thread calls are the MySQL library's (db_mysql.c); they are
 * harmless with SQLite. */
int
store_thread_init(void)
{
    return db_mysql_thread_init();
}

void
store_thread_end(void)
{
    db_mysql_thread_end();
}

void
store_library_end(void)
{
    db_mysql_library_end();
}

/* What a load checks besides its row (my_alloc_once's checks). */
enum {
    MY_CHECK_SINGLE = 1,    /* the database is in no multi-db set */
    MY_CHECK_REPL = 2,      /* the server (segment.mysql.replication) */
    MY_CHECK_PRE = 4,       /* and its state first (store_my_repl_pre) */
};

static enum store_result
my_alloc_once(struct store_mysql *m, const char *tag, int64_t step,
              int checks, int64_t *max_id, int64_t *db_step, char **cause)
{
    MYSQL_BIND p[3], r[6];
    long long v_step = step, v_limit = INT64_MAX - step, v_max = 0, v_dbstep = 0;
    long long v_server = 0, v_ro = 0, v_multi = 0;
    unsigned long tag_len = strlen(tag), r_tag_len = 0;
    char r_tag[MY_TAG_BUF];
    MYSQL_STMT *sel = m->c.stmt[checks ? MY_SELECT_CHECK : MY_SELECT];
    my_ulonglong changed;
    int rc;

    if ((checks & MY_CHECK_PRE) && m->repl > REPL_ASYNC) {
        enum store_result res = store_my_repl_pre(m, cause);

        if (res != STORE_OK)
            return res;
    }
    /* max_id <= INT64_MAX - step: refuse a range that would overflow. */
    db_mysql_bind_i64(&p[0], &v_step);
    store_my_bind_str(&p[1], tag, &tag_len);
    db_mysql_bind_i64(&p[2], &v_limit);
    if (db_mysql_conn_exec(&m->c, m->c.stmt[MY_UPDATE], p, NULL,
                           "UPDATE leaf_alloc", cause) == -1)
        return STORE_DB_ERROR;
    changed = mysql_stmt_affected_rows(m->c.stmt[MY_UPDATE]);

    memset(r, 0, sizeof r);
    r[0].buffer_type = MYSQL_TYPE_STRING;
    r[0].buffer = r_tag;
    r[0].buffer_length = sizeof r_tag;
    r[0].length = &r_tag_len;
    db_mysql_bind_i64(&r[1], &v_max);
    db_mysql_bind_i64(&r[2], &v_dbstep);
    db_mysql_bind_i64(&r[3], &v_server);
    db_mysql_bind_i64(&r[4], &v_ro);
    db_mysql_bind_i64(&r[5], &v_multi);
    if (db_mysql_conn_exec(&m->c, sel, p + 1, r, "SELECT leaf_alloc",
                           cause) == -1)
        return STORE_DB_ERROR;
    rc = db_mysql_conn_fetch(&m->c, sel, "SELECT leaf_alloc", cause);
    if (rc == -1)
        return STORE_DB_ERROR;
    mysql_stmt_free_result(sel);
    /* The collation may match "Demo" to "demo"; leafd's tags are exact. */
    if (rc == 1 &&
        (r_tag_len != tag_len || memcmp(r_tag, tag, tag_len) != 0)) {
        changed = 0;        /* roll back whatever the UPDATE matched */
        rc = 0;
    }

    if (changed == 0) {
        if (db_mysql_conn_rollback(&m->c, cause) == -1)
            return STORE_DB_ERROR;
        if (rc == 0)
            return STORE_NOT_FOUND;
        store_set_cause(cause, "max_id %lld of %s plus step %lld would "
                        "overflow a 64-bit integer", v_max, tag, v_step);
        *max_id = v_max;            /* so the caller can ask for what fits */
        *db_step = v_dbstep;
        return STORE_BAD_ROW;
    }
    if (rc == 1 && v_max - v_step < 1) {
        /* A negative or zero max_id: IDs below 1 would read as huge
         * unsigned numbers to some clients. */
        if (db_mysql_conn_rollback(&m->c, cause) == -1)
            return STORE_DB_ERROR;
        store_set_cause(cause, "the range of %s would start at %lld (max_id "
                        "%lld, step %lld): IDs start at 1", tag, v_max - v_step,
                        v_max - v_step, v_step);
        return STORE_BAD_ROW;
    }
    if (rc == 0) {
        if (db_mysql_conn_rollback(&m->c, cause) == -1)
            return STORE_DB_ERROR;
        store_set_cause(cause, "mysql %s: %s updated but not found",
                        m->c.where, tag);
        return STORE_DB_ERROR;
    }
    /* The row is locked by the UPDATE: multi-db init's freeze waits for
     * this transaction, so a table made after this read finds it done. */
    if ((checks & MY_CHECK_SINGLE) && v_multi > 0 &&
        store_my_single_check(m, NULL, cause) != STORE_OK)
        return STORE_DB_ERROR;      /* a set's member: store_mysql_multi.c */
    if (checks & MY_CHECK_REPL) {
        enum store_result res = store_my_repl_check(m, v_server, v_ro, cause);

        if (res != STORE_OK)
            return res;
    }
    if (db_mysql_conn_commit(&m->c, cause) == -1)
        return STORE_DB_ERROR;      /* either way the range is not used */
    if (m->repl == REPL_SEMI_SYNC) {
        enum store_result res = store_my_repl_acked(m, v_max, cause);

        if (res != STORE_OK)
            return res;
    }
    *max_id = v_max;
    *db_step = v_dbstep;
    return STORE_OK;
}

struct my_alloc_arg {
    const char *tag;
    int64_t     step;
    int64_t    *max_id, *db_step;
};

static enum store_result
my_alloc_body(struct store_mysql *m, void *arg, char **cause)
{
    const struct my_alloc_arg *a = arg;

    return my_alloc_once(m, a->tag, a->step, MY_CHECK_SINGLE |
                         (m->repl >= 0 ? MY_CHECK_REPL | MY_CHECK_PRE : 0),
                         a->max_id, a->db_step, cause);
}

static enum store_result
store_mysql_alloc(struct store *s, const char *tag, int64_t step,
                  int64_t *max_id, int64_t *db_step, char **cause)
{
    struct my_alloc_arg a = { tag, step, max_id, db_step };

    return store_my_tx_retry((struct store_mysql *)s, my_alloc_body, &a,
                             cause);
}


struct my_serial_arg {
    const struct multi_meta *want;  /* a set's first database; NULL: alone */
    int64_t             offset_ms;
    store_serial_key_fn key;
    void               *arg;
    int64_t             step;
    int64_t            *db_ms;
    char               *tag;
    size_t              cap;
    int64_t            *max_id;
};

/* The largest max_id of the rows floor names, into *v (0: none). 0, or -1
 * after db_mysql_conn_fail. */
static int
my_serial_floor(struct store_mysql *m, const struct store_serial_floor *floor,
                long long *v, char **cause)
{
    char like[STORE_SERIAL_FLOOR_MAX][STORE_LIKE_MAX];
    unsigned long len[STORE_SERIAL_FLOOR_MAX];
    MYSQL_BIND p[STORE_SERIAL_FLOOR_MAX], r[1];
    MYSQL_STMT *st;
    int rc;

    assert(floor->n >= 1 && floor->n <= STORE_SERIAL_FLOOR_MAX);
    for (int i = 0; i < STORE_SERIAL_FLOOR_MAX; i++) {
        int k = i < floor->n ? i : 0;

        store_like_pattern(floor->row[k].tag, floor->row[k].prefix, like[i]);
        len[i] = strlen(like[i]);
        store_my_bind_str(&p[i], like[i], &len[i]);
    }
    db_mysql_bind_i64(&r[0], v);
    if (db_mysql_conn_adhoc(&m->c, sql_serial_floor, p, r, &st,
                            "SELECT leaf_alloc (floor)", 0, cause) == -1)
        return -1;
    rc = db_mysql_conn_fetch(&m->c, st, "SELECT leaf_alloc (floor)", cause);
    mysql_stmt_close(st);
    if (rc == -1)
        return -1;
    if (rc == 0)
        *v = 0;
    return 0;
}

static enum store_result
my_serial_alloc_once(struct store_mysql *m, void *arg, char **cause)
{
    const struct my_serial_arg *a = arg;
    int64_t step = a->step, *db_ms = a->db_ms;
    char *tag = a->tag;
    struct store_serial_floor floor = { .n = 0 };
    MYSQL_BIND p[2], r[1];
    long long v_off = a->offset_ms, v_now = 0, v_step = step, v_floor = 0;
    unsigned long tag_len;
    int64_t db_step = 0;
    enum store_result res;
    int rc;

    if (a->want != NULL) {
        struct multi_meta mm;

        if (store_my_meta_check(m, a->want, &mm, cause) != STORE_OK)
            return STORE_DB_ERROR;
    }
    /* Semi-sync and Galera state before the row and the floor are locked
     * (my_alloc_once checks the rest before the COMMIT). */
    if (m->repl > REPL_ASYNC) {
        res = store_my_repl_pre(m, cause);
        if (res != STORE_OK)
            return res;
    }
    db_mysql_bind_i64(&p[0], &v_off);
    db_mysql_bind_i64(&r[0], &v_now);
    if (db_mysql_conn_exec(&m->c, m->c.stmt[MY_NOW_MS], p, r, "SELECT now",
                           cause) == -1)
        return STORE_DB_ERROR;
    rc = db_mysql_conn_fetch(&m->c, m->c.stmt[MY_NOW_MS], "SELECT now", cause);
    if (rc == -1)
        return STORE_DB_ERROR;
    mysql_stmt_free_result(m->c.stmt[MY_NOW_MS]);
    if (rc == 0) {
        if (db_mysql_conn_rollback(&m->c, cause) == -1)
            return STORE_DB_ERROR;
        store_set_cause(cause, "mysql %s: SELECT now gave no row", m->c.where);
        return STORE_DB_ERROR;
    }
    *db_ms = v_now;
    if (a->key(a->arg, *db_ms, tag, a->cap, &floor) == -1) {
        if (db_mysql_conn_rollback(&m->c, cause) == -1)
            return STORE_DB_ERROR;
        store_set_cause(cause, "no serial row name for database time %lld",
                        (long long)*db_ms);
        return STORE_BAD_ARG;
    }
    /* The row first: a second node making the same row waits here for the
     * first one's commit (a locking read first would let both take the gap
     * and deadlock on their INSERTs). */
    tag_len = strlen(tag);
    store_my_bind_str(&p[0], tag, &tag_len);
    db_mysql_bind_i64(&p[1], &v_step);
    if (db_mysql_conn_exec(&m->c, m->c.stmt[MY_INSERT_SERIAL], p, NULL,
                           "INSERT leaf_alloc", cause) == -1)
        return STORE_DB_ERROR;
    if (a->want == NULL && store_my_single_check(m, NULL, cause) != STORE_OK)
        return STORE_DB_ERROR;      /* alone, but a set's member */
    if (floor.n > 0 && my_serial_floor(m, &floor, &v_floor, cause) == -1)
        return STORE_DB_ERROR;
    if (floor.n > 0 && floor.mark > (v_floor > 1 ? v_floor : 1)) {
        if (db_mysql_conn_rollback(&m->c, cause) == -1)
            return STORE_DB_ERROR;
        store_set_cause(cause, STORE_SERIAL_BEHIND, m->c.where, tag,
                        v_floor > 1 ? v_floor : 1, (long long)floor.mark,
                        floor.mark_src);
        return STORE_REFUSED;
    }
    if (v_floor > 1) {
        MYSQL_BIND q[3];

        db_mysql_bind_i64(&q[0], &v_floor);
        store_my_bind_str(&q[1], tag, &tag_len);
        db_mysql_bind_i64(&q[2], &v_floor);
        if (db_mysql_conn_run(&m->c, sql_serial_raise, q,
                              "UPDATE leaf_alloc (floor)", cause) == -1)
            return STORE_DB_ERROR;
    }
    /* The floor counts the row itself, so the range will be [max(floor,
     * 1), that + step). An overflow is refused by the take. */
    assert(floor.n == 0 || floor.row[0].raise == 0);
    for (int i = 0; i < floor.n && v_floor <= INT64_MAX - step; i++) {
        char like[STORE_LIKE_MAX];
        unsigned long like_len;
        long long v_end = (v_floor > 1 ? v_floor : 1) + step;
        MYSQL_BIND q[2];

        if (!floor.row[i].raise)
            continue;
        store_like_pattern(floor.row[i].tag, floor.row[i].prefix, like);
        like_len = strlen(like);
        db_mysql_bind_i64(&q[0], &v_end);
        store_my_bind_str(&q[1], like, &like_len);
        if (db_mysql_conn_run(&m->c, sql_serial_raise_old, q,
                              "UPDATE leaf_alloc (old rows)", cause) == -1)
            return STORE_DB_ERROR;
    }
    /* A set's first database: checked above (store_my_meta_check). */
    res = my_alloc_once(m, tag, step, m->repl >= 0 ? MY_CHECK_REPL : 0,
                        a->max_id, &db_step, cause);
    if (res == STORE_NOT_FOUND) {
        /* Only a row whose tag differs in case blocks ours. */
        store_set_cause(cause, "mysql %s: the serial row %s is blocked by a "
                        "row whose biz_tag differs only in case", m->c.where,
                        tag);
        return STORE_BAD_ROW;
    }
    return res;
}

/* A serial load in its own transaction. The floor's locks can meet those
 * of a load with another reset (a rolling change); InnoDB rolls one back,
 * and it runs again after a random pause (1..20 ms times the attempt), so
 * that the two loads do not meet again in step. */
static enum store_result
my_serial_tx(struct store_mysql *m, struct my_serial_arg *a, char **cause)
{
    enum store_result r;

    for (int attempt = 0;; attempt++) {
        unsigned char rnd = 0;

        m->c.last_errno = 0;
        r = store_my_tx(m, my_serial_alloc_once, a, cause);
        if (r != STORE_DB_ERROR || m->c.last_errno != ER_LOCK_DEADLOCK ||
            attempt == MY_DEADLOCK_RETRIES)
            return r;
        if (cause != NULL) {
            free(*cause);
            *cause = NULL;
        }
        if (csprng_fill(&rnd, 1) == -1)
            rnd = 0;
        usleep((useconds_t)((1 + rnd % 20) * (attempt + 1)) * 1000);
    }
}

static enum store_result
store_mysql_serial_alloc(struct store *s, int64_t offset_ms,
                         store_serial_key_fn key, void *arg, int64_t step,
                         int64_t *db_ms, char *tag, size_t cap,
                         int64_t *max_id, char **cause)
{
    struct my_serial_arg a = { NULL, offset_ms, key, arg, step, db_ms, tag,
                               cap, max_id };

    return my_serial_tx((struct store_mysql *)s, &a, cause);
}

enum store_result
store_mysql_serial_alloc_in_set(struct store *s, const struct multi_meta *want,
                                int64_t offset_ms, store_serial_key_fn key,
                                void *arg, int64_t step, int64_t *db_ms,
                                char *tag, size_t cap, int64_t *max_id,
                                char **cause)
{
    struct my_serial_arg a = { want, offset_ms, key, arg, step, db_ms, tag,
                               cap, max_id };

    return my_serial_tx((struct store_mysql *)s, &a, cause);
}

static void
my_bind_row(struct my_rowbuf *rb)
{
    MYSQL_BIND *b = rb->bind;

    memset(b, 0, sizeof rb->bind);
    b[0].buffer_type = MYSQL_TYPE_STRING;
    b[0].buffer = rb->tag;
    b[0].buffer_length = sizeof rb->tag;
    b[0].length = &rb->tag_len;
    db_mysql_bind_i64(&b[1], &rb->max_id);
    db_mysql_bind_i64(&b[2], &rb->step);
    b[3].buffer_type = MYSQL_TYPE_STRING;
    b[3].buffer = rb->desc;
    b[3].buffer_length = sizeof rb->desc;
    b[3].length = &rb->desc_len;
    b[3].is_null = &rb->desc_null;
    b[4].buffer_type = MYSQL_TYPE_DATETIME;
    b[4].buffer = &rb->ut;
    b[4].buffer_length = sizeof rb->ut;
    b[4].is_null = &rb->ut_null;
}

/* Copy a fetched row out. Returns 0, or 1 for a tag leafd cannot serve. */
static int
my_row(const struct my_rowbuf *rb, struct store_row *row)
{
    memset(row, 0, sizeof *row);
    if (rb->tag_len == 0 || rb->tag_len > TAG_MAX)
        return 1;
    memcpy(row->biz_tag, rb->tag, rb->tag_len);
    row->max_id = rb->max_id;
    row->step = rb->step;
    if (!rb->desc_null)
        store_copy_text(row->description, sizeof row->description, rb->desc,
                        rb->desc_len < sizeof rb->desc ? rb->desc_len :
                        sizeof rb->desc);
    if (!rb->ut_null)
        snprintf(row->update_time, sizeof row->update_time,
                 "%04u-%02u-%02u %02u:%02u:%02u", rb->ut.year % 10000,
                 rb->ut.month % 100, rb->ut.day % 100, rb->ut.hour % 100,
                 rb->ut.minute % 100, rb->ut.second % 100);
    return 0;
}

struct my_get_arg {
    const char       *tag;
    struct store_row *row;
};

/* STORE_OK, STORE_NOT_FOUND or STORE_DB_ERROR (-1, 0, 1 as rc). */
static enum store_result
my_get_once(struct store_mysql *m, void *arg, char **cause)
{
    const struct my_get_arg *a = arg;
    const char *tag = a->tag;
    struct store_row *row = a->row;
    struct my_rowbuf *rb = xmalloc(sizeof *rb);
    unsigned long tag_len = strlen(tag);
    MYSQL_BIND p[1];
    int rc = -1;

    store_my_bind_str(&p[0], tag, &tag_len);
    my_bind_row(rb);
    if (db_mysql_conn_exec(&m->c, m->c.stmt[MY_GET], p, rb->bind,
                           "SELECT leaf_alloc", cause) == -1)
        goto out;
    rc = db_mysql_conn_fetch(&m->c, m->c.stmt[MY_GET], "SELECT leaf_alloc",
                             cause);
    if (rc == -1)
        goto out;
    mysql_stmt_free_result(m->c.stmt[MY_GET]);
    rc = rc == 1 && rb->tag_len == tag_len &&
        memcmp(rb->tag, tag, tag_len) == 0 && my_row(rb, row) == 0 ? 0 : 1;
    if (mysql_commit(m->c.db) != 0)
        rc = db_mysql_conn_fail(&m->c, NULL, "COMMIT", cause);
out:
    free(rb);
    return rc == 0 ? STORE_OK : rc == 1 ? STORE_NOT_FOUND : STORE_DB_ERROR;
}

static enum store_result
store_mysql_get(struct store *s, const char *tag, struct store_row *row,
                char **cause)
{
    struct my_get_arg a = { tag, row };

    return store_my_tx((struct store_mysql *)s, my_get_once, &a, cause);
}

struct my_list_arg {
    store_keep_fn      keep;
    struct store_row **rows;
    size_t            *n;
};

static enum store_result
my_list_once(struct store_mysql *m, void *arg, char **cause)
{
    const struct my_list_arg *a = arg;
    struct my_rowbuf *rb = xmalloc(sizeof *rb);
    struct store_row *v = NULL;
    size_t len = 0, cap = 0;
    int rc = -1;

    my_bind_row(rb);
    if (db_mysql_conn_exec(&m->c, m->c.stmt[MY_LIST], NULL, rb->bind,
                           "SELECT leaf_alloc", cause) == -1)
        goto out;
    while ((rc = db_mysql_conn_fetch(&m->c, m->c.stmt[MY_LIST],
                                     "SELECT leaf_alloc", cause)) == 1) {
        if (len == cap) {
            cap = cap ? cap * 2 : 16;
            v = xrealloc(v, cap * sizeof *v);
        }
        if (my_row(rb, &v[len]) == 0) {
            if (a->keep == NULL || a->keep(&v[len]))
                len++;
        } else
            log_warn("%s: skipping a biz_tag of %lu bytes (over %d)",
                     m->c.where, rb->tag_len, TAG_MAX);
    }
    if (rc == -1)
        goto out;
    mysql_stmt_free_result(m->c.stmt[MY_LIST]);
    if (mysql_commit(m->c.db) != 0) {
        rc = db_mysql_conn_fail(&m->c, NULL, "COMMIT", cause);
        goto out;
    }
    *a->rows = v;
    *a->n = len;
    v = NULL;
out:
    free(v);
    free(rb);
    return rc == -1 ? STORE_DB_ERROR : STORE_OK;
}

static enum store_result
store_mysql_list(struct store *s, store_keep_fn keep, struct store_row **rows,
                 size_t *n, char **cause)
{
    struct my_list_arg a = { keep, rows, n };

    return store_my_tx((struct store_mysql *)s, my_list_once, &a, cause);
}

struct my_insert_arg {
    const char *tag;
    int64_t     max_id, step;
    const char *description;
};

static enum store_result
my_insert_once(struct store_mysql *m, void *arg, char **cause)
{
    const struct my_insert_arg *a = arg;
    const char *tag = a->tag, *description = a->description;
    MYSQL_BIND p[4];
    long long v_max = a->max_id, v_step = a->step;
    unsigned long tag_len = strlen(tag);
    unsigned long desc_len = description != NULL ? strlen(description) : 0;
    my_bool desc_null = description == NULL;

    store_my_bind_str(&p[0], tag, &tag_len);
    db_mysql_bind_i64(&p[1], &v_max);
    db_mysql_bind_i64(&p[2], &v_step);
    store_my_bind_str(&p[3], description != NULL ? description : "", &desc_len);
    p[3].is_null = &desc_null;
    if (mysql_stmt_bind_param(m->c.stmt[MY_INSERT], p) != 0)
        return db_mysql_conn_fail(&m->c, m->c.stmt[MY_INSERT],
                                  "INSERT leaf_alloc", cause);
    if (mysql_stmt_execute(m->c.stmt[MY_INSERT]) != 0) {
        if (mysql_stmt_errno(m->c.stmt[MY_INSERT]) == ER_DUP_ENTRY)
            return db_mysql_conn_rollback(&m->c, cause) == -1 ?
                   STORE_DB_ERROR : STORE_EXISTS;
        return db_mysql_conn_fail(&m->c, m->c.stmt[MY_INSERT],
                                  "INSERT leaf_alloc", cause);
    }
    if (db_mysql_conn_commit(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

static enum store_result
store_mysql_insert(struct store *s, const char *tag, int64_t max_id,
                   int64_t step, const char *description, char **cause)
{
    struct my_insert_arg a = { tag, max_id, step, description };

    return store_my_tx((struct store_mysql *)s, my_insert_once, &a, cause);
}

static void
store_mysql_close(struct store *s)
{
    struct store_mysql *m = (struct store_mysql *)s;

    db_mysql_conn_free(&m->c);
    free(m);
}

static const struct store_ops store_mysql_ops = {
    .name = "mysql",
    .alloc = store_mysql_alloc,
    .get = store_mysql_get,
    .list = store_mysql_list,
    .insert = store_mysql_insert,
    .serial_alloc = store_mysql_serial_alloc,
    .fence_get = store_my_fence_get,
    .fence_set = store_my_fence_set,
    .probe = store_my_probe,
    .close = store_mysql_close,
    .where = store_mysql_where,
};

static int
nonempty(const char *s)
{
    return s != NULL && *s != '\0';
}

struct store *
store_mysql_open(const struct config *cfg, char **cause)
{
    struct store *s;

    if (nonempty(cfg->mysql_url))
        s = store_mysql_open_url(cfg, cfg->mysql_url, "segment.mysql.url",
                                 cause);
    else if (nonempty(cfg->jdbc_url))
        s = store_mysql_open_url(cfg, cfg->jdbc_url, "leaf.jdbc.url", cause);
    else
        s = NULL;
    if (s != NULL)
        store_mysql_single(s, cfg);
    if (s != NULL || nonempty(cfg->mysql_url) || nonempty(cfg->jdbc_url))
        return s;
    store_set_cause(cause, "segment.store is mysql but neither "
                    "leaf.jdbc.url nor segment.mysql.url is set");
    return NULL;
}

struct store *
store_mysql_open_url(const struct config *cfg, const char *url,
                     const char *key, char **cause)
{
    struct store_mysql *m;

    if (db_mysql_library_init() == -1) {
        store_set_cause(cause, "mysql_library_init failed");
        return NULL;
    }

    m = xcalloc(1, sizeof *m);
    m->base.ops = &store_mysql_ops;
    m->repl = -1;
    if (db_mysql_target_from_url(url, &m->c.t, cause) == -1) {
        char *why = cause != NULL ? *cause : NULL;
        if (cause != NULL)
            store_set_cause(cause, "%s: %s", key, why);
        free(why);
        free(m);
        return NULL;
    }
    /* Credentials: for a JDBC URL, leaf.jdbc.username/password as in Leaf
     * (else the URL's user=/password=); a mysql:// URL's own user wins and
     * these are the fallback. */
    if (nonempty(cfg->jdbc_username) &&
        (strncmp(url, "jdbc:", 5) == 0 || m->c.t.user == NULL)) {
        if (strnlen(cfg->jdbc_username, MY_USER_MAX + 1) > MY_USER_MAX ||
            (cfg->jdbc_password != NULL &&
             strnlen(cfg->jdbc_password, MY_PASSWORD_MAX + 1) >
                 MY_PASSWORD_MAX)) {
            store_set_cause(cause, "leaf.jdbc.username or password too long "
                            "(over %d/%d bytes)", MY_USER_MAX,
                            MY_PASSWORD_MAX);
            store_mysql_close(&m->base);
            return NULL;
        }
        free(m->c.t.user);
        free(m->c.t.password);
        m->c.t.user = xstrdup(cfg->jdbc_username);
        m->c.t.password = cfg->jdbc_password != NULL ?
            xstrdup(cfg->jdbc_password) : NULL;
    }
    db_mysql_conn_set_where(&m->c);
    m->c.sql = my_sql;
    m->c.nsql = MY_NSTMT;
    m->c.timeout_ms = cfg->db_timeout_ms > 0 ? cfg->db_timeout_ms :
        MY_TIMEOUT_S * 1000;
    m->c.timeout_s = (unsigned int)((m->c.timeout_ms + 999) / 1000);
    if (m->c.timeout_ms > (int64_t)86400 * 1000)
        m->c.timeout_s = 86400;
    return &m->base;
}


void
store_mysql_single(struct store *s, const struct config *cfg)
{
    ((struct store_mysql *)s)->repl = cfg->mysql_replication;
}
