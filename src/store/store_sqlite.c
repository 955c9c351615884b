/* store_sqlite.c: the embedded segment store, leaf_alloc in one SQLite file.
 *
 * Durability and exclusion: the file runs in WAL mode with synchronous=FULL,
 * so a COMMIT is on disk before store_alloc returns and no ID of a range is
 * handed out before its range is durable. store_alloc takes the write lock
 * up front (BEGIN IMMEDIATE) and waits up to db_timeout_ms for it (busy
 * timeout), so any number of connections, threads or leafd processes on one
 * file take disjoint ranges.
 *
 * Writers of one process queue (sqlite_writer_enter) before they ask
 * SQLite for the lock. SQLite's busy handler polls with growing sleeps and
 * serves no queue, so with segment.db_threads connections (and the serial
 * loader's) writing at once, one could lose every poll for db_timeout_ms on
 * a slow disk and report "database is locked": the loader then marks the
 * database down and answers 503 at once (10,000 first loads on a busy
 * machine did). SQLite lets one writer in at a time anyway; the busy timeout
 * is left to other processes on the file. The queue and the busy handler
 * share one db_timeout_ms: a write call fails after that long in all, not
 * after that long for each writer queued ahead of it (sqlite_writer_enter).
 *
 * There is nothing to reconnect: after an error the open transaction is
 * rolled back and the same handle is used again. The file is never
 * re-created behind a running server (that would restart every sequence).
 */
#include <assert.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "store.h"
#include "store_impl.h"
#include "store_marks.h"

#define SQLITE_PATH_MAX 4096

/* Must stay the same text as sql/sqlite.sql (check_store compares them). */
static const char sqlite_schema[] =
    "CREATE TABLE IF NOT EXISTS leaf_alloc (\n"
    "  biz_tag     TEXT    NOT NULL DEFAULT '' PRIMARY KEY,\n"
    "  max_id      INTEGER NOT NULL DEFAULT 1,\n"
    "  step        INTEGER NOT NULL,\n"
    "  description TEXT             DEFAULT NULL,\n"
    "  update_time TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP\n"
    ");";

struct store_sqlite {
    struct store  base;
    char         *path;
    sqlite3      *db;
    sqlite3_stmt *begin;
    sqlite3_stmt *commit;
    sqlite3_stmt *rollback;
    sqlite3_stmt *update;
    sqlite3_stmt *select;
    sqlite3_stmt *get;
    sqlite3_stmt *list;
    sqlite3_stmt *insert;
    sqlite3_stmt *now_ms;
    sqlite3_stmt *insert_serial;
    sqlite3_stmt *serial_floor;
    sqlite3_stmt *serial_raise;
    sqlite3_stmt *serial_raise_old;
    int64_t       timeout_ms;       /* db_timeout_ms: the busy timeout */
};

static const char sql_update[] =
    "UPDATE leaf_alloc SET max_id = max_id + ?1, update_time = "
    "CURRENT_TIMESTAMP WHERE biz_tag = ?2 AND max_id <= ?3";
static const char sql_select[] =
    "SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = ?1";
static const char sql_get[] =
    "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc "
    "WHERE biz_tag = ?1";
static const char sql_list[] =
    "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc "
    "ORDER BY biz_tag";
static const char sql_insert[] =
    "INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time) "
    "VALUES (?1, ?2, ?3, ?4, CURRENT_TIMESTAMP)";

/* The database's clock in unix ms: 'now' is one instant for the whole
 * statement, so the seconds and the milliseconds agree. */
static const char sql_now_ms[] =
    "SELECT CAST(strftime('%s','now') AS INTEGER) * 1000 + "
    "CAST(substr(strftime('%f','now'), 4) AS INTEGER) + ?1";
static const char sql_insert_serial[] =
    "INSERT OR IGNORE INTO leaf_alloc (biz_tag, max_id, step, description, "
    "update_time) VALUES (?1, 1, ?2, '" STORE_SERIAL_DESCRIPTION "', "
    "CURRENT_TIMESTAMP)";

/* The floor of a serial row: the largest max_id of the rows its key names
 * (STORE_SERIAL_FLOOR_MAX patterns; unused ones repeat the first). */
#define SQ_LIKE "biz_tag LIKE ? ESCAPE '!'"
static const char sql_serial_floor[] =
    "SELECT COALESCE(MAX(max_id), 0) FROM leaf_alloc WHERE "
    "typeof(max_id) = 'integer' AND (" SQ_LIKE " OR " SQ_LIKE " OR " SQ_LIKE
    " OR " SQ_LIKE " OR " SQ_LIKE " OR " SQ_LIKE " OR " SQ_LIKE " OR " SQ_LIKE
    ")";
_Static_assert(STORE_SERIAL_FLOOR_MAX == 8, "sql_serial_floor has 8 patterns");
static const char sql_serial_raise[] =
    "UPDATE leaf_alloc SET max_id = ?1 WHERE biz_tag = ?2 AND "
    "typeof(max_id) = 'integer' AND max_id < ?1";
/* A floor row marked raise, to the end of the range about to be taken. */
static const char sql_serial_raise_old[] =
    "UPDATE leaf_alloc SET max_id = MAX(max_id, ?1) WHERE " SQ_LIKE " AND "
    "typeof(max_id) = 'integer'";

static const struct store_ops sqlite_ops;

/* The queue of the process's SQLite writers (see the top of the file): a
 * writer is in while writer_busy; the others wait on writer_cv, on the
 * monotonic clock, no longer than their timeout. writer_lock is held only
 * to look at writer_busy, never across a transaction, and by no one who
 * holds another lock of this file. (pthread_mutex_clocklock would do it in
 * one call, but ThreadSanitizer does not know it.) */
static pthread_mutex_t writer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  writer_cv;
static pthread_once_t  writer_once = PTHREAD_ONCE_INIT;
static int             writer_busy;

static void
writer_init(void)
{
    pthread_condattr_t ca;

    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&writer_cv, &ca);
    pthread_condattr_destroy(&ca);
}

/* Wait for the writers ahead, then give the busy handler what is left of
 * one timeout_ms. Returns 0 when in, or -1 (cause set) once the wait in
 * the queue alone has used it all. */
static int
sqlite_writer_enter(struct store_sqlite *q, char **cause)
{
    int64_t deadline = util_mono_ms() + q->timeout_ms, left;
    struct timespec ts;

    pthread_once(&writer_once, writer_init);
    ts.tv_sec = (time_t)(deadline / 1000);
    ts.tv_nsec = (long)(deadline % 1000) * 1000000;
    pthread_mutex_lock(&writer_lock);
    while (writer_busy) {
        if (pthread_cond_timedwait(&writer_cv, &writer_lock, &ts) != 0 &&
            writer_busy) {
            pthread_mutex_unlock(&writer_lock);
            store_set_cause(cause, "sqlite %s: this process's other writers "
                            "held the file for segment.db_timeout_ms (%lld ms)",
                            q->path, (long long)q->timeout_ms);
            return -1;
        }
    }
    writer_busy = 1;
    pthread_mutex_unlock(&writer_lock);
    left = deadline - util_mono_ms();
    sqlite3_busy_timeout(q->db, (int)(left > 1 ? left : 1));
    return 0;
}

static void
sqlite_writer_leave(struct store_sqlite *q)
{
    sqlite3_busy_timeout(q->db, (int)q->timeout_ms);
    pthread_mutex_lock(&writer_lock);
    assert(writer_busy);
    writer_busy = 0;
    pthread_cond_signal(&writer_cv);
    pthread_mutex_unlock(&writer_lock);
}

static void
sqlite_rollback(struct store_sqlite *q)
{
    if (sqlite3_get_autocommit(q->db))
        return;
    if (sqlite3_step(q->rollback) != SQLITE_DONE)
        log_warn("ROLLBACK on %s: %s", q->path, sqlite3_errmsg(q->db));
    sqlite3_reset(q->rollback);
}

/* Record what failed with SQLite's own text, then reset the failed
 * statement st (may be NULL) and roll back. Returns -1. */
static int
sqlite_fail(struct store_sqlite *q, sqlite3_stmt *st, const char *what,
            char **cause)
{
    store_set_cause(cause, "sqlite %s: %s: %s", q->path, what,
                    sqlite3_errmsg(q->db));
    if (st != NULL) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    }
    sqlite_rollback(q);
    return -1;
}

/* Run a statement that returns no rows (BEGIN, COMMIT, ...). */
static int
sqlite_run(struct store_sqlite *q, sqlite3_stmt *st, const char *what,
           char **cause)
{
    if (sqlite3_step(st) != SQLITE_DONE)
        return sqlite_fail(q, st, what, cause);
    sqlite3_reset(st);
    return 0;
}

static int
sqlite_bind_tag(sqlite3_stmt *st, int i, const char *tag)
{
    return sqlite3_bind_text(st, i, tag, (int)strlen(tag), SQLITE_STATIC);
}

/* The body of an allocation, inside a transaction it commits or rolls
 * back. */
static enum store_result
sqlite_alloc_tx(struct store_sqlite *q, const char *tag, int64_t step,
                int64_t *max_id, int64_t *db_step, char **cause)
{
    int rc, changes, found = 0;
    int64_t got_max = 0, got_step = 0;

    /* The max_id guard refuses a range that would pass INT64_MAX (SQLite
     * would silently turn the sum into a REAL). */
    sqlite3_bind_int64(q->update, 1, step);
    sqlite_bind_tag(q->update, 2, tag);
    sqlite3_bind_int64(q->update, 3, INT64_MAX - step);
    if (sqlite3_step(q->update) != SQLITE_DONE)
        return sqlite_fail(q, q->update, "UPDATE leaf_alloc", cause);
    changes = sqlite3_changes(q->db);
    sqlite3_reset(q->update);
    sqlite3_clear_bindings(q->update);

    sqlite_bind_tag(q->select, 1, tag);
    rc = sqlite3_step(q->select);
    if (rc == SQLITE_ROW) {
        found = 1;
        if (sqlite3_column_type(q->select, 1) != SQLITE_INTEGER ||
            sqlite3_column_type(q->select, 2) != SQLITE_INTEGER) {
            sqlite3_reset(q->select);
            sqlite3_clear_bindings(q->select);
            sqlite_rollback(q);
            store_set_cause(cause, "max_id or step of %s is not an integer "
                            "(sqlite %s)", tag, q->path);
            return STORE_BAD_ROW;   /* this row; the database is fine */
        }
        got_max = sqlite3_column_int64(q->select, 1);
        got_step = sqlite3_column_int64(q->select, 2);
    } else if (rc != SQLITE_DONE) {
        return sqlite_fail(q, q->select, "SELECT leaf_alloc", cause);
    }
    sqlite3_reset(q->select);
    sqlite3_clear_bindings(q->select);

    if (changes == 0) {
        sqlite_rollback(q);
        if (!found)
            return STORE_NOT_FOUND;
        store_set_cause(cause, "max_id %lld of %s plus step %lld would "
                        "overflow a 64-bit integer", (long long)got_max, tag,
                        (long long)step);
        *max_id = got_max;          /* so the caller can ask for what fits */
        *db_step = got_step;
        return STORE_BAD_ROW;
    }
    if (got_max - step < 1) {
        /* A negative or zero max_id: IDs below 1 would read as huge
         * unsigned numbers to some clients. */
        sqlite_rollback(q);
        store_set_cause(cause, "the range of %s would start at %lld (max_id "
                        "%lld, step %lld): IDs start at 1", tag,
                        (long long)(got_max - step), (long long)(got_max - step),
                        (long long)step);
        return STORE_BAD_ROW;
    }
    if (!found) {
        sqlite_rollback(q);
        store_set_cause(cause, "sqlite %s: %s updated but not found",
                        q->path, tag);
        return STORE_DB_ERROR;
    }
    if (sqlite_run(q, q->commit, "COMMIT", cause) == -1)
        return STORE_DB_ERROR;
    *max_id = got_max;
    *db_step = got_step;
    return STORE_OK;
}

static enum store_result
sqlite_alloc(struct store *s, const char *tag, int64_t step, int64_t *max_id,
             int64_t *db_step, char **cause)
{
    struct store_sqlite *q = (struct store_sqlite *)s;
    enum store_result r = STORE_DB_ERROR;

    if (sqlite_writer_enter(q, cause) == -1)
        return STORE_DB_ERROR;
    if (sqlite_run(q, q->begin, "BEGIN IMMEDIATE", cause) == 0)
        r = sqlite_alloc_tx(q, tag, step, max_id, db_step, cause);
    sqlite_writer_leave(q);
    return r;
}

/* In the writers' queue (sqlite_writer_enter). */
static enum store_result
do_sqlite_serial_alloc(struct store *s, int64_t offset_ms, store_serial_key_fn key,
                       void *arg, int64_t step, int64_t *db_ms, char *tag,
                       size_t cap, int64_t *max_id, char **cause)
{
    struct store_sqlite *q = (struct store_sqlite *)s;
    struct store_serial_floor floor = { .n = 0 };
    char like[STORE_LIKE_MAX];
    int64_t db_step = 0, low = 0;
    enum store_result r;

    if (sqlite_run(q, q->begin, "BEGIN IMMEDIATE", cause) == -1)
        return STORE_DB_ERROR;
    sqlite3_bind_int64(q->now_ms, 1, offset_ms);
    if (sqlite3_step(q->now_ms) != SQLITE_ROW)
        return sqlite_fail(q, q->now_ms, "SELECT now", cause);
    *db_ms = sqlite3_column_int64(q->now_ms, 0);
    sqlite3_reset(q->now_ms);
    sqlite3_clear_bindings(q->now_ms);
    if (key(arg, *db_ms, tag, cap, &floor) == -1) {
        sqlite_rollback(q);
        store_set_cause(cause, "no serial row name for database time %lld",
                        (long long)*db_ms);
        return STORE_BAD_ARG;
    }
    assert(floor.n >= 0 && floor.n <= STORE_SERIAL_FLOOR_MAX);
    for (int i = 0; i < STORE_SERIAL_FLOOR_MAX && floor.n > 0; i++) {
        int k = i < floor.n ? i : 0;

        store_like_pattern(floor.row[k].tag, floor.row[k].prefix, like);
        sqlite3_bind_text(q->serial_floor, i + 1, like, -1, SQLITE_TRANSIENT);
    }
    if (floor.n > 0) {
        if (sqlite3_step(q->serial_floor) != SQLITE_ROW)
            return sqlite_fail(q, q->serial_floor, "SELECT leaf_alloc (floor)",
                               cause);
        low = sqlite3_column_int64(q->serial_floor, 0);
        sqlite3_reset(q->serial_floor);
        sqlite3_clear_bindings(q->serial_floor);
    }
    if (floor.n > 0 && floor.mark > (low > 1 ? low : 1)) {
        sqlite_rollback(q);
        store_set_cause(cause, STORE_SERIAL_BEHIND, q->path, tag,
                        (long long)(low > 1 ? low : 1), (long long)floor.mark,
                        floor.mark_src);
        return STORE_REFUSED;
    }
    sqlite_bind_tag(q->insert_serial, 1, tag);
    sqlite3_bind_int64(q->insert_serial, 2, step);
    if (sqlite3_step(q->insert_serial) != SQLITE_DONE)
        return sqlite_fail(q, q->insert_serial, "INSERT OR IGNORE leaf_alloc",
                           cause);
    sqlite3_reset(q->insert_serial);
    sqlite3_clear_bindings(q->insert_serial);
    if (low > 1) {
        sqlite3_bind_int64(q->serial_raise, 1, low);
        sqlite_bind_tag(q->serial_raise, 2, tag);
        if (sqlite_run(q, q->serial_raise, "UPDATE leaf_alloc (floor)",
                       cause) == -1)
            return STORE_DB_ERROR;
        sqlite3_clear_bindings(q->serial_raise);
    }
    /* The floor counts the row itself (its shape and period come first),
     * so the range will be [max(low, 1), that + step); the write lock is
     * held to the commit. An overflow is refused by the take. */
    assert(floor.n == 0 || floor.row[0].raise == 0);
    for (int i = 0; i < floor.n && low <= INT64_MAX - step; i++) {
        if (!floor.row[i].raise)
            continue;
        store_like_pattern(floor.row[i].tag, floor.row[i].prefix, like);
        sqlite3_bind_int64(q->serial_raise_old, 1, (low > 1 ? low : 1) + step);
        sqlite3_bind_text(q->serial_raise_old, 2, like, -1, SQLITE_TRANSIENT);
        if (sqlite_run(q, q->serial_raise_old, "UPDATE leaf_alloc (old rows)",
                       cause) == -1)
            return STORE_DB_ERROR;
        sqlite3_clear_bindings(q->serial_raise_old);
    }
    r = sqlite_alloc_tx(q, tag, step, max_id, &db_step, cause);
    if (r == STORE_NOT_FOUND) {
        store_set_cause(cause, "sqlite %s: %s inserted but not found", q->path,
                        tag);
        return STORE_DB_ERROR;
    }
    return r;
}

static enum store_result
sqlite_serial_alloc(struct store *s, int64_t offset_ms, store_serial_key_fn key,
                    void *arg, int64_t step, int64_t *db_ms, char *tag,
                    size_t cap, int64_t *max_id, char **cause)
{
    struct store_sqlite *q = (struct store_sqlite *)s;
    enum store_result r;

    if (sqlite_writer_enter(q, cause) == -1)
        return STORE_DB_ERROR;
    r = do_sqlite_serial_alloc(s, offset_ms, key, arg, step, db_ms, tag, cap,
                               max_id, cause);
    sqlite_writer_leave(q);
    return r;
}

/* Fill row from a get/list statement positioned on a row. Returns 0, or 1 to
 * skip a row leafd cannot serve (tag too long). */
static int
sqlite_row(sqlite3_stmt *st, struct store_row *row)
{
    const unsigned char *tag = sqlite3_column_text(st, 0);
    int tag_len = sqlite3_column_bytes(st, 0);
    const unsigned char *desc, *ut;

    memset(row, 0, sizeof *row);
    if (tag == NULL || tag_len <= 0 || tag_len > TAG_MAX)
        return 1;
    memcpy(row->biz_tag, tag, (size_t)tag_len);
    row->max_id = sqlite3_column_int64(st, 1);
    row->step = sqlite3_column_int64(st, 2);
    desc = sqlite3_column_text(st, 3);
    if (desc != NULL)
        store_copy_text(row->description, sizeof row->description,
                        (const char *)desc, (size_t)sqlite3_column_bytes(st, 3));
    ut = sqlite3_column_text(st, 4);
    if (ut != NULL)
        store_copy_text(row->update_time, sizeof row->update_time,
                        (const char *)ut, (size_t)sqlite3_column_bytes(st, 4));
    return 0;
}

static enum store_result
sqlite_get(struct store *s, const char *tag, struct store_row *row,
           char **cause)
{
    struct store_sqlite *q = (struct store_sqlite *)s;
    int rc, ret = 1;

    sqlite_bind_tag(q->get, 1, tag);
    rc = sqlite3_step(q->get);
    if (rc == SQLITE_ROW)
        ret = sqlite_row(q->get, row) == 0 ? 0 : 1;
    else if (rc != SQLITE_DONE)
        return sqlite_fail(q, q->get, "SELECT leaf_alloc", cause);
    sqlite3_reset(q->get);
    sqlite3_clear_bindings(q->get);
    return ret;
}

static enum store_result
sqlite_list(struct store *s, store_keep_fn keep, struct store_row **rows,
            size_t *n, char **cause)
{
    struct store_sqlite *q = (struct store_sqlite *)s;
    struct store_row *v = NULL;
    size_t len = 0, cap = 0;
    int rc;

    while ((rc = sqlite3_step(q->list)) == SQLITE_ROW) {
        if (len == cap) {
            cap = cap ? cap * 2 : 16;
            v = xrealloc(v, cap * sizeof *v);
        }
        if (sqlite_row(q->list, &v[len]) == 0) {
            if (keep == NULL || keep(&v[len]))
                len++;
        } else
            log_warn("%s: skipping a biz_tag of %d bytes (over %d)", q->path,
                     sqlite3_column_bytes(q->list, 0), TAG_MAX);
    }
    if (rc != SQLITE_DONE) {
        free(v);
        return sqlite_fail(q, q->list, "SELECT leaf_alloc", cause);
    }
    sqlite3_reset(q->list);
    *rows = v;
    *n = len;
    return STORE_OK;
}

static enum store_result
sqlite_insert(struct store *s, const char *tag, int64_t max_id, int64_t step,
              const char *description, char **cause)
{
    struct store_sqlite *q = (struct store_sqlite *)s;
    int rc;

    sqlite_bind_tag(q->insert, 1, tag);
    sqlite3_bind_int64(q->insert, 2, max_id);
    sqlite3_bind_int64(q->insert, 3, step);
    if (description != NULL)
        sqlite3_bind_text(q->insert, 4, description, (int)strlen(description),
                          SQLITE_STATIC);
    else
        sqlite3_bind_null(q->insert, 4);
    if (sqlite_writer_enter(q, cause) == -1)
        return STORE_DB_ERROR;
    rc = sqlite3_step(q->insert);
    sqlite_writer_leave(q);
    if (rc != SQLITE_DONE && rc != SQLITE_CONSTRAINT_PRIMARYKEY)
        return sqlite_fail(q, q->insert, "INSERT leaf_alloc", cause);
    sqlite3_reset(q->insert);
    sqlite3_clear_bindings(q->insert);
    return rc == SQLITE_DONE ? STORE_OK : STORE_EXISTS;
}

/* ---- leafd db-fence (store.h) ---- */

static const char sql_fence_ddl[] =
    "CREATE TABLE IF NOT EXISTS leafd_fence (id INTEGER PRIMARY KEY, "
    "floor INTEGER NOT NULL, serial_floor INTEGER NOT NULL, "
    "server TEXT NOT NULL, fenced_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)";

/* One ad hoc statement with up to two integer parameters, stepped once:
 * its first column into *v when it gives a row. SQLITE_OK, or SQLite's
 * error code with *cause set. */
static int
sqlite_adhoc(struct store_sqlite *q, const char *sql, int64_t a, int64_t b,
             int64_t *v, int *changes, char **cause)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(q->db, sql, -1, &st, NULL);

    if (rc != SQLITE_OK) {
        store_set_cause(cause, "sqlite %s: prepare \"%.40s\": %s", q->path,
                        sql, sqlite3_errmsg(q->db));
        return rc;
    }
    if (sqlite3_bind_parameter_count(st) >= 1)
        sqlite3_bind_int64(st, 1, a);
    if (sqlite3_bind_parameter_count(st) >= 2)
        sqlite3_bind_int64(st, 2, b);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && v != NULL)
        *v = sqlite3_column_int64(st, 0);
    if (changes != NULL)
        *changes = sqlite3_changes(q->db);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        rc = SQLITE_OK;
    else
        store_set_cause(cause, "sqlite %s: \"%.40s\": %s", q->path, sql,
                        sqlite3_errmsg(q->db));
    sqlite3_finalize(st);
    return rc;
}

static enum store_result
sqlite_fence_get(struct store *s, struct marks_fence *last, char *server,
                 size_t cap, char **cause)
{
    struct store_sqlite *q = (struct store_sqlite *)s;
    sqlite3_stmt *st;
    int rc;

    memset(last, 0, sizeof *last);
    snprintf(server, cap, "sqlite:%s", q->path);
    rc = sqlite3_prepare_v2(q->db, "SELECT id, floor, serial_floor, server "
                            "FROM leafd_fence ORDER BY id DESC LIMIT 1", -1,
                            &st, NULL);
    if (rc != SQLITE_OK) {
        /* No table: never fenced. */
        if (strstr(sqlite3_errmsg(q->db), "no such table") != NULL)
            return STORE_OK;
        store_set_cause(cause, "sqlite %s: SELECT leafd_fence: %s", q->path,
                        sqlite3_errmsg(q->db));
        return STORE_DB_ERROR;
    }
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *srv = sqlite3_column_text(st, 3);

        last->id = sqlite3_column_int64(st, 0);
        last->floor = sqlite3_column_int64(st, 1);
        last->serial_floor = sqlite3_column_int64(st, 2);
        snprintf(last->server, sizeof last->server, "%s",
                 srv != NULL ? (const char *)srv : "");
    } else if (rc != SQLITE_DONE) {
        store_set_cause(cause, "sqlite %s: SELECT leafd_fence: %s", q->path,
                        sqlite3_errmsg(q->db));
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : STORE_DB_ERROR;
}

static enum store_result
sqlite_fence_set(struct store *s, int64_t floor, int64_t serial_floor,
                 int64_t *rows, char **cause)
{
    struct store_sqlite *q = (struct store_sqlite *)s;
    char server[TAG_MAX + SQLITE_PATH_MAX];
    int64_t serial_rows = 0;
    int n = 0, ok;
    sqlite3_stmt *st;

    snprintf(server, sizeof server, "sqlite:%s", q->path);
    if (sqlite_writer_enter(q, cause) == -1)
        return STORE_DB_ERROR;
    ok = sqlite_run(q, q->begin, "BEGIN IMMEDIATE", cause) == 0 &&
        sqlite_adhoc(q, sql_fence_ddl, 0, 0, NULL, NULL, cause) == SQLITE_OK &&
        sqlite_adhoc(q, "SELECT COUNT(*) FROM leaf_alloc WHERE description = '"
                     STORE_SERIAL_DESCRIPTION "'", 0, 0, &serial_rows, NULL,
                     cause) == SQLITE_OK;
    if (ok && serial_floor == 0 && serial_rows > 0) {
        store_set_cause(cause, "sqlite %s holds %lld serial rows: give "
                        "--serial-floor=S too, S above the largest "
                        "serial_marks_max of the nodes' /health", q->path,
                        (long long)serial_rows);
        sqlite_rollback(q);
        sqlite_writer_leave(q);
        return STORE_BAD_ARG;
    }
    ok = ok &&
        sqlite_adhoc(q, "UPDATE leaf_alloc SET max_id = ?1 WHERE max_id < ?1 "
                     "AND typeof(max_id) = 'integer' AND (description IS NULL "
                     "OR description <> '" STORE_SERIAL_DESCRIPTION "')",
                     floor, 0, NULL, &n, cause) == SQLITE_OK;
    *rows = n;
    if (ok && serial_floor > 0) {
        ok = sqlite_adhoc(q, "UPDATE leaf_alloc SET max_id = ?1 WHERE "
                          "max_id < ?1 AND typeof(max_id) = 'integer' AND "
                          "description = '" STORE_SERIAL_DESCRIPTION "'",
                          serial_floor, 0, NULL, &n, cause) == SQLITE_OK;
        *rows += n;
    }
    if (ok) {
        ok = sqlite3_prepare_v2(q->db, "INSERT INTO leafd_fence (floor, "
                                "serial_floor, server) VALUES (?1, ?2, ?3)",
                                -1, &st, NULL) == SQLITE_OK;
        if (ok) {
            sqlite3_bind_int64(st, 1, floor);
            sqlite3_bind_int64(st, 2, serial_floor);
            sqlite3_bind_text(st, 3, server, (int)strlen(server), SQLITE_STATIC);
            ok = sqlite3_step(st) == SQLITE_DONE;
            sqlite3_finalize(st);
        }
        if (!ok)
            store_set_cause(cause, "sqlite %s: INSERT leafd_fence: %s", q->path,
                            sqlite3_errmsg(q->db));
    }
    if (ok)
        ok = sqlite_run(q, q->commit, "COMMIT", cause) == 0;
    else
        sqlite_rollback(q);
    sqlite_writer_leave(q);
    return ok ? STORE_OK : STORE_DB_ERROR;
}

static void
sqlite_close(struct store *s)
{
    struct store_sqlite *q = (struct store_sqlite *)s;
    sqlite3_stmt *all[] = { q->begin, q->commit, q->rollback, q->update,
                            q->select, q->get, q->list, q->insert,
                            q->now_ms, q->insert_serial, q->serial_floor,
                            q->serial_raise, q->serial_raise_old };

    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sqlite3_finalize(all[i]);       /* NULL is a no-op */
    if (q->db != NULL && sqlite3_close(q->db) != SQLITE_OK)
        log_warn("sqlite3_close %s: %s", q->path, sqlite3_errmsg(q->db));
    free(q->path);
    free(q);
}

/* Run one PRAGMA and return its first column (malloc'd) or NULL. Setting
 * journal_mode does not wait on the busy handler, so a lock held by another
 * connection opening the same new file is waited out here, up to timeout. */
static char *
sqlite_pragma(struct store_sqlite *q, const char *sql, int64_t timeout_ms,
              char **cause)
{
    int64_t deadline = util_mono_ms() + timeout_ms;
    sqlite3_stmt *st;
    char *val = NULL;
    int rc;

    for (;;) {
        if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK) {
            store_set_cause(cause, "sqlite %s: %s: %s", q->path, sql,
                            sqlite3_errmsg(q->db));
            return NULL;
        }
        rc = sqlite3_step(st);
        if (((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) ||
            util_mono_ms() >= deadline)
            break;
        sqlite3_finalize(st);
        usleep(10000);
    }
    if (rc == SQLITE_ROW && sqlite3_column_text(st, 0) != NULL)
        val = xstrdup((const char *)sqlite3_column_text(st, 0));
    else if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        val = xstrdup("");
    else
        store_set_cause(cause, "sqlite %s: %s: %s", q->path, sql,
                        sqlite3_errmsg(q->db));
    sqlite3_finalize(st);
    return val;
}

static int
sqlite_prepare(struct store_sqlite *q, const char *sql, sqlite3_stmt **st,
               char **cause)
{
    if (sqlite3_prepare_v3(q->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st,
                           NULL) != SQLITE_OK) {
        store_set_cause(cause, "sqlite %s: prepare \"%s\": %s", q->path, sql,
                        sqlite3_errmsg(q->db));
        return -1;
    }
    return 0;
}

/* Create the table (and demo) if missing, under the write lock. */
static int
sqlite_setup(struct store_sqlite *q, int create_demo, char **cause)
{
    char *err = NULL;

    if (sqlite3_exec(q->db, "BEGIN IMMEDIATE", NULL, NULL, &err) !=
            SQLITE_OK ||
        sqlite3_exec(q->db, sqlite_schema, NULL, NULL, &err) != SQLITE_OK ||
        (create_demo &&
         sqlite3_exec(q->db, "INSERT OR IGNORE INTO leaf_alloc (biz_tag, "
                      "max_id, step, description) VALUES ('demo', 1, 1000, "
                      "'leafd demo tag')", NULL, NULL, &err) != SQLITE_OK) ||
        sqlite3_exec(q->db, "COMMIT", NULL, NULL, &err) != SQLITE_OK) {
        store_set_cause(cause, "sqlite %s: creating leaf_alloc: %s", q->path,
                        err != NULL ? err : sqlite3_errmsg(q->db));
        sqlite3_free(err);
        if (!sqlite3_get_autocommit(q->db))
            sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

struct store *
store_sqlite_open(const struct config *cfg, char **cause)
{
    struct store_sqlite *q;
    char *mode;
    int rc;
    int64_t timeout = cfg->db_timeout_ms > 0 ? cfg->db_timeout_ms :
        STORE_SQLITE_TIMEOUT_MS;

    if (cfg->sqlite_path == NULL || *cfg->sqlite_path == '\0') {
        store_set_cause(cause, "segment.sqlite.path is empty");
        return NULL;
    }
    if (strnlen(cfg->sqlite_path, SQLITE_PATH_MAX + 1) > SQLITE_PATH_MAX) {
        store_set_cause(cause, "segment.sqlite.path longer than %d bytes",
                        SQLITE_PATH_MAX);
        return NULL;
    }
    if (timeout > INT32_MAX)
        timeout = INT32_MAX;

    q = xcalloc(1, sizeof *q);
    q->base.ops = &sqlite_ops;
    q->path = xstrdup(cfg->sqlite_path);
    rc = sqlite3_open_v2(q->path, &q->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        store_set_cause(cause, "sqlite %s: open: %s", q->path,
                        q->db != NULL ? sqlite3_errmsg(q->db) :
                        sqlite3_errstr(rc));
        goto error;
    }
    sqlite3_extended_result_codes(q->db, 1);
    sqlite3_busy_timeout(q->db, (int)timeout);
    q->timeout_ms = timeout;
    /* leaf_alloc is small and read whole only on a refresh: a 256 KiB page
     * cache per connection keeps the footprint down (default is 2 MiB). */
    sqlite3_exec(q->db, "PRAGMA cache_size=-256", NULL, NULL, NULL);

    if ((mode = sqlite_pragma(q, "PRAGMA journal_mode=WAL", timeout,
                              cause)) == NULL)
        goto error;
    if (strcmp(mode, "wal") != 0)
        log_warn("%s: journal_mode is %s, not wal (the file system may not "
                 "support it)", q->path, mode);
    free(mode);
    if ((mode = sqlite_pragma(q, "PRAGMA synchronous=FULL", timeout,
                              cause)) == NULL)
        goto error;
    free(mode);

    if (sqlite_setup(q, cfg->create_demo, cause) == -1)
        goto error;

    if (sqlite_prepare(q, "BEGIN IMMEDIATE", &q->begin, cause) == -1 ||
        sqlite_prepare(q, "COMMIT", &q->commit, cause) == -1 ||
        sqlite_prepare(q, "ROLLBACK", &q->rollback, cause) == -1 ||
        sqlite_prepare(q, sql_update, &q->update, cause) == -1 ||
        sqlite_prepare(q, sql_select, &q->select, cause) == -1 ||
        sqlite_prepare(q, sql_get, &q->get, cause) == -1 ||
        sqlite_prepare(q, sql_list, &q->list, cause) == -1 ||
        sqlite_prepare(q, sql_insert, &q->insert, cause) == -1 ||
        sqlite_prepare(q, sql_now_ms, &q->now_ms, cause) == -1 ||
        sqlite_prepare(q, sql_insert_serial, &q->insert_serial, cause) == -1 ||
        sqlite_prepare(q, sql_serial_floor, &q->serial_floor, cause) == -1 ||
        sqlite_prepare(q, sql_serial_raise, &q->serial_raise, cause) == -1 ||
        sqlite_prepare(q, sql_serial_raise_old, &q->serial_raise_old,
                       cause) == -1)
        goto error;
    return &q->base;

error:
    sqlite_close(&q->base);
    return NULL;
}

static const struct store_ops sqlite_ops = {
    .name = "sqlite",
    .alloc = sqlite_alloc,
    .get = sqlite_get,
    .list = sqlite_list,
    .insert = sqlite_insert,
    .serial_alloc = sqlite_serial_alloc,
    .fence_get = sqlite_fence_get,
    .fence_set = sqlite_fence_set,
    .close = sqlite_close,
};
