/* store_pg_multi.c: the PostgreSQL side of several databases
 * (store_multi.c, store_multi_init.c; store_pg_member_ops): the
 * leafd_multi_db and leafd_multi_member tables, block loads checked
 * against them, the freeze and switch of `leafd multi-db init`, the
 * members' tops and the serial rows' copies; the same calls as
 * store_mysql_multi.c, in PostgreSQL's form. Each call is one transaction
 * on the store's connection (store_pg_internal.h), through db_pg.h.
 *
 * What differs from MySQL:
 * - A failed statement aborts its transaction, so a table that may be
 *   missing is looked up first (to_regclass) where the call goes on
 *   without it; inside a load, a missing leafd_multi_db fails the load.
 * - Upserts are INSERT ... ON CONFLICT; share locks FOR SHARE.
 * - The freeze writes the frozen row, then takes LOCK TABLE leaf_alloc IN
 *   SHARE MODE before its commit: that waits for every transaction that
 *   changed a leaf_alloc row (a set's loads, which hold the meta row FOR
 *   SHARE first, are waited for by the row's write; a single node's
 *   loads, which read it without a lock after their UPDATE, by the table
 *   lock: store_pg.c's pg_single_check), so what init reads after the
 *   freeze includes every load that did not see it.
 * - A member's server identity is "pg:<system identifier>/<timeline>",
 *   read at each connect (store_pg.c): a promoted standby (same system
 *   identifier, new timeline) or another cluster behind the address is a
 *   new server, and the set keeps that member out of loads until
 *   multi-db init (store_multi.c: multi_alloc_on). A standby is refused
 *   at connect, as the database down.
 * - A hung member: every statement has leafd's own deadline (db_pg.h:
 *   the socket polled for segment.db_timeout_ms, the connection closed
 *   without an answer), a commit's wait included, so a load on a hung
 *   member fails and moves to the next one.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_pg.h"
#include "log.h"
#include "multi_block.h"
#include "store.h"
#include "store_impl.h"
#include "store_pg_internal.h"
#include "util.h"

static const char sql_alloc_ddl[] =
    "CREATE TABLE IF NOT EXISTS leaf_alloc ("
    " biz_tag varchar(128) NOT NULL DEFAULT '',"
    " max_id bigint NOT NULL DEFAULT 1,"
    " step integer NOT NULL,"
    " description varchar(256) DEFAULT NULL,"
    " update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,"
    " PRIMARY KEY (biz_tag))";
static const char sql_meta_ddl[] =
    "CREATE TABLE IF NOT EXISTS leafd_multi_db ("
    " id smallint NOT NULL DEFAULT 1,"
    " db_index integer NOT NULL, db_count integer NOT NULL,"
    " block_size bigint NOT NULL, since_block bigint NOT NULL,"
    " frozen smallint NOT NULL DEFAULT 0,"
    " update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,"
    " PRIMARY KEY (id))";
static const char sql_member_ddl[] =
    "CREATE TABLE IF NOT EXISTS leafd_multi_member ("
    " db_id bigint NOT NULL, self smallint NOT NULL DEFAULT 0,"
    " pos integer NOT NULL DEFAULT -1,"
    " location varchar(255) NOT NULL DEFAULT '',"
    " top bigint NOT NULL DEFAULT 0,"
    " update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,"
    " PRIMARY KEY (db_id))";

#define PG_META_COLS "SELECT db_index, db_count, block_size, since_block, " \
    "frozen FROM leafd_multi_db WHERE id = 1"

static int
pg_begin(struct store_pg *p, char **cause)
{
    return db_pg_conn_run(&p->c, -1, "BEGIN", 0, NULL, "BEGIN", cause);
}

static int
pg_commit(struct store_pg *p, char **cause)
{
    return db_pg_conn_run(&p->c, -1, "COMMIT", 0, NULL, "COMMIT", cause);
}

/* 1 when table exists, 0 when not, -1 on failure. */
static int
pg_has_table(struct store_pg *p, const char *table, char **cause)
{
    const char *v[1] = { table };
    PGresult *r = db_pg_conn_exec(&p->c, -1, "SELECT to_regclass($1) IS NOT "
                                  "NULL", 1, v, "SELECT to_regclass", NULL,
                                  cause);
    int has;

    if (r == NULL)
        return -1;
    has = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    return has;
}

/* The meta row (lock: FOR SHARE): 1 found, 0 no row (or no table when
 * missing_ok; else a missing table fails, the transaction aborted and
 * rolled back), -1 failure (the connection closed). */
static int
pg_meta_read(struct store_pg *p, struct multi_meta *mm, int lock,
             char **cause)
{
    PGresult *r;
    int64_t v[5] = { 0 };

    r = db_pg_conn_exec(&p->c, -1, lock ? PG_META_COLS " FOR SHARE" :
                        PG_META_COLS, 0, NULL, "SELECT leafd_multi_db",
                        "42P01", cause);
    if (r == NULL && strcmp(p->c.sqlstate, "42P01") == 0 && p->c.db != NULL) {
        if (cause != NULL) {            /* no table: an answer */
            free(*cause);
            *cause = NULL;
        }
        if (db_pg_conn_run(&p->c, -1, "ROLLBACK", 0, NULL, "ROLLBACK",
                           cause) == -1)
            return -1;
        return 0;
    }
    if (r == NULL)
        return -1;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return 0;
    }
    for (int i = 0; i < 5; i++)
        if (db_pg_i64(r, 0, i, &v[i]) == -1) {
            PQclear(r);
            return db_pg_conn_fail(&p->c, "SELECT leafd_multi_db",
                                   "a row leafd cannot read", cause);
        }
    PQclear(r);
    mm->db_index = v[0];
    mm->db_count = v[1];
    mm->block_size = v[2];
    mm->since_block = v[3];
    mm->frozen = (int)v[4];
    return 1;
}

static enum store_result
pg_meta_get_once(struct store_pg *p, void *arg, char **cause)
{
    int rc = pg_has_table(p, "leafd_multi_db", cause);

    if (rc == 1)
        rc = pg_meta_read(p, arg, 0, cause);
    if (rc == -1)
        return STORE_DB_ERROR;
    return rc == 1 ? STORE_OK : STORE_NOT_FOUND;
}

static enum store_result
pg_meta_get(struct store *s, struct multi_meta *mm, char **cause)
{
    return store_pg_call((struct store_pg *)s, pg_meta_get_once, mm, 0, cause);
}

enum store_result
store_pg_meta_check(struct store_pg *p, const struct multi_meta *want,
                    struct multi_meta *mm_out, char **cause)
{
    struct multi_meta mm;
    int rc = pg_meta_read(p, &mm, 1, cause);

    if (rc == -1)
        return STORE_DB_ERROR;
    if (rc == 1 && !mm.frozen && mm.db_index == want->db_index &&
        mm.db_count == want->db_count && mm.block_size == want->block_size &&
        mm.since_block == want->since_block) {
        *mm_out = mm;
        return STORE_OK;
    }
    /* A missing table has rolled back already (pg_meta_read). */
    if (p->c.db != NULL && PQtransactionStatus(p->c.db) != PQTRANS_IDLE &&
        db_pg_conn_run(&p->c, -1, "ROLLBACK", 0, NULL, "ROLLBACK",
                       cause) == -1)
        return STORE_DB_ERROR;
    store_meta_refusal(cause, "postgresql", p->c.where, rc == 1 ? &mm : NULL,
                       want, store_pg_member_ops.key);
    return STORE_DB_ERROR;
}

/* ---- block loads ---- */

struct pg_block_arg {
    const struct multi_meta *want;
    const char              *tag;
    int64_t                  step, floor;
    const char              *expect;    /* "": none yet */
    char                    *server;    /* what this attempt met */
    size_t                   cap;
    int64_t                 *max_id, *db_step;
};

static enum store_result
pg_alloc_block_once(struct store_pg *p, void *arg, char **cause)
{
    const struct pg_block_arg *a = arg;
    struct multi_meta mm;
    char num[24];
    const char *v[2];
    PGresult *r;
    int64_t max_id = 0, step = 0, start;

    if (pg_begin(p, cause) == -1)
        return STORE_DB_ERROR;
    if (store_pg_meta_check(p, a->want, &mm, cause) != STORE_OK)
        return STORE_DB_ERROR;
    v[0] = a->tag;
    r = db_pg_conn_exec(&p->c, PG_BLOCK_LOCK, NULL, 1, v, "SELECT leaf_alloc",
                        NULL, cause);
    if (r == NULL)
        return STORE_DB_ERROR;
    /* The server that answered: the identity its connection read. A
     * change: the caller checks it against the records (store_multi.c). */
    snprintf(a->server, a->cap, "%s", p->id);
    if (a->expect[0] != '\0' && strcmp(a->expect, p->id) != 0) {
        PQclear(r);
        store_set_cause(cause, "postgresql %s: server %s, not %s", p->c.where,
                        p->id, a->expect);
        return store_pg_rollback(p, STORE_REFUSED);
    }
    if (PQntuples(r) == 0) {
        PQclear(r);
        return store_pg_rollback(p, STORE_NOT_FOUND);
    }
    if (db_pg_i64(r, 0, 0, &max_id) == -1 || db_pg_i64(r, 0, 1, &step) == -1) {
        PQclear(r);
        store_set_cause(cause, "postgresql %s: the row of %s has a max_id or "
                        "step that is not an integer", p->c.where, a->tag);
        return store_pg_rollback(p, STORE_BAD_ROW);
    }
    PQclear(r);
    start = store_block_start(&mm, max_id > a->floor ? max_id : a->floor,
                              a->step);
    if (start < 0) {
        store_set_cause(cause, "%s: no block of %lld IDs fits (step %lld, "
                        "max_id %lld, database %lld of %lld)", a->tag,
                        (long long)mm.block_size, (long long)a->step,
                        (long long)max_id, (long long)mm.db_index,
                        (long long)mm.db_count);
        return store_pg_rollback(p, STORE_BAD_ROW);
    }
    snprintf(num, sizeof num, "%" PRId64, start + a->step);
    v[0] = num;
    v[1] = a->tag;
    if (db_pg_conn_run(&p->c, PG_BLOCK_SET, NULL, 2, v, "UPDATE leaf_alloc",
                       cause) == -1 ||
        pg_commit(p, cause) == -1)
        return STORE_DB_ERROR;      /* either way the range is not used */
    *a->max_id = start + a->step;
    *a->db_step = step;
    return STORE_OK;
}

static enum store_result
pg_alloc_block(struct store *s, const struct multi_meta *want,
               const char *tag, int64_t step, int64_t floor, char *server,
               size_t cap, int64_t *max_id, int64_t *db_step, char **cause)
{
    char expect[STORE_MEMBER_ID_MAX], got[STORE_MEMBER_ID_MAX] = "";
    struct pg_block_arg a = { want, tag, step, floor, expect, got, sizeof got,
                              max_id, db_step };
    enum store_result r;

    snprintf(expect, sizeof expect, "%s", server);
    r = store_pg_call_retry((struct store_pg *)s, pg_alloc_block_once, &a, 0,
                            cause);
    if (r == STORE_OK || r == STORE_REFUSED)
        snprintf(server, cap, "%s", got);
    return r;
}

static enum store_result
pg_serial_in_set(struct store *s, const struct multi_meta *want,
                 int64_t offset_ms, store_serial_key_fn key, void *arg,
                 int64_t step, int64_t *db_ms, char *tag, size_t cap,
                 int64_t *max_id, char **cause)
{
    assert(want != NULL);
    return store_pg_serial_load((struct store_pg *)s, want, offset_ms, key,
                                arg, step, db_ms, tag, cap, max_id, cause);
}

/* ---- leafd multi-db init, one transaction per call ---- */

static enum store_result
pg_prepare_once(struct store_pg *p, char **cause)
{
    if (pg_begin(p, cause) == -1 ||
        db_pg_conn_run(&p->c, -1, sql_alloc_ddl, 0, NULL,
                       "CREATE TABLE leaf_alloc", cause) == -1 ||
        db_pg_conn_run(&p->c, -1, sql_meta_ddl, 0, NULL,
                       "CREATE TABLE leafd_multi_db", cause) == -1 ||
        db_pg_conn_run(&p->c, -1, sql_member_ddl, 0, NULL,
                       "CREATE TABLE leafd_multi_member", cause) == -1 ||
        pg_commit(p, cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

/* The server's notices ("relation ... already exists, skipping"): not
 * to stderr (libpq's default). */
static void
pg_quiet(void *arg, const PGresult *res)
{
    (void)arg;
    log_debug("postgresql: %s", PQresultErrorMessage(res));
}

/* On a connection of its own without the store's prepared statements,
 * which need leaf_alloc: an empty schema is enough. */
static enum store_result
pg_prepare_tables(struct store *s, char **cause)
{
    struct store_pg *p = (struct store_pg *)s;
    int nsql = p->c.nsql;
    enum store_result rc;

    db_pg_conn_close(&p->c);
    p->c.nsql = 0;
    if (db_pg_conn_open(&p->c, cause) == -1) {
        rc = STORE_DB_ERROR;
    } else {
        PQsetNoticeReceiver(p->c.db, pg_quiet, NULL);
        rc = pg_prepare_once(p, cause);
    }
    db_pg_conn_close(&p->c);        /* the next call connects with them */
    p->c.nsql = nsql;
    return rc;
}

static enum store_result
pg_freeze_once(struct store_pg *p, void *arg, char **cause)
{
    int frozen = *(const int *)arg;
    const char *v[1] = { frozen ? "1" : "0" };

    if (pg_begin(p, cause) == -1 ||
        db_pg_conn_run(&p->c, -1, "INSERT INTO leafd_multi_db (id, db_index, "
                       "db_count, block_size, since_block, frozen) VALUES "
                       "(1, -1, 0, 0, 0, $1) ON CONFLICT (id) DO UPDATE SET "
                       "frozen = EXCLUDED.frozen, update_time = "
                       "LOCALTIMESTAMP", 1, v, "freeze leafd_multi_db",
                       cause) == -1)
        return STORE_DB_ERROR;
    /* The row first (a set's loads hold it FOR SHARE before any
     * leaf_alloc row), then every load that changed a leaf_alloc row
     * (a single node's: pg_single_check). */
    if (frozen && db_pg_conn_run(&p->c, -1, "LOCK TABLE leaf_alloc IN SHARE "
                                 "MODE", 0, NULL, "LOCK TABLE leaf_alloc",
                                 cause) == -1)
        return STORE_DB_ERROR;
    if (pg_commit(p, cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

static enum store_result
pg_freeze(struct store *s, int frozen, char **cause)
{
    return store_pg_call((struct store_pg *)s, pg_freeze_once, &frozen, 0,
                         cause);
}

static enum store_result
pg_switch_once(struct store_pg *p, void *arg, char **cause)
{
    const struct store_switch_arg *a = arg;
    char num[4][24];
    const char *v[4];

    if (pg_begin(p, cause) == -1)
        return STORE_DB_ERROR;
    for (size_t i = 0; i < a->n; i++) {
        const struct store_row *row = &a->rows[i];

        /* A serial row keeps its own counter: no block floor. */
        snprintf(num[0], sizeof num[0], "%" PRId64,
                 store_row_is_serial(row) || row->max_id > a->floor ?
                 row->max_id : a->floor);
        snprintf(num[1], sizeof num[1], "%" PRId64, row->step);
        v[0] = row->biz_tag;
        v[1] = num[0];
        v[2] = num[1];
        v[3] = row->description;
        if (db_pg_conn_run(&p->c, -1, "INSERT INTO leaf_alloc (biz_tag, "
                           "max_id, step, description) VALUES ($1, $2, $3, "
                           "$4) ON CONFLICT (biz_tag) DO UPDATE SET max_id = "
                           "GREATEST(leaf_alloc.max_id, EXCLUDED.max_id)", 4,
                           v, "INSERT leaf_alloc", cause) == -1)
            return STORE_DB_ERROR;
    }
    if (db_pg_conn_run(&p->c, -1, "UPDATE leafd_multi_member SET pos = -1",
                       0, NULL, "UPDATE leafd_multi_member", cause) == -1)
        return STORE_DB_ERROR;
    for (int i = 0; i < a->nset; i++) {
        const struct multi_member *mb = &a->set[i];

        snprintf(num[0], sizeof num[0], "%" PRId64, mb->db_id);
        snprintf(num[1], sizeof num[1], "%d", mb->pos);
        snprintf(num[2], sizeof num[2], "%" PRId64, mb->top);
        v[0] = num[0];
        v[1] = num[1];
        v[2] = mb->where;
        v[3] = num[2];
        if (db_pg_conn_run(&p->c, -1, "INSERT INTO leafd_multi_member (db_id, "
                           "pos, location, top) VALUES ($1, $2, $3, $4) ON "
                           "CONFLICT (db_id) DO UPDATE SET pos = EXCLUDED.pos, "
                           "location = EXCLUDED.location, top = GREATEST("
                           "leafd_multi_member.top, EXCLUDED.top), "
                           "update_time = LOCALTIMESTAMP", 4, v,
                           "INSERT leafd_multi_member", cause) == -1)
            return STORE_DB_ERROR;
    }
    snprintf(num[0], sizeof num[0], "%" PRId64, a->mm->db_index);
    snprintf(num[1], sizeof num[1], "%" PRId64, a->mm->db_count);
    snprintf(num[2], sizeof num[2], "%" PRId64, a->mm->block_size);
    snprintf(num[3], sizeof num[3], "%" PRId64, a->mm->since_block);
    for (int i = 0; i < 4; i++)
        v[i] = num[i];
    if (db_pg_conn_run(&p->c, -1, "UPDATE leafd_multi_db SET db_index = $1, "
                       "db_count = $2, block_size = $3, since_block = $4, "
                       "frozen = 0, update_time = LOCALTIMESTAMP WHERE id = 1",
                       4, v, "UPDATE leafd_multi_db", cause) == -1 ||
        pg_commit(p, cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

static enum store_result
pg_switch(struct store *s, const struct store_row *rows, size_t n,
          int64_t floor, const struct multi_meta *mm,
          const struct multi_member *set, int nset, char **cause)
{
    struct store_switch_arg a = { rows, n, floor, mm, set, nset };

    return store_pg_call((struct store_pg *)s, pg_switch_once, &a, 0, cause);
}

struct pg_members_arg {
    int64_t               new_id;
    struct multi_member **rows;
    size_t               *n;
};

static enum store_result
pg_members_once(struct store_pg *p, void *arg, char **cause)
{
    const struct pg_members_arg *a = arg;
    char id[24];
    const char *v[1] = { id };
    PGresult *r;
    int has, n;

    *a->rows = NULL;
    *a->n = 0;
    has = pg_has_table(p, "leafd_multi_member", cause);
    if (has == -1)
        return STORE_DB_ERROR;
    if (!has)
        return STORE_OK;
    if (a->new_id != 0) {
        snprintf(id, sizeof id, "%" PRId64, a->new_id);
        if (db_pg_conn_run(&p->c, -1, "INSERT INTO leafd_multi_member (db_id, "
                           "self) SELECT $1, 1 WHERE NOT EXISTS (SELECT 1 FROM "
                           "leafd_multi_member WHERE self = 1)", 1, v,
                           "INSERT leafd_multi_member", cause) == -1)
            return STORE_DB_ERROR;
    }
    r = db_pg_conn_exec(&p->c, -1, "SELECT db_id, self, pos, top, location "
                        "FROM leafd_multi_member ORDER BY pos, db_id", 0, NULL,
                        "SELECT leafd_multi_member", NULL, cause);
    if (r == NULL)
        return STORE_DB_ERROR;
    n = PQntuples(r);
    if (n > 0)
        *a->rows = xcalloc((size_t)n, sizeof **a->rows);
    for (int i = 0; i < n; i++) {
        struct multi_member *mb = &(*a->rows)[i];
        int64_t self = 0, pos = 0;

        if (db_pg_i64(r, i, 0, &mb->db_id) == -1 ||
            db_pg_i64(r, i, 1, &self) == -1 || db_pg_i64(r, i, 2, &pos) == -1 ||
            db_pg_i64(r, i, 3, &mb->top) == -1) {
            PQclear(r);
            free(*a->rows);
            *a->rows = NULL;
            return db_pg_conn_fail(&p->c, "SELECT leafd_multi_member",
                                   "a row leafd cannot read", cause),
                   STORE_DB_ERROR;
        }
        mb->self = (int)self;
        mb->pos = (int)pos;
        store_copy_text(mb->where, sizeof mb->where, PQgetvalue(r, i, 4),
                        (size_t)PQgetlength(r, i, 4));
    }
    PQclear(r);
    *a->n = (size_t)n;
    return STORE_OK;
}

static enum store_result
pg_members(struct store *s, int64_t new_id, struct multi_member **rows,
           size_t *n, char **cause)
{
    struct pg_members_arg a = { new_id, rows, n };

    return store_pg_call((struct store_pg *)s, pg_members_once, &a, 0, cause);
}

struct pg_top_arg {
    int64_t db_id, top;
};

static enum store_result
pg_top_once(struct store_pg *p, void *arg, char **cause)
{
    const struct pg_top_arg *a = arg;
    char num[2][24];
    const char *v[2] = { num[0], num[1] };

    snprintf(num[0], sizeof num[0], "%" PRId64, a->db_id);
    snprintf(num[1], sizeof num[1], "%" PRId64, a->top);
    /* An upsert: a member row missing here (a database that lost it) gets
     * one (pos -1: a record, not a place in the set). */
    if (db_pg_conn_run(&p->c, -1, "INSERT INTO leafd_multi_member (db_id, "
                       "top) VALUES ($1, $2) ON CONFLICT (db_id) DO UPDATE "
                       "SET top = GREATEST(leafd_multi_member.top, "
                       "EXCLUDED.top), update_time = LOCALTIMESTAMP", 2, v,
                       "INSERT leafd_multi_member (top)", cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

static enum store_result
pg_top_push(struct store *s, int64_t db_id, int64_t top, char **cause)
{
    struct pg_top_arg a = { db_id, top };

    return store_pg_call_retry((struct store_pg *)s, pg_top_once, &a, 0,
                               cause);
}

struct pg_serial_copy_arg {
    const char *tag;
    int64_t     max_id, step;
};

static enum store_result
pg_serial_copy_once(struct store_pg *p, void *arg, char **cause)
{
    const struct pg_serial_copy_arg *a = arg;
    char num[2][24];
    const char *v[3] = { a->tag, num[0], num[1] };

    snprintf(num[0], sizeof num[0], "%" PRId64, a->max_id);
    snprintf(num[1], sizeof num[1], "%" PRId64, a->step);
    /* Only a serial row is raised: a segment tag of the same name (a
     * DBA's row) is left as it is. */
    if (db_pg_conn_run(&p->c, -1, "INSERT INTO leaf_alloc (biz_tag, max_id, "
                       "step, description) VALUES ($1, $2, $3, '"
                       STORE_SERIAL_DESCRIPTION "') ON CONFLICT (biz_tag) DO "
                       "UPDATE SET max_id = CASE WHEN leaf_alloc.description "
                       "= '" STORE_SERIAL_DESCRIPTION "' THEN GREATEST("
                       "leaf_alloc.max_id, EXCLUDED.max_id) ELSE "
                       "leaf_alloc.max_id END", 3, v,
                       "INSERT leaf_alloc (serial copy)", cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

static enum store_result
pg_serial_copy(struct store *s, const char *tag, int64_t max_id, int64_t step,
               char **cause)
{
    struct pg_serial_copy_arg a = { tag, max_id, step };

    assert(tag != NULL && strlen(tag) <= TAG_MAX && max_id >= 1 && step >= 1);
    return store_pg_call_retry((struct store_pg *)s, pg_serial_copy_once, &a,
                               0, cause);
}

static enum store_result
pg_ping_once(struct store_pg *p, void *arg, char **cause)
{
    (void)arg;
    return db_pg_conn_run(&p->c, -1, "SELECT 1", 0, NULL, "ping",
                          cause) == -1 ? STORE_DB_ERROR : STORE_OK;
}

/* Connect if needed (a standby refused), and a trivial statement. */
static enum store_result
pg_ping(struct store *s, char **cause)
{
    return store_pg_call((struct store_pg *)s, pg_ping_once, NULL, 0, cause);
}

const struct store_member_ops store_pg_member_ops = {
    .kind = "postgresql",
    .key = "segment.postgresql.urls",
    .open_url = store_pg_open_url,
    .redacted = db_pg_conninfo_redacted,
    .meta_get = pg_meta_get,
    .alloc_block = pg_alloc_block,
    .prepare_tables = pg_prepare_tables,
    .freeze = pg_freeze,
    .switch_set = pg_switch,
    .members = pg_members,
    .top_push = pg_top_push,
    .serial_copy = pg_serial_copy,
    .serial_alloc_in_set = pg_serial_in_set,
    .ping = pg_ping,
};
