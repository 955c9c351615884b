/* store_pg.c: the segment store in PostgreSQL (segment.store =
 * postgresql), on libpq through db_pg.c.
 *
 * A load is one prepared statement in autocommit, so one round trip and
 * one transaction:
 *   UPDATE leaf_alloc SET max_id = max_id + $2, update_time = ...
 *     WHERE biz_tag = $1 AND max_id >= 1 AND max_id <= INT64_MAX - $2
 *     RETURNING max_id, step
 * $2 is the step leafd asks for (the row's, or the adapted one: Leaf's
 * custom step). No row back: a second statement reads the row to say why
 * (no such tag, a max_id below 1, an overflow); nothing was changed.
 * Serial rows take several statements in one explicit transaction, as on
 * MySQL (store.h), with ILIKE for MySQL's case-blind LIKE.
 *
 * Connection rule: connect lazily; a failed statement closes the
 * connection (db_pg.h), the next call reconnects; no backoff here (the
 * caller backs off). A connection kept from an earlier call that turns out
 * dead at its first statement, within half of the timeout, is made again
 * and the call runs once more (its first try changed nothing, or its range
 * is simply skipped). A serial load after a deadlock or a serialization
 * failure (40P01, 40001) runs again after a short random pause.
 *
 * The server's identity: at each connect the store reads the cluster's
 * system identifier (pg_control_system) and the timeline it writes on,
 * and refuses a server in recovery (a standby) as the database down. The
 * identity is "pg:<system identifier>/<timeline>": a promoted standby
 * keeps the system identifier but starts a new timeline, so a failover
 * changes it. Every load and serial load compares it with the server the
 * marks last recorded (store_marks_server) once its statements succeeded
 * on that connection, before its range is used: a change
 * refuses the process (db_failover) until leafd db-fence, as MySQL's async
 * rule (store_mysql_repl.c): a standby may lack the last commits. A
 * connection's server cannot change under it: a primary never goes back
 * into recovery without a restart, which ends the session.
 *
 * segment.postgresql.replication = sync: a range is used only when its
 * commit waited for a synchronous standby's flush: the load's statement
 * returns synchronous_commit (on or remote_apply) and
 * synchronous_standby_names (not empty), and no WARNING came that the
 * wait was cut short (a cancel ends the wait and commits locally); else
 * the range is dropped (STORE_DEGRADED). A commit still waiting at the
 * client's deadline (statement_timeout is disarmed before a commit) fails
 * the load: the connection is closed, the range never used. The node records its server as "<identity>;sync",
 * and a new timeline of the same cluster is then followed without a fence:
 * every range the node used is on the standby that waited. The operator's
 * part: promote a standby that was synchronous (with FIRST/ANY k of
 * several, the one with every flushed commit), as with semi-sync MySQL.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "csprng.h"
#include "db_pg.h"
#include "log.h"
#include "store.h"
#include "store_impl.h"
#include "store_marks.h"
#include "store_pg_internal.h"
#include "util.h"

#define PG_RETRIES 8                /* a load run again after a deadlock or a
                                       serialization failure */

#define PG_HAS_MULTI "to_regclass('leafd_multi_db') IS NOT NULL"
#define PG_ROW "SELECT biz_tag, max_id, step, description, " \
    "to_char(update_time, 'YYYY-MM-DD HH24:MI:SS') FROM leaf_alloc "
static const struct db_pg_stmt pg_sql[PG_NSTMT] = {
    /* The third column: whether leafd_multi_db exists (pg_single_check
     * reads it only then). */
    [PG_ALLOC] = { "UPDATE leaf_alloc SET max_id = max_id + $2, update_time "
                   "= LOCALTIMESTAMP WHERE biz_tag = $1 AND max_id >= 1 AND "
                   "max_id <= 9223372036854775807 - $2 RETURNING max_id, step, "
                   PG_HAS_MULTI, 2 },
    /* segment.postgresql.replication = sync: the same, and the settings
     * that make its commit wait for a standby (pg_sync_acked). */
    [PG_ALLOC_SYNC] = { "UPDATE leaf_alloc SET max_id = max_id + $2, "
                        "update_time = LOCALTIMESTAMP WHERE biz_tag = $1 AND "
                        "max_id >= 1 AND max_id <= 9223372036854775807 - $2 "
                        "RETURNING max_id, step, " PG_HAS_MULTI ", "
                        "current_setting('synchronous_commit'), "
                        "current_setting('synchronous_standby_names')", 2 },
    [PG_WHY] = { "SELECT max_id, step FROM leaf_alloc WHERE biz_tag = $1", 1 },
    [PG_GET] = { PG_ROW "WHERE biz_tag = $1", 1 },
    [PG_LIST] = { PG_ROW "ORDER BY biz_tag", 0 },
    [PG_INSERT] = { "INSERT INTO leaf_alloc (biz_tag, max_id, step, "
                    "description) VALUES ($1, $2, $3, $4)", 4 },
    /* The server's clock in unix ms (floor, as MySQL's DIV). */
    [PG_NOW_MS] = { "SELECT floor(EXTRACT(EPOCH FROM clock_timestamp()) * "
                    "1000)::bigint + $1::bigint", 1 },
    [PG_INSERT_SERIAL] = { "INSERT INTO leaf_alloc (biz_tag, max_id, step, "
                           "description) VALUES ($1, 1, $2, '"
                           STORE_SERIAL_DESCRIPTION "') ON CONFLICT (biz_tag) "
                           "DO NOTHING", 2 },
    /* A serial row's floor, its rows locked (FOR UPDATE cannot take an
     * aggregate: the rows are locked in a subquery). */
    [PG_FLOOR] = { "SELECT COALESCE(MAX(max_id), 0) FROM (SELECT max_id FROM "
                   "leaf_alloc WHERE biz_tag ILIKE $1 ESCAPE '!' OR "
                   "biz_tag ILIKE $2 ESCAPE '!' OR biz_tag ILIKE $3 ESCAPE '!' "
                   "OR biz_tag ILIKE $4 ESCAPE '!' OR biz_tag ILIKE $5 ESCAPE "
                   "'!' OR biz_tag ILIKE $6 ESCAPE '!' OR biz_tag ILIKE $7 "
                   "ESCAPE '!' OR biz_tag ILIKE $8 ESCAPE '!' FOR UPDATE) f",
                   8 },
    [PG_RAISE] = { "UPDATE leaf_alloc SET max_id = $1 WHERE biz_tag = $2 AND "
                   "max_id < $1", 2 },
    [PG_RAISE_OLD] = { "UPDATE leaf_alloc SET max_id = GREATEST(max_id, $1) "
                       "WHERE biz_tag ILIKE $2 ESCAPE '!'", 2 },
    /* A set member's block load (store_pg_multi.c), in its transaction. */
    [PG_BLOCK_LOCK] = { "SELECT max_id, step FROM leaf_alloc WHERE biz_tag = $1 "
                        "FOR UPDATE", 1 },
    [PG_BLOCK_SET] = { "UPDATE leaf_alloc SET max_id = $1, update_time = "
                       "LOCALTIMESTAMP WHERE biz_tag = $2", 2 },
};
_Static_assert(STORE_SERIAL_FLOOR_MAX == 8, "PG_FLOOR has 8 patterns");
_Static_assert(PG_NSTMT <= DB_PG_STMTS, "room for the statements");

/* Read at each connect: the identity, and whether it is a standby. */
static const char sql_identity[] =
    "SELECT system_identifier::text, pg_is_in_recovery(), CASE WHEN "
    "pg_is_in_recovery() THEN 0 ELSE ('x' || substr(pg_walfile_name("
    "pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END FROM pg_control_system()";
static const char sql_fence_ddl[] =
    "CREATE TABLE IF NOT EXISTS leafd_fence ("
    " id bigserial PRIMARY KEY,"
    " floor bigint NOT NULL,"
    " serial_floor bigint NOT NULL,"
    " server varchar(96) NOT NULL,"
    " fenced_at timestamptz NOT NULL DEFAULT now())";
static const char sql_fence_has[] =
    "SELECT to_regclass('leafd_fence') IS NOT NULL";
static const char sql_fence_last[] =
    "SELECT id, floor, serial_floor, server FROM leafd_fence "
    "ORDER BY id DESC LIMIT 1";
static const char sql_serial_rows[] =
    "SELECT COUNT(*) FROM leaf_alloc WHERE description = '"
    STORE_SERIAL_DESCRIPTION "'";
static const char sql_fence_rows[] =
    "UPDATE leaf_alloc SET max_id = $1 WHERE max_id < $1 AND "
    "(description IS NULL OR description <> '" STORE_SERIAL_DESCRIPTION "')";
static const char sql_fence_serial[] =
    "UPDATE leaf_alloc SET max_id = $1 WHERE max_id < $1 AND "
    "description = '" STORE_SERIAL_DESCRIPTION "'";
static const char sql_fence_insert[] =
    "INSERT INTO leafd_fence (floor, serial_floor, server) VALUES ($1, $2, $3)";

/* A new connection's server: its identity into p->id, or -1 (a standby
 * is refused as the database down; the connection is closed). */
static int
pg_identity(struct store_pg *p, char **cause)
{
    PGresult *r = db_pg_conn_exec(&p->c, -1, sql_identity, 0, NULL,
                                  "SELECT pg_control_system()", NULL, cause);
    int64_t tl = 0;
    const char *sysid;

    if (r == NULL)
        return -1;
    if (PQntuples(r) != 1 || PQnfields(r) != 3 ||
        db_pg_i64(r, 0, 2, &tl) == -1) {
        PQclear(r);
        return db_pg_conn_fail(&p->c, "SELECT pg_control_system()",
                               "an answer leafd cannot read", cause);
    }
    if (strcmp(PQgetvalue(r, 0, 1), "t") == 0) {
        PQclear(r);
        return db_pg_conn_fail(&p->c, "connect", "the server is a standby "
                               "(in recovery): loads wait for a primary "
                               "(target_session_attrs=read-write picks it "
                               "among several hosts)", cause);
    }
    sysid = PQgetvalue(r, 0, 0);
    snprintf(p->id, sizeof p->id, "pg:%.40s/%lld", sysid, (long long)tl);
    PQclear(r);
    return 0;
}

/* The server's notices: a commit whose wait for a synchronous standby was
 * cut short (statement_timeout, a cancel) says so in a WARNING, and its
 * range must not be used. The text is in the server's lc_messages, so any
 * WARNING (its severity is never translated) counts: a load that drew one
 * drops its range, which only ever costs a gap. Nothing goes to stderr
 * (libpq's default). */
static void
pg_notice(void *arg, const PGresult *res)
{
    struct store_pg *p = arg;
    const char *m = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);

    if ((sev != NULL && strcmp(sev, "WARNING") == 0) ||
        (m != NULL && strstr(m, "synchronous replication") != NULL))
        p->cut = 1;
    log_debug("postgresql %s: %s", p->c.where, m != NULL ? m : "?");
}

/* Two identities of one cluster: equal up to the '/' of the timeline. */
static int
pg_same_cluster(const char *a, const char *b)
{
    size_t n = strcspn(a, "/");

    return strncmp(a, "pg:", 3) == 0 && strncmp(a, b, n) == 0 && b[n] == '/';
}

/* After a load's commit, under sync: the range is used only when its
 * commit waited for a standby's flush (synchronous_commit on or
 * remote_apply, synchronous_standby_names set, no WARNING that the wait
 * was cut short); else STORE_DEGRADED, the range dropped. */
static enum store_result
pg_sync_acked(struct store_pg *p, int64_t max_id, char **cause)
{
    char why[512];

    if (!p->sync)
        return STORE_OK;
    if (p->sync_ok && !p->cut) {
        store_repl_degraded(0, NULL);
        return STORE_OK;
    }
    snprintf(why, sizeof why, "the commit of the range ending at %lld on %s "
             "did not wait for a synchronous standby (%s): the range is "
             "dropped; loads are refused until a standby acknowledges commits",
             (long long)max_id, p->c.where, p->cut ? "the wait was cut short"
             : p->sync_why);
    store_repl_degraded(1, why);
    store_repl_pg_dropped();
    store_set_cause(cause, "%s", why);
    return STORE_DEGRADED;
}

/* Before a load: the server is the one the marks last recorded, else the
 * process is refused (db_failover); under sync, a new timeline of the
 * cluster it loaded from under sync is followed. */
static enum store_result
pg_server_check(struct store_pg *p, char **cause)
{
    char last[MARKS_SERVER_MAX], id[MARKS_SERVER_MAX + 8];

    store_marks_server(last, sizeof last);
    if (last[0] != '\0' && !store_marks_same_server(last, p->id) &&
        p->sync && strstr(last, ";sync") != NULL &&
        pg_same_cluster(last, p->id)) {
        log_warn("postgresql server behind %s changed from %s to %s: "
                 "accepted (segment.postgresql.replication = sync: every "
                 "range in use was flushed by a synchronous standby)",
                 p->c.where, last, p->id);
        store_repl_show_pg("sync", p->id, 1);
    } else if (last[0] != '\0' && !store_marks_same_server(last, p->id)) {
        store_marks_refuse("db_failover", "the database server behind %s "
                           "changed from %s to %s (a promoted standby, a "
                           "restored cluster, another database): it may lack "
                           "ranges that nodes already handed out; every load "
                           "is refused until an operator runs leafd db-fence "
                           "--floor=N with N above every ID any node issued "
                           "(the largest marks_max of the nodes' /health; "
                           "this node's is %" PRId64 ")", p->c.where, last,
                           p->id, store_marks_max());
        store_repl_show_pg(p->sync ? "sync" : "async", p->id, 0);
        store_set_cause(cause, "the database server changed from %s to %s: "
                        "loads are refused until leafd db-fence", last, p->id);
        return STORE_REFUSED;
    }
    store_repl_show_pg(p->sync ? "sync" : "async", p->id, 0);
    snprintf(id, sizeof id, "%s%s", p->id, p->sync ? ";sync" : "");
    if (strcmp(last, id) != 0 &&
        (p->sync || last[0] == '\0' || !store_marks_same_server(last, p->id)))
        store_marks_set_server(id);
    return STORE_OK;
}

/* One call: connect if needed (reading the server), run body, and when
 * check, check the server that answered it; once more on a kept
 * connection found dead at once. */
enum store_result
store_pg_call(struct store_pg *p, pg_body_fn body, void *arg, int check,
              char **cause)
{
    for (int attempt = 0;; attempt++) {
        int kept = p->c.db != NULL, rc;
        int64_t t0 = util_mono_ms();
        enum store_result res;

        rc = db_pg_conn_open(&p->c, cause);
        if (rc == -1)
            return STORE_DB_ERROR;
        if (rc == 1 && pg_identity(p, cause) == -1)
            return STORE_DB_ERROR;
        if (rc == 1)
            PQsetNoticeReceiver(p->c.db, pg_notice, p);
        /* A refused node stays refused: before any statement. */
        if (check && store_marks_refused(NULL, 0, NULL, 0)) {
            store_set_cause(cause, "loads are refused until leafd db-fence");
            return STORE_REFUSED;
        }
        p->c.nexec = 0;
        res = body(p, arg, cause);
        /* The server after a statement it answered: p->id is then the
         * identity of the server that took the range (a connection kept
         * from before a failover still holds the old one until its first
         * statement fails). A refused range is never used. */
        if (check && res == STORE_OK &&
            (res = pg_server_check(p, cause)) != STORE_OK)
            return res;
        if (res == STORE_DB_ERROR && kept && attempt == 0 && p->c.lost &&
            p->c.nexec == 1 && util_mono_ms() - t0 < p->c.timeout_ms / 2) {
            if (cause != NULL) {
                free(*cause);
                *cause = NULL;
            }
            continue;
        }
        return res;
    }
}

/* Roll back the caller's transaction and return rc with the cause set. */
enum store_result
store_pg_rollback(struct store_pg *p, enum store_result rc)
{
    if (db_pg_conn_run(&p->c, -1, "ROLLBACK", 0, NULL, "ROLLBACK", NULL) == -1)
        return STORE_DB_ERROR;
    return rc;
}

/* ---- loads ---- */

struct pg_alloc_arg {
    const char *tag;
    int64_t     step;
    int64_t    *max_id, *db_step;
};

/* No row came back from PG_ALLOC: why (nothing changed). */
static enum store_result
pg_alloc_why(struct store_pg *p, const struct pg_alloc_arg *a, char **cause)
{
    const char *v[1] = { a->tag };
    PGresult *r = db_pg_conn_exec(&p->c, PG_WHY, NULL, 1, v,
                                  "SELECT leaf_alloc", NULL, cause);
    int64_t max_id = 0, step = 0;

    if (r == NULL)
        return STORE_DB_ERROR;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return STORE_NOT_FOUND;
    }
    if (db_pg_i64(r, 0, 0, &max_id) == -1 || db_pg_i64(r, 0, 1, &step) == -1) {
        PQclear(r);
        store_set_cause(cause, "postgresql %s: the row of %s has a max_id or "
                        "step that is not an integer", p->c.where, a->tag);
        return STORE_BAD_ROW;
    }
    PQclear(r);
    if (max_id < 1) {
        store_set_cause(cause, "the range of %s would start at %lld (max_id "
                        "%lld, step %lld): IDs start at 1", a->tag,
                        (long long)max_id, (long long)max_id,
                        (long long)a->step);
        return STORE_BAD_ROW;
    }
    store_set_cause(cause, "max_id %lld of %s plus step %lld would overflow a "
                    "64-bit integer", (long long)max_id, a->tag,
                    (long long)a->step);
    *a->max_id = max_id;            /* so the caller can ask for what fits */
    *a->db_step = step;
    return STORE_BAD_ROW;
}

static enum store_result
pg_alloc_once(struct store_pg *p, void *arg, char **cause)
{
    const struct pg_alloc_arg *a = arg;
    char step[24];
    const char *v[2] = { a->tag, step };
    PGresult *r;
    int64_t max_id = 0, db_step = 0;

    snprintf(step, sizeof step, "%lld", (long long)a->step);
    r = db_pg_conn_exec(&p->c, p->sync ? PG_ALLOC_SYNC : PG_ALLOC, NULL, 2, v,
                        "UPDATE leaf_alloc", NULL, cause);
    if (r == NULL)
        return STORE_DB_ERROR;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return pg_alloc_why(p, a, cause);
    }
    if (PQntuples(r) != 1 || db_pg_i64(r, 0, 0, &max_id) == -1 ||
        db_pg_i64(r, 0, 1, &db_step) == -1) {
        PQclear(r);
        /* Committed, but unread: the range is skipped. */
        db_pg_conn_fail(&p->c, "UPDATE leaf_alloc", "an answer leafd cannot "
                        "read", cause);
        return STORE_DB_ERROR;
    }
    if (p->sync) {
        const char *sc = PQgetvalue(r, 0, 3), *names = PQgetvalue(r, 0, 4);

        p->sync_ok = (strcmp(sc, "on") == 0 || strcmp(sc, "remote_apply") == 0) &&
                     names[0] != '\0';
        snprintf(p->sync_why, sizeof p->sync_why, "synchronous_commit %.20s, "
                 "synchronous_standby_names '%.60s'", sc, names);
    }
    p->has_multi = strcmp(PQgetvalue(r, 0, 2), "t") == 0;
    PQclear(r);
    assert(max_id - a->step >= 1);
    *a->max_id = max_id;
    *a->db_step = db_step;
    return STORE_OK;
}

/* The single-database guard: a node on segment.postgresql.url alone
 * passed store_single_check at start; `leafd multi-db init` run while it
 * serves makes its database a member of a set, whose IDs outside its own
 * blocks belong to the others. After a load's UPDATE (which told whether
 * leafd_multi_db exists: p->has_multi), the leafd_multi_db row is read;
 * frozen, or a set of two or more: STORE_DB_ERROR with the cause, the
 * range never used (a load's UPDATE has committed: its IDs are skipped;
 * a serial load's transaction is rolled back).
 * Why no load slips through (store_pg_multi.c's freeze): init creates the
 * table, then freezes in one transaction that writes the frozen row and
 * then takes LOCK TABLE leaf_alloc IN SHARE MODE, which waits for every
 * transaction that changed a leaf_alloc row and holds off new ones until
 * the freeze commits; init reads the rows after it. A load whose UPDATE
 * took its table lock before the freeze's commits before it, so init
 * reads its max_id. One after it took that lock after the freeze's
 * commit, and a new lock makes the backend read the catalog's changes:
 * its UPDATE sees the table, and this read, a statement after the
 * UPDATE, sees the freeze or the set. 0, or -1 (refused, or the read
 * failed: the connection closed). */
static int
pg_single_check(struct store_pg *p, char **cause)
{
    PGresult *r;
    int64_t idx = 0, cnt = 0, frozen = 0;

    if (!p->has_multi)
        return 0;
    r = db_pg_conn_exec(&p->c, -1, "SELECT db_index, db_count, frozen FROM "
                        "leafd_multi_db WHERE id = 1", 0, NULL,
                        "SELECT leafd_multi_db", NULL, cause);
    if (r == NULL)
        return -1;
    if (PQntuples(r) == 1 &&
        (db_pg_i64(r, 0, 0, &idx) == -1 || db_pg_i64(r, 0, 1, &cnt) == -1 ||
         db_pg_i64(r, 0, 2, &frozen) == -1)) {
        PQclear(r);
        return db_pg_conn_fail(&p->c, "SELECT leafd_multi_db",
                               "a row leafd cannot read", cause);
    }
    PQclear(r);
    if (!frozen && cnt < 2)
        return 0;
    if (frozen)
        store_set_cause(cause, "postgresql %s is frozen by leafd multi-db "
                        "init: it is being made a member of a set, whose IDs "
                        "outside its own blocks belong to the others; this "
                        "node (segment.postgresql.url alone) stops loading: "
                        "once init is done, restart it with every database "
                        "in segment.postgresql.urls", p->c.where);
    else
        store_set_cause(cause, "postgresql %s is database %lld of a set of "
                        "%lld (leafd multi-db init), whose IDs outside its "
                        "own blocks belong to the others; this node "
                        "(segment.postgresql.url alone) stops loading: "
                        "restart it with every database in "
                        "segment.postgresql.urls", p->c.where,
                        (long long)idx, (long long)cnt);
    return -1;
}

/* A load alone: autocommit, so its statement is its commit. */
static enum store_result
pg_load_once(struct store_pg *p, void *arg, char **cause)
{
    const struct pg_alloc_arg *a = arg;
    enum store_result rc;

    p->cut = 0;
    /* Refused before: read the set's row first, so that a node left on
     * one URL does not burn a step on every retry (MySQL's check is in the
     * load's transaction and rolls back; this load is autocommit). The
     * check after the UPDATE still decides. */
    if (p->single_refused && pg_single_check(p, cause) == -1)
        return STORE_DB_ERROR;
    p->single_refused = 0;
    rc = pg_alloc_once(p, arg, cause);
    if (rc == STORE_OK && pg_single_check(p, cause) == -1) {
        p->single_refused = 1;
        return STORE_DB_ERROR;      /* committed; the range is skipped */
    }
    return rc == STORE_OK ? pg_sync_acked(p, *a->max_id, cause) : rc;
}

static enum store_result
store_pg_alloc(struct store *s, const char *tag, int64_t step,
               int64_t *max_id, int64_t *db_step, char **cause)
{
    struct pg_alloc_arg a = { tag, step, max_id, db_step };

    return store_pg_call((struct store_pg *)s, pg_load_once, &a, 1, cause);
}

/* ---- serial rows ---- */

struct pg_serial_arg {
    const struct multi_meta *want;
    int64_t             offset_ms;
    store_serial_key_fn key;
    void               *arg;
    int64_t             step;
    int64_t            *db_ms;
    char               *tag;
    size_t              cap;
    int64_t            *max_id;
};

/* The largest max_id of the rows floor names, locked: 0, or -1. */
static int
pg_serial_floor(struct store_pg *p, const struct store_serial_floor *floor,
                int64_t *out, char **cause)
{
    char like[STORE_SERIAL_FLOOR_MAX][STORE_LIKE_MAX];
    const char *v[STORE_SERIAL_FLOOR_MAX];
    PGresult *r;

    assert(floor->n >= 1 && floor->n <= STORE_SERIAL_FLOOR_MAX);
    for (int i = 0; i < STORE_SERIAL_FLOOR_MAX; i++) {
        int k = i < floor->n ? i : 0;

        store_like_pattern(floor->row[k].tag, floor->row[k].prefix, like[i]);
        v[i] = like[i];
    }
    r = db_pg_conn_exec(&p->c, PG_FLOOR, NULL, STORE_SERIAL_FLOOR_MAX, v,
                        "SELECT leaf_alloc (floor)", NULL, cause);
    if (r == NULL)
        return -1;
    if (db_pg_i64(r, 0, 0, out) == -1) {
        PQclear(r);
        return db_pg_conn_fail(&p->c, "SELECT leaf_alloc (floor)",
                               "an answer leafd cannot read", cause);
    }
    PQclear(r);
    return 0;
}

static enum store_result
pg_serial_once(struct store_pg *p, void *arg, char **cause)
{
    const struct pg_serial_arg *a = arg;
    struct store_serial_floor floor = { .n = 0 };
    char num[3][24];
    const char *v[2];
    PGresult *r;
    int64_t now = 0, fl = 0, db_step = 0;
    struct pg_alloc_arg al;
    enum store_result res;

    p->cut = 0;
    if (db_pg_conn_run(&p->c, -1, "BEGIN", 0, NULL, "BEGIN", cause) == -1)
        return STORE_DB_ERROR;
    if (a->want != NULL) {
        struct multi_meta mm;

        if (store_pg_meta_check(p, a->want, &mm, cause) != STORE_OK)
            return STORE_DB_ERROR;
    }
    snprintf(num[0], sizeof num[0], "%lld", (long long)a->offset_ms);
    v[0] = num[0];
    r = db_pg_conn_exec(&p->c, PG_NOW_MS, NULL, 1, v, "SELECT now", NULL,
                        cause);
    if (r == NULL)
        return STORE_DB_ERROR;
    if (db_pg_i64(r, 0, 0, &now) == -1) {
        PQclear(r);
        db_pg_conn_fail(&p->c, "SELECT now", "no clock read", cause);
        return STORE_DB_ERROR;
    }
    PQclear(r);
    *a->db_ms = now;
    if (a->key(a->arg, now, a->tag, a->cap, &floor) == -1) {
        store_set_cause(cause, "no serial row name for database time %lld",
                        (long long)now);
        return store_pg_rollback(p, STORE_BAD_ARG);
    }
    /* The row first: a second node making it waits for the first's
     * commit here. */
    snprintf(num[1], sizeof num[1], "%lld", (long long)a->step);
    v[0] = a->tag;
    v[1] = num[1];
    if (db_pg_conn_run(&p->c, PG_INSERT_SERIAL, NULL, 2, v,
                       "INSERT leaf_alloc", cause) == -1)
        return STORE_DB_ERROR;
    if (floor.n > 0 && pg_serial_floor(p, &floor, &fl, cause) == -1)
        return STORE_DB_ERROR;
    if (floor.n > 0 && floor.mark > (fl > 1 ? fl : 1)) {
        store_set_cause(cause, STORE_SERIAL_BEHIND, p->c.where, a->tag,
                        (long long)(fl > 1 ? fl : 1), (long long)floor.mark,
                        floor.mark_src);
        return store_pg_rollback(p, STORE_REFUSED);
    }
    if (fl > 1) {
        snprintf(num[2], sizeof num[2], "%lld", (long long)fl);
        v[0] = num[2];
        v[1] = a->tag;
        if (db_pg_conn_run(&p->c, PG_RAISE, NULL, 2, v,
                           "UPDATE leaf_alloc (floor)", cause) == -1)
            return STORE_DB_ERROR;
    }
    assert(floor.n == 0 || floor.row[0].raise == 0);
    for (int i = 0; i < floor.n && fl <= INT64_MAX - a->step; i++) {
        char like[STORE_LIKE_MAX];

        if (!floor.row[i].raise)
            continue;
        store_like_pattern(floor.row[i].tag, floor.row[i].prefix, like);
        snprintf(num[2], sizeof num[2], "%lld",
                 (long long)((fl > 1 ? fl : 1) + a->step));
        v[0] = num[2];
        v[1] = like;
        if (db_pg_conn_run(&p->c, PG_RAISE_OLD, NULL, 2, v,
                           "UPDATE leaf_alloc (old rows)", cause) == -1)
            return STORE_DB_ERROR;
    }
    al.tag = a->tag;
    al.step = a->step;
    al.max_id = a->max_id;
    al.db_step = &db_step;
    res = pg_alloc_once(p, &al, cause);
    if (res == STORE_DB_ERROR)
        return res;
    if (res != STORE_OK)
        return store_pg_rollback(p, res == STORE_NOT_FOUND ? STORE_BAD_ROW : res);
    /* Before the COMMIT: the transaction's row locks hold off init's
     * freeze (pg_single_check). */
    if (a->want == NULL && pg_single_check(p, cause) == -1)
        return p->c.db != NULL ? store_pg_rollback(p, STORE_DB_ERROR) :
                                 STORE_DB_ERROR;
    if (db_pg_conn_run(&p->c, -1, "COMMIT", 0, NULL, "COMMIT", cause) == -1)
        return STORE_DB_ERROR;      /* either way the range is not used */
    return pg_sync_acked(p, *a->max_id, cause);
}

/* store_pg_call, run again after a deadlock or a serialization failure
 * (40P01, 40001) after a random pause (1..20 ms times the attempt), so
 * that two loads do not meet again in step: for loads, whose rerun is
 * safe. */
enum store_result
store_pg_call_retry(struct store_pg *p, pg_body_fn body, void *arg, int check,
                    char **cause)
{
    for (int attempt = 0;; attempt++) {
        unsigned char rnd = 0;
        enum store_result r = store_pg_call(p, body, arg, check, cause);

        if (r != STORE_DB_ERROR || attempt == PG_RETRIES ||
            (strcmp(p->c.sqlstate, "40P01") != 0 &&
             strcmp(p->c.sqlstate, "40001") != 0))
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

enum store_result
store_pg_serial_load(struct store_pg *p, const struct multi_meta *want,
                     int64_t offset_ms, store_serial_key_fn key, void *arg,
                     int64_t step, int64_t *db_ms, char *tag, size_t cap,
                     int64_t *max_id, char **cause)
{
    struct pg_serial_arg a = { want, offset_ms, key, arg, step, db_ms, tag,
                               cap, max_id };

    /* A set's member: no marks' server check (its identity is the set's,
     * store_multi.c). */
    return store_pg_call_retry(p, pg_serial_once, &a, want == NULL, cause);
}

static enum store_result
store_pg_serial_alloc(struct store *s, int64_t offset_ms,
                      store_serial_key_fn key, void *arg, int64_t step,
                      int64_t *db_ms, char *tag, size_t cap, int64_t *max_id,
                      char **cause)
{
    return store_pg_serial_load((struct store_pg *)s, NULL, offset_ms, key,
                                arg, step, db_ms, tag, cap, max_id, cause);
}

/* ---- rows ---- */

/* A fetched row into row: 0, or 1 for a row leafd cannot serve. */
static int
pg_row(const PGresult *r, int i, struct store_row *row)
{
    const char *tag = PQgetvalue(r, i, 0);
    size_t len = (size_t)PQgetlength(r, i, 0);

    memset(row, 0, sizeof *row);
    if (len == 0 || len > TAG_MAX)
        return 1;
    memcpy(row->biz_tag, tag, len);
    if (db_pg_i64(r, i, 1, &row->max_id) == -1 ||
        db_pg_i64(r, i, 2, &row->step) == -1)
        return 1;
    if (!PQgetisnull(r, i, 3))
        store_copy_text(row->description, sizeof row->description,
                        PQgetvalue(r, i, 3), (size_t)PQgetlength(r, i, 3));
    if (!PQgetisnull(r, i, 4))
        store_copy_text(row->update_time, sizeof row->update_time,
                        PQgetvalue(r, i, 4), (size_t)PQgetlength(r, i, 4));
    return 0;
}

struct pg_get_arg {
    const char       *tag;
    struct store_row *row;
};

static enum store_result
pg_get_once(struct store_pg *p, void *arg, char **cause)
{
    const struct pg_get_arg *a = arg;
    const char *v[1] = { a->tag };
    PGresult *r = db_pg_conn_exec(&p->c, PG_GET, NULL, 1, v,
                                  "SELECT leaf_alloc", NULL, cause);
    int rc;

    if (r == NULL)
        return STORE_DB_ERROR;
    rc = PQntuples(r) == 1 && pg_row(r, 0, a->row) == 0;
    PQclear(r);
    return rc ? STORE_OK : STORE_NOT_FOUND;
}

static enum store_result
store_pg_get(struct store *s, const char *tag, struct store_row *row,
             char **cause)
{
    struct pg_get_arg a = { tag, row };

    return store_pg_call((struct store_pg *)s, pg_get_once, &a, 0, cause);
}

struct pg_list_arg {
    store_keep_fn      keep;
    struct store_row **rows;
    size_t            *n;
};

static enum store_result
pg_list_once(struct store_pg *p, void *arg, char **cause)
{
    const struct pg_list_arg *a = arg;
    PGresult *r = db_pg_conn_exec(&p->c, PG_LIST, NULL, 0, NULL,
                                  "SELECT leaf_alloc", NULL, cause);
    struct store_row *v = NULL;
    size_t len = 0;
    int rows;

    if (r == NULL)
        return STORE_DB_ERROR;
    rows = PQntuples(r);
    if (rows > 0)
        v = xcalloc((size_t)rows, sizeof *v);
    for (int i = 0; i < rows; i++) {
        if (pg_row(r, i, &v[len]) != 0)
            log_warn("%s: skipping a row whose biz_tag is over %d bytes or "
                     "whose max_id or step is not an integer", p->c.where,
                     TAG_MAX);
        else if (a->keep == NULL || a->keep(&v[len]))
            len++;
    }
    PQclear(r);
    if (len == 0) {
        free(v);
        v = NULL;
    }
    *a->rows = v;
    *a->n = len;
    return STORE_OK;
}

static enum store_result
store_pg_list(struct store *s, store_keep_fn keep, struct store_row **rows,
              size_t *n, char **cause)
{
    struct pg_list_arg a = { keep, rows, n };

    return store_pg_call((struct store_pg *)s, pg_list_once, &a, 0, cause);
}

struct pg_insert_arg {
    const char *tag;
    int64_t     max_id, step;
    const char *description;
};

static enum store_result
pg_insert_once(struct store_pg *p, void *arg, char **cause)
{
    const struct pg_insert_arg *a = arg;
    char max_id[24], step[24];
    const char *v[4] = { a->tag, max_id, step, a->description };
    PGresult *r;

    snprintf(max_id, sizeof max_id, "%lld", (long long)a->max_id);
    snprintf(step, sizeof step, "%lld", (long long)a->step);
    r = db_pg_conn_exec(&p->c, PG_INSERT, NULL, 4, v, "INSERT leaf_alloc",
                        "23505", cause);
    if (r == NULL && strcmp(p->c.sqlstate, "23505") == 0 && p->c.db != NULL) {
        if (cause != NULL) {            /* an answer, not a failure */
            free(*cause);
            *cause = NULL;
        }
        return STORE_EXISTS;
    }
    if (r == NULL)
        return STORE_DB_ERROR;
    PQclear(r);
    return STORE_OK;
}

static enum store_result
store_pg_insert(struct store *s, const char *tag, int64_t max_id,
                int64_t step, const char *description, char **cause)
{
    struct pg_insert_arg a = { tag, max_id, step, description };

    return store_pg_call((struct store_pg *)s, pg_insert_once, &a, 0, cause);
}

/* ---- leafd db-fence ---- */

struct pg_fence_get_arg {
    struct marks_fence *last;
    char               *server;
    size_t              cap;
};

static enum store_result
pg_fence_get_once(struct store_pg *p, void *arg, char **cause)
{
    struct pg_fence_get_arg *a = arg;
    struct marks_fence *last = a->last;
    PGresult *r = db_pg_conn_exec(&p->c, -1, sql_fence_has, 0, NULL,
                                  "SELECT to_regclass", NULL, cause);
    int has;

    if (r == NULL)
        return STORE_DB_ERROR;
    has = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    memset(last, 0, sizeof *last);
    if (has) {
        r = db_pg_conn_exec(&p->c, -1, sql_fence_last, 0, NULL,
                            "SELECT leafd_fence", NULL, cause);
        if (r == NULL)
            return STORE_DB_ERROR;
        if (PQntuples(r) == 1 &&
            (db_pg_i64(r, 0, 0, &last->id) == -1 ||
             db_pg_i64(r, 0, 1, &last->floor) == -1 ||
             db_pg_i64(r, 0, 2, &last->serial_floor) == -1)) {
            PQclear(r);
            db_pg_conn_fail(&p->c, "SELECT leafd_fence", "a row leafd cannot "
                            "read", cause);
            return STORE_DB_ERROR;
        }
        if (PQntuples(r) == 1)
            snprintf(last->server, sizeof last->server, "%s",
                     PQgetvalue(r, 0, 3));
        PQclear(r);
    }
    snprintf(a->server, a->cap, "%s", p->id);
    return STORE_OK;
}

static enum store_result
store_pg_fence_get(struct store *s, struct marks_fence *last, char *server,
                   size_t cap, char **cause)
{
    struct pg_fence_get_arg a = { last, server, cap };

    return store_pg_call((struct store_pg *)s, pg_fence_get_once, &a, 0, cause);
}

struct pg_fence_set_arg {
    int64_t  floor, serial_floor;
    int64_t *rows;
};


static enum store_result
pg_fence_set_once(struct store_pg *p, void *arg, char **cause)
{
    struct pg_fence_set_arg *a = arg;
    char floor[24], serial[24];
    const char *v[3] = { floor, serial, p->id };
    PGresult *r;

    snprintf(floor, sizeof floor, "%lld", (long long)a->floor);
    snprintf(serial, sizeof serial, "%lld", (long long)a->serial_floor);
    if (db_pg_conn_run(&p->c, -1, "BEGIN", 0, NULL, "BEGIN", cause) == -1 ||
        db_pg_conn_run(&p->c, -1, sql_fence_ddl, 0, NULL,
                       "CREATE TABLE leafd_fence", cause) == -1)
        return STORE_DB_ERROR;
    if (a->serial_floor == 0) {
        int64_t n = 0;

        r = db_pg_conn_exec(&p->c, -1, sql_serial_rows, 0, NULL,
                            "SELECT COUNT(*) leaf_alloc", NULL, cause);
        if (r == NULL)
            return STORE_DB_ERROR;
        if (db_pg_i64(r, 0, 0, &n) == -1) {
            PQclear(r);
            /* fail closed: not read is not none (the connection closes,
             * and the fence's transaction with it) */
            db_pg_conn_fail(&p->c, "SELECT COUNT(*) leaf_alloc",
                            "a count leafd cannot read", cause);
            return STORE_DB_ERROR;
        }
        PQclear(r);
        if (n > 0) {
            store_set_cause(cause, "postgresql %s holds %lld serial rows: give "
                            "--serial-floor=S too, S above the largest "
                            "serial_marks_max of the nodes' /health",
                            p->c.where, (long long)n);
            return store_pg_rollback(p, STORE_BAD_ARG);
        }
    }
    r = db_pg_conn_exec(&p->c, -1, sql_fence_rows, 1, v,
                        "UPDATE leaf_alloc (fence)", NULL, cause);
    if (r == NULL)
        return STORE_DB_ERROR;
    *a->rows = db_pg_changed(r);
    if (a->serial_floor > 0) {
        r = db_pg_conn_exec(&p->c, -1, sql_fence_serial, 1, v + 1,
                            "UPDATE leaf_alloc (fence serial)", NULL, cause);
        if (r == NULL)
            return STORE_DB_ERROR;
        *a->rows += db_pg_changed(r);
    }
    if (db_pg_conn_run(&p->c, -1, sql_fence_insert, 3, v, "INSERT leafd_fence",
                       cause) == -1 ||
        db_pg_conn_run(&p->c, -1, "COMMIT", 0, NULL, "COMMIT", cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

static enum store_result
store_pg_fence_set(struct store *s, int64_t floor, int64_t serial_floor,
                   int64_t *rows, char **cause)
{
    struct pg_fence_set_arg a = { floor, serial_floor, rows };

    return store_pg_call((struct store_pg *)s, pg_fence_set_once, &a, 0, cause);
}

/* ---- the store ---- */

static const char *
store_pg_where(const struct store *s)
{
    return ((const struct store_pg *)s)->c.where;
}

static void
store_pg_close(struct store *s)
{
    struct store_pg *p = (struct store_pg *)s;

    db_pg_conn_free(&p->c);
    free(p);
}

static const struct store_ops store_pg_ops = {
    .name = "postgresql",
    .alloc = store_pg_alloc,
    .get = store_pg_get,
    .list = store_pg_list,
    .insert = store_pg_insert,
    .serial_alloc = store_pg_serial_alloc,
    .fence_get = store_pg_fence_get,
    .fence_set = store_pg_fence_set,
    .close = store_pg_close,
    .where = store_pg_where,
};

struct store *
store_pg_open_url(const struct config *cfg, const char *url, const char *key,
                  char **cause)
{
    struct store_pg *p = xcalloc(1, sizeof *p);

    p->base.ops = &store_pg_ops;
    if (db_pg_conn_init(&p->c, url, key, cfg->db_timeout_ms, pg_sql, PG_NSTMT,
                        cause) == -1) {
        db_pg_conn_free(&p->c);
        free(p);
        return NULL;
    }
    return &p->base;
}

struct store *
store_pg_open_single(const struct config *cfg, const char *url,
                     const char *key, char **cause)
{
    struct store *s = store_pg_open_url(cfg, url, key, cause);

    if (s != NULL)
        ((struct store_pg *)s)->sync = cfg->pg_replication == 1;
    return s;
}

struct store *
store_pg_open(const struct config *cfg, char **cause)
{
    if (cfg->pg_url == NULL || cfg->pg_url[0] == '\0') {
        store_set_cause(cause, "segment.store is postgresql but "
                        "segment.postgresql.url is not set");
        return NULL;
    }
    return store_pg_open_single(cfg, cfg->pg_url, "segment.postgresql.url",
                                cause);
}
