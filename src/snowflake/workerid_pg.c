/* workerid_pg.c: the PostgreSQL store of worker IDs (see workerid_pg.h).
 * The server's clock is clock_timestamp() in ms; heartbeats are stamped
 * with it. The rules are the MySQL store's (workerid_mysql.c), kept in the
 * same order so that the two read side by side; what differs is how
 * PostgreSQL shows that the table went back in time:
 *
 * The epoch is the sentinel row worker_id -1, identity "~epoch", fence_ms
 * the epoch, heartbeat_ms `since` (when the table last went back in time,
 * as far as leafd saw it), instance the marker "@o<oid>:s<system
 * identifier>/<timeline>": the table's OID (a table dropped and created
 * again, as a restored pg_dump does, has another) and the server (a
 * promoted standby or a cluster restored from a backup runs on a new
 * timeline; another cluster has another system identifier). A claim that
 * finds another OID or another server than the marker names sets since to
 * the server's clock now (PostgreSQL keeps no creation time of a table:
 * now is past it), before it looks at the rows. A holder whose row's
 * heartbeat_ms is older than the one it last wrote sets since to now. A
 * row whose heartbeat is older than since is free only a lease after
 * since, and is taken gated on since + unknown_gate_ms, as a missing row
 * is (gated on the epoch + unknown_gate_ms).
 *
 * DESIGN: rows put back into the same table (a data-only restore) change
 * neither the OID nor the server, so each holder also holds a session
 * advisory lock on its worker ID (pg_try_advisory_lock(LEAF, id), taken
 * after each write that lands; it ends with the connection and is in no
 * table a restore or a standby brings back). A claim about to take a row
 * the table calls free (released, or its lease expired since a write at or
 * after since), or a gap in a table with an epoch row, first asks whether
 * another session holds that lock and ran a statement within half the
 * lease (pg_stat_activity: active, or state_change that recent): a holder
 * that is writing. If so the table went back in time: since is now, and
 * the rows are looked at again under it. Not covered: a marker not yet
 * on a standby when it was promoted with the same timeline (never: a
 * promotion starts a new one), another role's sessions whose state
 * pg_stat_activity hides (no pg_read_all_stats): there the holders' next
 * writes see it. */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_pg.h"
#include "log.h"
#include "util.h"
#include "workerid_pg.h"
#include "workerid_rows.h"

#define WP_IDENT_MAX WROWS_IDENT_MAX
#define WP_NONCE_MAX 32
#define WP_INST_MAX  WROWS_INST_MAX /* the column: the epoch row's marker */
#define WP_EPOCH_IDENT "~epoch"
#define WP_EPOCH_WORKER -1
/* the advisory locks' first key: "leaf" */
#define WP_LOCK_KEY "1818583398"

static const char wp_sql_exists[] =
    "SELECT to_regclass('leaf_worker') IS NOT NULL";
static const char wp_sql_create[] =
    "CREATE TABLE IF NOT EXISTS leaf_worker ("
    " worker_id INT NOT NULL PRIMARY KEY,"
    " identity VARCHAR(128) NOT NULL UNIQUE,"
    " instance VARCHAR(64) NOT NULL, fence_ms BIGINT NOT NULL DEFAULT 0,"
    " heartbeat_ms BIGINT NOT NULL DEFAULT 0,"
    " released SMALLINT NOT NULL DEFAULT 0, serial_zones TEXT NULL)";

enum {
    WP_NOW, WP_LOCK_ALL, WP_ROWS, WP_TAKE, WP_INSERT, WP_EPOCH_INSERT,
    WP_MOVE, WP_FENCE, WP_FENCE_SAME, WP_MARKER, WP_SINCE, WP_SERVER,
    WP_LOCK, WP_UNLOCK, WP_LOCK_USED, WP_RELEASE, WP_ZONES_GET, WP_NSTMT
};
static const struct db_pg_stmt wp_sql[WP_NSTMT] = {
    [WP_NOW] = { "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)"
                 "::bigint", 0 },
    /* one claim at a time (the mode conflicts with itself and every
     * write), readers not blocked; held until the transaction ends */
    [WP_LOCK_ALL] = { "LOCK TABLE leaf_worker IN SHARE ROW EXCLUSIVE MODE",
                      0 },
    [WP_ROWS] = { "SELECT worker_id, identity, instance, fence_ms,"
                  " heartbeat_ms, released FROM leaf_worker"
                  " ORDER BY worker_id", 0 },
    [WP_TAKE] = { "UPDATE leaf_worker SET identity = $1, instance = $2,"
                  " heartbeat_ms = $3, released = 0 WHERE worker_id = $4",
                  4 },
    [WP_INSERT] = { "INSERT INTO leaf_worker (worker_id, identity, instance,"
                    " fence_ms, heartbeat_ms, released)"
                    " VALUES ($1, $2, $3, $4, $5, 0)", 5 },
    [WP_EPOCH_INSERT] = { "INSERT INTO leaf_worker (worker_id, identity,"
                          " instance, fence_ms, heartbeat_ms, released)"
                          " VALUES (-1, '" WP_EPOCH_IDENT "', '"
                          WP_EPOCH_IDENT "', $1, $1, 1)", 1 },
    /* the identity's old row when it now wants another ID: freed, fence
     * kept */
    [WP_MOVE] = { "UPDATE leaf_worker SET identity = $1, released = 1"
                  " WHERE worker_id = $2", 2 },
    /* $3: the record set_record gave, or NULL (the row's kept) */
    [WP_FENCE] = { "UPDATE leaf_worker SET fence_ms = $1, heartbeat_ms = $2,"
                   " serial_zones = COALESCE($3, serial_zones)"
                   " WHERE worker_id = $4 AND instance = $5"
                   " AND released = 0", 5 },
    /* while the row holds the heartbeat this holder wrote last, or a
     * later one (a write that landed though its answer was lost) */
    [WP_FENCE_SAME] = { "UPDATE leaf_worker SET fence_ms = $1,"
                        " heartbeat_ms = $2,"
                        " serial_zones = COALESCE($3, serial_zones)"
                        " WHERE worker_id = $4 AND instance = $5"
                        " AND released = 0 AND heartbeat_ms >= $6", 6 },
    [WP_MARKER] = { "UPDATE leaf_worker SET instance = $1, heartbeat_ms = $2"
                    " WHERE worker_id = -1 AND identity = '"
                    WP_EPOCH_IDENT "'", 2 },
    [WP_SINCE] = { "UPDATE leaf_worker"
                   " SET heartbeat_ms = GREATEST(heartbeat_ms, $1)"
                   " WHERE worker_id = -1 AND identity = '"
                   WP_EPOCH_IDENT "'", 1 },
    /* the table's OID and the server: system identifier, timeline (a
     * standby: 0, it takes no claim anyway) */
    [WP_SERVER] = { "SELECT 'leaf_worker'::regclass::oid::bigint,"
                    " system_identifier::text, CASE WHEN pg_is_in_recovery()"
                    " THEN 0 ELSE ('x' || substr(pg_walfile_name("
                    "pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END"
                    " FROM pg_control_system()", 0 },
    [WP_LOCK] = { "SELECT pg_try_advisory_lock(" WP_LOCK_KEY ", $1::int)",
                  1 },
    [WP_UNLOCK] = { "SELECT pg_advisory_unlock(" WP_LOCK_KEY ", $1::int)",
                    1 },
    /* how long ago (ms; 0: running one now) the other session that holds
     * worker ID $1's lock ran its last statement; NULL: none holds it,
     * or its state is hidden from this role */
    [WP_LOCK_USED] = { "SELECT min(CASE WHEN a.state = 'active' THEN 0 ELSE"
                       " floor(extract(epoch FROM clock_timestamp() -"
                       " a.state_change) * 1000)::bigint END)"
                       " FROM pg_locks l JOIN pg_stat_activity a"
                       " ON a.pid = l.pid WHERE l.locktype = 'advisory'"
                       " AND l.granted AND l.database = (SELECT oid FROM"
                       " pg_database WHERE datname = current_database())"
                       " AND l.classid = " WP_LOCK_KEY "::oid"
                       " AND l.objid = $1::oid AND l.objsubid = 2"
                       " AND l.pid <> pg_backend_pid()", 1 },
    [WP_RELEASE] = { "UPDATE leaf_worker SET fence_ms = $1, released = 1,"
                     " serial_zones = COALESCE($2, serial_zones)"
                     " WHERE worker_id = $3 AND instance = $4", 4 },
    [WP_ZONES_GET] = { "SELECT serial_zones FROM leaf_worker"
                       " WHERE worker_id = $1", 1 },
};
_Static_assert(WP_NSTMT <= DB_PG_STMTS, "room for the statements");

struct wpg {
    struct db_pg_conn c;
    int64_t       service_ms;   /* in service (fence writes, release) */
    int64_t       start_ms;     /* a claim, the start's clock check */
    struct wlease_note note;    /* the last claim's epoch gate: why */
    long long     held;         /* the worker ID last claimed, -1 none */
    long long     held_hb;      /* the heartbeat_ms last written for it */
    long long     locked;       /* whose advisory lock this session holds */
    int           lock_off;     /* the server refused the lock: no more */
    struct wlease_rec rec;      /* serial_zones: the taken row's, to write */
};

/* Notices ("already exists, skipping") go to the debug log, not stderr. */
static void
wp_notice(void *arg, const PGresult *res)
{
    const char *m = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

    (void)arg;
    log_debug("snowflake: postgresql: %s", m != NULL ? m : "?");
}

/* A connection, the table made when missing and the statements prepared;
 * statements bounded by the start's timeout or the service's. 0, or -1
 * with *cause. */
static int
wp_connect(struct wpg *m, int starting, char **cause)
{
    PGresult *r;
    int missing, rc;

    m->c.timeout_ms = starting ? m->start_ms : m->service_ms;
    if (m->c.db != NULL)
        return 0;
    m->c.nsql = 0;              /* the table first: prepared below */
    m->locked = -1;             /* a new session holds no lock */
    m->c.timeout_ms = m->start_ms;
    if (db_pg_conn_open(&m->c, cause) == -1)
        return -1;
    PQsetNoticeReceiver(m->c.db, wp_notice, m);
    r = db_pg_conn_exec(&m->c, -1, wp_sql_exists, 0, NULL,
                        "SELECT to_regclass", NULL, cause);
    if (r == NULL)
        return -1;
    missing = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "f") == 0;
    PQclear(r);
    /* two nodes creating it at once: one may fail on the type's unique
     * index (23505), the table made by the other */
    if (missing) {
        r = db_pg_conn_exec(&m->c, -1, wp_sql_create, 0, NULL,
                            "CREATE TABLE leaf_worker", "23505", cause);
        if (r == NULL && m->c.db == NULL)
            return -1;
        if (r == NULL) {
            free(*cause);
            *cause = NULL;
        }
        PQclear(r);
    }
    rc = db_pg_conn_prepare(&m->c, wp_sql, WP_NSTMT, cause);
    m->c.timeout_ms = starting ? m->start_ms : m->service_ms;
    return rc;
}

/* Statement i with params; the result or NULL (connection closed). */
static PGresult *
wp_exec(struct wpg *m, int i, int n, const char *const *v, const char *what,
        char **cause)
{
    return db_pg_conn_exec(&m->c, i, NULL, n, v, what, NULL, cause);
}

static int
wp_run(struct wpg *m, int i, int n, const char *const *v, const char *what,
       char **cause)
{
    return db_pg_conn_run(&m->c, i, NULL, n, v, what, cause);
}

static int
wp_txn(struct wpg *m, const char *sql, char **cause)
{
    return db_pg_conn_run(&m->c, -1, sql, 0, NULL, sql, cause);
}


/* One integer from statement i: 0 with *v (*null when SQL NULL or no
 * row), or -1 (connection closed). */
static int
wp_scalar(struct wpg *m, int i, int n, const char *const *p, long long *v,
          int *null, const char *what, char **cause)
{
    PGresult *r = wp_exec(m, i, n, p, what, cause);
    int64_t x = 0;

    if (r == NULL)
        return -1;
    *null = db_pg_i64(r, 0, 0, &x) == -1;
    *v = *null ? 0 : x;
    PQclear(r);
    return 0;
}

/* The server's clock in ms. */
static int
wp_now(struct wpg *m, long long *now, char **cause)
{
    int null;

    if (wp_scalar(m, WP_NOW, 0, NULL, now, &null, "clock_timestamp()",
                  cause) == -1)
        return -1;
    if (null)
        return db_pg_conn_fail(&m->c, "clock_timestamp()",
                               "an answer leafd cannot read", cause);
    return 0;
}

/* Whether a holder is writing worker's record now, whatever the table
 * says (see the DESIGN above): 0 with *used, or -1 (closed). */
static int
wp_lock_used(struct wpg *m, long long worker, int64_t lease_ms, int *used,
             char **cause)
{
    char w[24];
    const char *v[1] = { w };
    long long ago;
    int null;

    *used = 0;
    if (lease_ms <= 0)
        return 0;
    snprintf(w, sizeof w, "%lld", worker);
    if (wp_scalar(m, WP_LOCK_USED, 1, v, &ago, &null, "SELECT pg_locks",
                  cause) == -1)
        return -1;
    *used = !null && ago >= 0 && ago < lease_ms / 2;
    return 0;
}

static int
wp_used(void *arg, long long worker, int64_t lease_ms, int *used,
        char **cause)
{
    return wp_lock_used(arg, worker, lease_ms, used, cause);
}

/* After a write that landed: hold worker's advisory lock in this session
 * (it ends with the connection). Not fatal: the write stands; a server
 * that refuses it (an error, not a lost connection) is not asked again. */
static void
wp_lock_take(struct wpg *m, long long worker)
{
    char w[24], *cause = NULL;
    const char *v[1] = { w };
    PGresult *r;

    if (m->lock_off || m->locked == worker)
        return;
    snprintf(w, sizeof w, "%lld", worker);
    r = wp_exec(m, WP_LOCK, 1, v, "pg_try_advisory_lock", &cause);
    if (r == NULL) {
        if (!m->c.lost) {
            m->lock_off = 1;
            log_warn("snowflake: pg_try_advisory_lock refused (%s): this "
                     "node's worker ID has no lock in postgresql; a restore "
                     "of leaf_worker's rows is then seen only by its next "
                     "write (docs/operations.md)", cause ? cause : "?");
        }
        free(cause);
        return;
    }
    if (PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0) {
        /* a worker ID held before (a claim that moved): its lock goes */
        if (m->locked >= 0) {
            char o[24];

            snprintf(o, sizeof o, "%lld", m->locked);
            v[0] = o;
            PQclear(wp_exec(m, WP_UNLOCK, 1, v, "pg_advisory_unlock",
                            &cause));
            free(cause);
        }
        m->locked = worker;
    }
    PQclear(r);
}

/* The epoch row's marker "@o<oid>:s<server>": each part, or "" / -1
 * where it is missing ("~epoch": the operator's). */
static void
wp_marker_parse(const char *marker, long long *oid, char *server,
                size_t cap)
{
    const char *s;
    char *end;

    *oid = -1;
    server[0] = '\0';
    if (strncmp(marker, "@o", 2) != 0)
        return;
    *oid = strtoll(marker + 2, &end, 10);
    if (end == marker + 2)
        *oid = -1;
    s = strstr(marker, ":s");
    if (s != NULL)
        snprintf(server, cap, "%s", s + 2);
}

/* The identity is UNIQUE: before it takes another worker ID, its row for
 * worker gets a placeholder identity, released, its fence kept. */
static int
wp_move_out(struct wpg *m, long long worker, char **cause)
{
    char moved[32], w[24];
    const char *v[2] = { moved, w };

    snprintf(moved, sizeof moved, "~moved:%lld", worker);
    snprintf(w, sizeof w, "%lld", worker);
    return wp_run(m, WP_MOVE, 2, v, "UPDATE leaf_worker (move)", cause);
}

/* The serial_zones of worker's row as the claimed record. */
static int
wp_zones_get(struct wpg *m, long long worker, char **cause)
{
    char w[24];
    const char *v[1] = { w };
    PGresult *r;

    snprintf(w, sizeof w, "%lld", worker);
    r = wp_exec(m, WP_ZONES_GET, 1, v, "SELECT serial_zones", cause);
    if (r == NULL)
        return -1;
    if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
        wlease_rec_claim(&m->rec, PQgetvalue(r, 0, 0),
                         (size_t)PQgetlength(r, 0, 0));
    else
        wlease_rec_claim(&m->rec, NULL, 0);
    PQclear(r);
    return 0;
}

/* The rows (worker IDs 0 and up) into *rows; the epoch row's fields. */
static int
wp_read_rows(struct wpg *m, struct wrows_row **rows, size_t *n, int *has_epoch,
             int *epoch_ok, long long *epoch, long long *since, char *marker,
             size_t mcap, char **cause)
{
    PGresult *r = wp_exec(m, WP_ROWS, 0, NULL, "SELECT leaf_worker", cause);
    int nt;

    *rows = NULL;
    *n = 0;
    if (r == NULL)
        return -1;
    nt = PQntuples(r);
    if (PQnfields(r) != 6) {
        PQclear(r);
        return db_pg_conn_fail(&m->c, "SELECT leaf_worker",
                               "an answer leafd cannot read", cause);
    }
    *rows = xcalloc((size_t)nt + 1, sizeof **rows);
    for (int i = 0; i < nt; i++) {
        struct wrows_row row;
        int64_t v[4];

        memset(&row, 0, sizeof row);
        if (db_pg_i64(r, i, 0, &v[0]) == -1 ||
            db_pg_i64(r, i, 3, &v[1]) == -1 ||
            db_pg_i64(r, i, 4, &v[2]) == -1 ||
            db_pg_i64(r, i, 5, &v[3]) == -1) {
            PQclear(r);
            free(*rows);
            *rows = NULL;
            return db_pg_conn_fail(&m->c, "SELECT leaf_worker",
                                   "a row leafd cannot read", cause);
        }
        row.worker = v[0];
        row.fence = v[1];
        row.hb = v[2];
        row.released = v[3];
        snprintf(row.ident, sizeof row.ident, "%s", PQgetvalue(r, i, 1));
        snprintf(row.inst, sizeof row.inst, "%s", PQgetvalue(r, i, 2));
        if (row.worker < 0) {           /* no worker ID: the epoch row? */
            if (row.worker == WP_EPOCH_WORKER) {
                *has_epoch = 1;
                *epoch = row.fence;
                *since = row.hb;
                snprintf(marker, mcap, "%s", row.inst);
                *epoch_ok = strcmp(row.ident, WP_EPOCH_IDENT) == 0 &&
                            row.fence >= 0;
            }
            continue;
        }
        (*rows)[(*n)++] = row;
    }
    PQclear(r);
    return 0;
}

/* The table's OID and the server ("<system identifier>/<timeline>"). */
static int
wp_server(struct wpg *m, long long *oid, char *server, size_t cap,
          char **cause)
{
    PGresult *r = wp_exec(m, WP_SERVER, 0, NULL, "SELECT pg_control_system()",
                          cause);
    int64_t o = 0, tl = 0;

    if (r == NULL)
        return -1;
    if (PQntuples(r) != 1 || PQnfields(r) != 3 ||
        db_pg_i64(r, 0, 0, &o) == -1 || db_pg_i64(r, 0, 2, &tl) == -1) {
        PQclear(r);
        return db_pg_conn_fail(&m->c, "SELECT pg_control_system()",
                               "an answer leafd cannot read", cause);
    }
    *oid = o;
    snprintf(server, cap, "%.24s/%lld", PQgetvalue(r, 0, 1), (long long)tl);
    PQclear(r);
    return 0;
}

/* End the claim's transaction without a change; rc. */
static int
wp_rollback(struct wpg *m, int rc)
{
    char *why = NULL;

    if (wp_txn(m, "ROLLBACK", &why) == -1)
        free(why);
    return rc;
}

static int
wp_claim(void *arg, const struct wlease_claim *c, int64_t *worker,
         int64_t *fence_ms, char **cause)
{
    struct wpg *m = arg;
    struct wrows_row *rows = NULL;
    long long now, epoch = -1, since = 0, oid = 0, m_oid;
    long long past_max = -1, past_fence = 0;
    char marker[WP_INST_MAX + 1] = "", seen[WP_INST_MAX + 1];
    char server[48], m_server[WP_INST_MAX + 1];
    size_t n = 0;
    int64_t take = -1, tfence = 0;
    int insert = 0, has_epoch = 0, epoch_ok = 1, rc = WLEASE_DOWN;
    int waiting = 0, wr, used, live = 0, bumped = 0;

    if (strlen(c->identity) > WP_IDENT_MAX || strlen(c->nonce) >
        WP_NONCE_MAX) {
        *cause = xstrdup("snowflake identity over 128 bytes");
        return WLEASE_REFUSED;
    }
    if (wp_connect(m, 1, cause) == -1 || wp_txn(m, "BEGIN", cause) == -1 ||
        wp_run(m, WP_LOCK_ALL, 0, NULL, "LOCK TABLE leaf_worker",
               cause) == -1 ||
        wp_now(m, &now, cause) == -1 ||
        wp_read_rows(m, &rows, &n, &has_epoch, &epoch_ok, &epoch, &since,
                     marker, sizeof marker, cause) == -1)
        return WLEASE_DOWN;
    if (!epoch_ok) {
        *cause = xasprintf("leaf_worker's epoch row (worker_id %d) is not "
                           "identity '%s' with a fence_ms of 0 or more "
                           "(found %lld): not claiming (docs/operations.md)",
                           WP_EPOCH_WORKER, WP_EPOCH_IDENT, epoch);
        free(rows);
        return wp_rollback(m, WLEASE_REFUSED);
    }
    if (!has_epoch) {
        /* the server's clock after the lock: past every write a lost row
         * held */
        char e[24];
        const char *v[1] = { e };

        epoch = since = now;
        snprintf(e, sizeof e, "%lld", epoch);
        if (wp_run(m, WP_EPOCH_INSERT, 1, v, "INSERT leaf_worker (epoch)",
                   cause) == -1) {
            free(rows);
            return WLEASE_DOWN;
        }
    }
    assert(epoch >= 0);
    /* the table created again (a dump restored: DROP, CREATE, COPY), or
     * another server (a standby promoted, a cluster restored: a new
     * timeline; another cluster) than the marker names: it may hold rows
     * from before, and lack the last heartbeats and claims */
    if (wp_server(m, &oid, server, sizeof server, cause) == -1) {
        free(rows);
        return WLEASE_DOWN;
    }
    wp_marker_parse(marker, &m_oid, m_server, sizeof m_server);
    snprintf(seen, sizeof seen, "@o%lld:s%s", oid, server);
    if (strcmp(marker, seen) != 0) {
        char s[24];
        const char *v[2] = { seen, s };

        if (m_oid >= 0 && m_oid != oid && now > since) {
            log_warn("snowflake: leaf_worker was created again (its OID is "
                     "%lld, was %lld: a dump restored?): no worker ID whose "
                     "row is older before a lease has passed", oid, m_oid);
            since = now;
        }
        if (m_server[0] != '\0' && strcmp(m_server, server) != 0 &&
            now > since) {
            log_warn("snowflake: leaf_worker's server changed (%s, was %s: a "
                     "standby promoted, a cluster restored, or another "
                     "server behind the address), and may lack the last "
                     "writes: no worker ID whose row is older before a "
                     "lease has passed", server, m_server);
            since = now;
        }
        snprintf(s, sizeof s, "%lld", since);
        if (wp_run(m, WP_MARKER, 2, v, "UPDATE leaf_worker (marker)",
                   cause) == -1) {
            free(rows);
            return WLEASE_DOWN;
        }
    }

    if (c->want_worker >= 0) {
        int64_t at, move;

        rc = wrows_wanted(c, rows, n, now, since, &at, &move, cause);
        if (rc != WLEASE_OK) {
            free(rows);
            return wp_rollback(m, rc);
        }
        rc = WLEASE_DOWN;
        /* free by the table, but its lock held: a live node's, and the
         * table went back in time (rows put back) */
        if ((at < 0 || strcmp(rows[at].ident, c->identity) != 0) &&
            (c->alias == NULL || c->alias[0] == '\0' || at < 0 ||
             strcmp(rows[at].ident, c->alias) != 0)) {
            if (wp_lock_used(m, c->want_worker, c->lease_ms, &used,
                             cause) == -1) {
                free(rows);
                return WLEASE_DOWN;
            }
            if (used) {
                char s[24];
                const char *v[1] = { s };

                free(rows);
                snprintf(s, sizeof s, "%lld", now);
                if (wp_run(m, WP_SINCE, 1, v, "UPDATE leaf_worker (since)",
                           cause) == -1 || wp_txn(m, "COMMIT", cause) == -1)
                    return WLEASE_DOWN;
                *cause = wrows_live_lock(c->want_worker, now + c->lease_ms);
                return WLEASE_DOWN;
            }
        }
        if (move >= 0 && wp_move_out(m, move, cause) == -1) {
            free(rows);
            return WLEASE_DOWN;
        }
        take = c->want_worker;
        tfence = at >= 0 ? rows[at].fence : 0;
        insert = at < 0;
    }
    /* this identity's row; one outside the range is freed below */
    if (take < 0 && wrows_own(c, rows, n, now, &take, &tfence, &past_max,
                              &past_fence, cause) != WLEASE_OK) {
        free(rows);
        return wp_rollback(m, WLEASE_REFUSED);
    }
    /* else the lowest free: a gap, released, or lease expired (a lease
     * after since for a row older than since); and its fence below the
     * taker's clock */
rescan:
    if (take < 0) {
        struct wrows_pick pk;

        if (wrows_scan(c, rows, n, now, since, has_epoch, wp_used, m, &pk,
                       cause) == -1) {
            free(rows);
            return WLEASE_DOWN;
        }
        take = pk.take;
        tfence = pk.fence;
        insert = pk.insert;
        waiting = pk.waiting;
        live = pk.live;
    }
    if (live && !bumped) {
        char s[24];
        const char *v[1] = { s };

        wrows_log_live();
        snprintf(s, sizeof s, "%lld", now);
        if (wp_run(m, WP_SINCE, 1, v, "UPDATE leaf_worker (since)",
                   cause) == -1) {
            free(rows);
            return WLEASE_DOWN;
        }
        if (now > since)
            since = now;
        bumped = 1;
        take = -1;
        tfence = 0;
        insert = 0;
        waiting = 0;
        goto rescan;
    }
    if (take < 0 && (waiting || live)) {
        free(rows);
        if (wp_txn(m, "COMMIT", cause) == -1)
            return WLEASE_DOWN;
        *cause = waiting ? wrows_waiting(since + c->lease_ms) :
                           wrows_live_lock(-1, since + c->lease_ms);
        return WLEASE_DOWN;
    }
    if (take < 0) {
        *cause = wrows_full(c);
        free(rows);
        return wp_rollback(m, WLEASE_REFUSED);
    }
    if (past_max >= 0) {
        wrows_log_moved(c, past_max, take);
        if (wp_move_out(m, past_max, cause) == -1) {
            free(rows);
            return WLEASE_DOWN;
        }
    }
    tfence = wrows_gate(c, rows, n, take, tfence, insert, past_fence, epoch,
                        since);
    free(rows);
    wlease_rec_claim(&m->rec, NULL, 0);
    if (!insert && wp_zones_get(m, take, cause) == -1)
        return WLEASE_DOWN;
    {
        char w[24], hb[24], f[24];
        const char *iv[5] = { w, c->identity, c->nonce, f, hb };
        const char *tv[4] = { c->identity, c->nonce, hb, w };

        snprintf(w, sizeof w, "%" PRId64, take);
        snprintf(hb, sizeof hb, "%lld", now);
        snprintf(f, sizeof f, "%" PRId64, tfence);
        wr = insert ? wp_run(m, WP_INSERT, 5, iv, "INSERT leaf_worker", cause)
                    : wp_run(m, WP_TAKE, 4, tv, "UPDATE leaf_worker (take)",
                             cause);
    }
    if (wr == -1 || wp_txn(m, "COMMIT", cause) == -1)
        return WLEASE_DOWN;
    m->held = take;
    m->held_hb = now;
    free(m->note.text);
    m->note.text = NULL;
    if (insert && (tfence == epoch + c->unknown_gate_ms ||
                   tfence == since + c->unknown_gate_ms)) {
        m->note.text = xasprintf("postgresql has no record of this worker ID "
                            "since %lld (leaf_worker's epoch row, worker_id "
                            "%d: a new, truncated or re-created table), and "
                            "a node may have issued up to that + fence_step "
                            "+ max_borrow + max_clock_offset under a lost "
                            "row; it ends by itself. Only on a table nothing "
                            "was ever issued from, `UPDATE leaf_worker SET "
                            "fence_ms = 0 WHERE worker_id = %d` skips it "
                            "(docs/operations.md)",
                            (long long)(tfence - c->unknown_gate_ms),
                            WP_EPOCH_WORKER, WP_EPOCH_WORKER);
        m->note.gate = tfence;
    }
    if (insert && tfence >= c->now_ms)
        log_warn("snowflake: postgresql has no record of worker ID %" PRId64
                 " since %lld (leaf_worker's epoch row: a new or truncated "
                 "table): waiting until %" PRId64 " (%" PRId64 " ms) before "
                 "issuing, past anything a node could have issued before",
                 take, epoch, tfence, tfence - c->now_ms + 1);
    *worker = take;
    *fence_ms = tfence;
    return WLEASE_OK;
}

/* An UPDATE of the holder's row in its own statement: WLEASE_OK, _LOST
 * (no row matched), _DOWN. */
static int
wp_update_held(struct wpg *m, int i, int n, const char *const *v,
               const char *what, char **cause)
{
    PGresult *r = wp_exec(m, i, n, v, what, cause);

    if (r == NULL)
        return WLEASE_DOWN;
    if (db_pg_changed(r) == 0) {
        *cause = xstrdup("leaf_worker row is held by another instance now");
        db_pg_conn_close(&m->c);        /* and our lock on it goes */
        return WLEASE_LOST;
    }
    return WLEASE_OK;
}

/* starting: the start's clock check, with the start's timeout. */
static int
wp_fence(void *arg, int64_t worker, const char *nonce, int64_t fence_ms,
         int starting, int64_t *store_ms, char **cause)
{
    struct wpg *m = arg;
    char f[24], hb[24], w[24], last[24], s[24];
    const char *rec = wlease_rec_write(&m->rec);
    const char *v[6] = { f, hb, rec, w, nonce, last }, *sv[1] = { s };
    long long now;
    PGresult *r;
    int same, rc;

    if (wp_connect(m, starting, cause) == -1 || wp_now(m, &now, cause) == -1)
        return WLEASE_DOWN;
    snprintf(f, sizeof f, "%" PRId64, fence_ms);
    snprintf(hb, sizeof hb, "%lld", now);
    snprintf(w, sizeof w, "%" PRId64, worker);
    snprintf(last, sizeof last, "%lld", m->held_hb);
    if (m->held != worker) {
        rc = wp_update_held(m, WP_FENCE, 5, v, "UPDATE leaf_worker (fence)",
                            cause);
        if (rc == WLEASE_OK) {
            *store_ms = now;
            wp_lock_take(m, worker);
        }
        return rc;
    }
    /* the row as this holder left it (the usual case), else: still ours
     * but older than we wrote it, a restored row: since is now */
    r = wp_exec(m, WP_FENCE_SAME, 6, v, "UPDATE leaf_worker (fence)", cause);
    if (r == NULL)
        return WLEASE_DOWN;
    same = db_pg_changed(r) == 1;
    if (!same) {
        if (wp_txn(m, "BEGIN", cause) == -1)
            return WLEASE_DOWN;
        r = wp_exec(m, WP_FENCE, 5, v, "UPDATE leaf_worker (fence)", cause);
        if (r == NULL)
            return WLEASE_DOWN;
        if (db_pg_changed(r) != 1) {
            *cause = xstrdup("leaf_worker row is held by another instance "
                             "now");
            db_pg_conn_close(&m->c);    /* rolls back; the lock goes */
            return WLEASE_LOST;
        }
        snprintf(s, sizeof s, "%lld", now);
        if (wp_run(m, WP_SINCE, 1, sv, "UPDATE leaf_worker (since)",
                   cause) == -1 || wp_txn(m, "COMMIT", cause) == -1)
            return WLEASE_DOWN;
        log_warn("snowflake: leaf_worker's row of worker ID %" PRId64 " went "
                 "back in time (its heartbeat_ms is older than the %lld this "
                 "node wrote: a dump restored, a standby promoted); written "
                 "again with fence %" PRId64 ", and other nodes take no "
                 "worker ID whose row is older for a lease", worker,
                 m->held_hb, fence_ms);
    }
    m->held_hb = now;
    *store_ms = now;
    wp_lock_take(m, worker);
    return WLEASE_OK;
}

static int
wp_release(void *arg, int64_t worker, const char *nonce, int64_t fence_ms,
           char **cause)
{
    struct wpg *m = arg;
    char f[24], w[24];
    const char *v[4] = { f, wlease_rec_write(&m->rec), w, nonce };

    if (wp_connect(m, 0, cause) == -1)
        return WLEASE_DOWN;
    snprintf(f, sizeof f, "%" PRId64, fence_ms);
    snprintf(w, sizeof w, "%" PRId64, worker);
    return wp_update_held(m, WP_RELEASE, 4, v, "UPDATE leaf_worker (release)",
                          cause);
}

static char *
wp_claimed_record(void *arg)
{
    return wlease_rec_claimed(&((struct wpg *)arg)->rec);
}

static void
wp_set_record(void *arg, const char *rec)
{
    wlease_rec_set(&((struct wpg *)arg)->rec, rec);
}

static char *
wp_epoch_note(void *arg, int64_t *gate)
{
    return wlease_note_take(&((struct wpg *)arg)->note, gate);
}

static void
wp_close(void *arg)
{
    struct wpg *m = arg;

    if (m == NULL)
        return;
    free(m->note.text);
    wlease_rec_free(&m->rec);
    db_pg_conn_free(&m->c);
    free(m);
}

int
workerid_pg_store(const char *conninfo, const char *key, int64_t timeout_ms,
                  int64_t start_ms, struct wlease_store *out, char **cause)
{
    struct wpg *m = xcalloc(1, sizeof *m);

    if (conninfo == NULL || *conninfo == '\0') {
        *cause = xasprintf("%s: missing", key);
        free(m);
        return -1;
    }
    if (db_pg_conn_init(&m->c, conninfo, key, start_ms, NULL, 0,
                        cause) == -1) {
        db_pg_conn_free(&m->c);
        free(m);
        return -1;
    }
    m->held = -1;
    m->locked = -1;
    m->service_ms = timeout_ms;
    m->start_ms = start_ms;
    memset(out, 0, sizeof *out);
    out->name = "postgresql";
    out->claim = wp_claim;
    out->fence = wp_fence;
    out->release = wp_release;
    out->close = wp_close;
    out->epoch_note = wp_epoch_note;
    out->claimed_record = wp_claimed_record;
    out->set_record = wp_set_record;
    out->arg = m;
    return 0;
}
