/* workerid_mysql.c: the MySQL/MariaDB store of worker IDs (see
 * workerid_mysql.h). The server's clock is read as
 * UNIX_TIMESTAMP(NOW(3)) in a UTC session; heartbeats are stamped with it.
 *
 * The epoch (when the table's record began, on that clock) is a sentinel
 * row of leaf_worker: worker_id -1, identity and instance "~epoch",
 * fence_ms the epoch, released 1. A row in the table itself, not a table
 * of its own, so that whatever loses the rows (TRUNCATE, DROP and a new
 * table, a restore of an empty one) loses the epoch with them, and the
 * shipped schema is unchanged (worker_id is a signed INT). -1 is no worker
 * ID (they are 0..max_worker, unsigned in every layout), and no identity
 * can be "~epoch": a node's is "ip:port" and a pod's ends in its ordinal,
 * both ending in a digit. Every read of the rows leaves out worker IDs
 * below 0; the fence and release writes name the holder's own worker ID
 * and nonce, never the sentinel's.
 *
 * The epoch row's heartbeat_ms is `since`: when the table last went back
 * in time, as far as leafd saw it. A restore keeps the server running, so
 * leafd sees it in two ways. The table's CREATE_TIME (a dump restored by
 * DROP TABLE, CREATE TABLE, INSERT, as mariadb-dump writes it) is noted in
 * the epoch row's instance as "@<ms>" by the first claim that sees it;
 * another one there means the table was created again since, and since
 * becomes the end of that second. A holder whose row's heartbeat_ms is
 * older than the one it last wrote sets since to the server's clock. An
 * epoch row without a note (the operator's, or an older leafd's) gets one
 * and keeps its since. A row whose heartbeat is older than since is free
 * only a lease after since (its holder, if alive, writes it within that,
 * or has stopped), and is taken gated on since + unknown_gate_ms, as a
 * missing row is.
 *
 * DESIGN: a promoted replica and rows put back. The marker also names the
 * server ("@<ms>:s<@@server_id>"); a claim that finds another @@server_id
 * (a replica promoted, which may lack the last heartbeats and claims, or
 * another server behind the address) sets since to the server's clock
 * now, before it looks at the rows. Rows put back into the same table (a
 * data-only restore) change neither CREATE_TIME nor the server, so each
 * holder also holds GET_LOCK on its worker ID on its connection (taken
 * after each write that lands; it ends with the connection, and is not in
 * any table a restore or a replica can bring back). A claim about to take
 * a row the table calls free (released, or its lease expired since a
 * write at or after since), or a gap in a table with an epoch row, first
 * asks whether another connection holds that ID's lock and ran a command
 * within half the lease (PROCESSLIST.TIME_MS, MariaDB): a holder that is
 * writing. If so the table went back in time: since is now, and the rows
 * are looked at again under it. The idle bound keeps a partitioned holder,
 * whose connection the server may keep for hours, from holding its ID:
 * its last command is its last landed write, over a lease before its row
 * expires. Not covered: a promoted replica with the same @@server_id
 * (replication refuses one), a marker that had not yet replicated or was
 * never written (the table's first claim not yet on the replica), a
 * server without GET_LOCK or TIME_MS, or other users' connections hidden
 * from PROCESSLIST (no PROCESS privilege): there the holders' next writes
 * see it, as before. */
#include <mysql.h>
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_mysql.h"
#include "db_mysql_conn.h"
#include "log.h"
#include "util.h"
#include "workerid_mysql.h"
#include "workerid_rows.h"

#define WM_IDENT_MAX 128
#define WM_NONCE_MAX 32

static const char wm_sql_create[] =
    "CREATE TABLE IF NOT EXISTS leaf_worker ("
    " worker_id INT NOT NULL, identity VARCHAR(128) NOT NULL,"
    " instance VARCHAR(32) NOT NULL, fence_ms BIGINT NOT NULL DEFAULT 0,"
    " heartbeat_ms BIGINT NOT NULL DEFAULT 0,"
    " released TINYINT NOT NULL DEFAULT 0, serial_zones TEXT NULL,"
    " PRIMARY KEY (worker_id),"
    " UNIQUE KEY uk_leaf_worker_identity (identity)) ENGINE = InnoDB";
/* A table made before serial_zones (the serial zones record,
 * workerid_lease.h's record) gets it once (MySQL has no ADD COLUMN IF NOT
 * EXISTS). */
static const char wm_sql_zones_col[] =
    "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA ="
    " DATABASE() AND TABLE_NAME = 'leaf_worker' AND COLUMN_NAME ="
    " 'serial_zones'";
static const char wm_sql_zones_add[] =
    "ALTER TABLE leaf_worker ADD COLUMN serial_zones TEXT NULL";
/* the record of the row a claim takes (locked by the claim) */
static const char wm_sql_zones_get[] =
    "SELECT serial_zones FROM leaf_worker WHERE worker_id = ?";
static const char wm_sql_now[] =
    "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";
/* Every row, locked (next-key locks up to the supremum: no insert either)
 * until the transaction ends. */
static const char wm_sql_lock_all[] =
    "SELECT worker_id, identity, instance, fence_ms, heartbeat_ms, released"
    " FROM leaf_worker ORDER BY worker_id FOR UPDATE";
static const char wm_sql_take[] =
    "UPDATE leaf_worker SET identity = ?, instance = ?, heartbeat_ms = ?,"
    " released = 0 WHERE worker_id = ?";
static const char wm_sql_insert[] =
    "INSERT INTO leaf_worker (worker_id, identity, instance, fence_ms,"
    " heartbeat_ms, released) VALUES (?, ?, ?, ?, ?, 0)";
#define WM_EPOCH_WORKER -1         /* the -1 below */
#define WM_EPOCH_IDENT  "~epoch"
static const char wm_sql_epoch_insert[] =
    "INSERT INTO leaf_worker (worker_id, identity, instance, fence_ms,"
    " heartbeat_ms, released) VALUES (-1, '" WM_EPOCH_IDENT "', '"
    WM_EPOCH_IDENT "', ?, ?, 1)";
/* the identity's old row when it now wants another ID: freed, fence kept */
static const char wm_sql_move[] =
    "UPDATE leaf_worker SET identity = ?, released = 1 WHERE worker_id = ?";
/* serial_zones: the record set_record gave, or NULL (the row's kept) */
static const char wm_sql_fence[] =
    "UPDATE leaf_worker SET fence_ms = ?, heartbeat_ms = ?,"
    " serial_zones = COALESCE(?, serial_zones)"
    " WHERE worker_id = ? AND instance = ? AND released = 0";
/* the fence write while the row holds the heartbeat this holder wrote
 * last, or a later one (a write that landed though its answer was lost) */
static const char wm_sql_fence_same[] =
    "UPDATE leaf_worker SET fence_ms = ?, heartbeat_ms = ?,"
    " serial_zones = COALESCE(?, serial_zones)"
    " WHERE worker_id = ? AND instance = ? AND released = 0"
    " AND heartbeat_ms >= ?";
static const char wm_sql_created[] =
    "SELECT CAST(UNIX_TIMESTAMP(CREATE_TIME) AS SIGNED) * 1000"
    " FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
    " AND TABLE_NAME = 'leaf_worker'";
/* the epoch row's instance: "@<CREATE_TIME ms>" of the table it was
 * seen in, and since */
static const char wm_sql_marker[] =
    "UPDATE leaf_worker SET instance = ?, heartbeat_ms = ?"
    " WHERE worker_id = -1 AND identity = '" WM_EPOCH_IDENT "'";
/* the table went back in time: since (the epoch row's heartbeat_ms) now */
static const char wm_sql_since[] =
    "UPDATE leaf_worker SET heartbeat_ms = GREATEST(heartbeat_ms, ?)"
    " WHERE worker_id = -1 AND identity = '" WM_EPOCH_IDENT "'";
/* The server behind the connection: a replica promoted, or another
 * server behind the same address, has another @@server_id (replication
 * requires distinct ones). */
static const char wm_sql_server[] = "SELECT CAST(@@server_id AS SIGNED)";
/* A holder's lock on its worker ID, held by its connection while it is
 * open: the server's, not the table's, so no restore of rows and no
 * failover to a replica can bring it back or fake it. Lock names are
 * server-wide: the database's name (hashed, to fit 64 characters) keeps
 * two databases' worker IDs apart. */
#define WM_LOCK_NAME \
    "CONCAT('leafd_worker:', LEFT(SHA1(IFNULL(DATABASE(), '')), 16), ':', ?)"
static const char wm_sql_lock[] = "SELECT GET_LOCK(" WM_LOCK_NAME ", 0)";
/* How long ago (ms) the connection that holds worker ID ?'s lock, if
 * another one does, ran its last command; NULL: none holds it (or it is
 * not ours to see: PROCESSLIST shows other users' connections only with
 * the PROCESS privilege). TIME_MS is MariaDB's. */
static const char wm_sql_lock_used[] =
    "SELECT CAST(TIME_MS AS SIGNED) FROM information_schema.PROCESSLIST"
    " WHERE ID = IS_USED_LOCK(" WM_LOCK_NAME ") AND ID <> CONNECTION_ID()";
static const char wm_sql_release[] =
    "UPDATE leaf_worker SET fence_ms = ?, released = 1,"
    " serial_zones = COALESCE(?, serial_zones)"
    " WHERE worker_id = ? AND instance = ?";

struct wmysql {
    struct db_mysql_conn c;     /* its timeout_s: the one it was made with */
    unsigned int  service_s;    /* in service (fence writes, release) */
    unsigned int  start_s;      /* a claim, the start's clock check */
    struct wlease_note note;    /* the last claim's epoch gate: why */
    long long     held;         /* the worker ID last claimed, -1 none */
    long long     held_hb;      /* the heartbeat_ms last written for it */
    long long     locked;       /* whose lock this connection holds, -1 */
    int           lock_off;     /* the server refused GET_LOCK: no more */
    int           live_off;     /* no PROCESSLIST.TIME_MS: not asked */
    int           zones_col;    /* serial_zones is known to be there */
    int           zones_tried;  /* adding it was tried (logged once) */
    struct wlease_rec rec;      /* serial_zones: the taken row's, to write */
};

static int wm_scalar(struct wmysql *m, const char *sql, MYSQL_BIND *p,
                     long long *v, int *null, char **cause);

/* A connection with the timeout for starting or for service. The client
 * fixes its timeouts when it connects, so the start's connection is
 * dropped at the first call in service and made again. */
static int
wm_connect(struct wmysql *m, int starting, char **cause)
{
    unsigned int want = starting ? m->start_s : m->service_s;

    if (m->c.db != NULL && m->c.timeout_s == want)
        return 0;
    db_mysql_conn_close(&m->c);
    if (db_mysql_thread_init() == -1) {
        *cause = xstrdup("mysql_thread_init failed");
        return -1;
    }
    m->c.timeout_s = want;
    m->locked = -1;             /* a new connection holds no lock */
    if ((m->c.db = db_mysql_connect(&m->c.t, m->c.where, want,
                                    cause)) == NULL)
        return -1;
    if (db_mysql_conn_run(&m->c, "SET time_zone = '+00:00'", NULL, NULL,
                          cause) == -1 ||
        db_mysql_conn_run(&m->c, wm_sql_create, NULL, NULL, cause) == -1)
        return -1;
    if (!m->zones_col) {
        long long have = 0;
        int null = 0;

        if (wm_scalar(m, wm_sql_zones_col, NULL, &have, &null, cause) == -1)
            return -1;
        if (have == 0) {
            char *why = NULL;

            if (!m->zones_tried)
                log_info("snowflake: adding column serial_zones to "
                         "leaf_worker (the serial zones record of each "
                         "worker ID)");
            m->zones_tried = 1;
            if (db_mysql_conn_run(&m->c, wm_sql_zones_add, NULL, NULL,
                                  &why) == -1) {
                *cause = xasprintf("leaf_worker has no column serial_zones, "
                                   "and adding it failed (%s): run `%s` as a "
                                   "user that may (docs/operations.md)",
                                   why != NULL ? why : "?", wm_sql_zones_add);
                free(why);
                return -1;
            }
        }
        m->zones_col = 1;
    }
    return 0;
}



/* The server's clock in ms, inside the current transaction. */
static int
wm_now(struct wmysql *m, long long *now, char **cause)
{
    MYSQL_BIND r[1];
    MYSQL_STMT *st;

    db_mysql_bind_i64(&r[0], now);
    if (db_mysql_conn_adhoc(&m->c, wm_sql_now, NULL, r, &st, NULL, 0,
                            cause) == -1)
        return -1;
    if (mysql_stmt_fetch(st) != 0) {
        db_mysql_conn_fail(&m->c, st, "NOW(3)", cause);
        mysql_stmt_close(st);
        return -1;
    }
    mysql_stmt_close(st);
    return 0;
}

/* When leaf_worker was created, on the server's clock in ms, the start of
 * that second (information_schema keeps seconds; 0 when it does not say):
 * 0, or -1 after db_mysql_conn_fail. */
static int
wm_created(struct wmysql *m, long long *ms, char **cause)
{
    MYSQL_BIND r[1];
    MYSQL_STMT *st;
    my_bool null = 0;

    *ms = 0;
    db_mysql_bind_i64(&r[0], ms);
    r[0].is_null = &null;
    if (db_mysql_conn_adhoc(&m->c, wm_sql_created, NULL, r, &st, NULL, 0,
                            cause) == -1)
        return -1;
    if (mysql_stmt_fetch(st) != 0 || null)
        *ms = 0;
    mysql_stmt_close(st);
    return 0;
}

/* One integer from sql (p: its parameters, or NULL): 0 with *v (*null
 * set when SQL NULL or no row), or -1 after db_mysql_conn_fail. */
static int
wm_scalar(struct wmysql *m, const char *sql, MYSQL_BIND *p, long long *v,
          int *null, char **cause)
{
    MYSQL_BIND r[1];
    MYSQL_STMT *st;
    my_bool isnull = 0;

    *v = 0;
    db_mysql_bind_i64(&r[0], v);
    r[0].is_null = &isnull;
    if (db_mysql_conn_adhoc(&m->c, sql, p, r, &st, NULL, 0, cause) == -1)
        return -1;
    *null = mysql_stmt_fetch(st) != 0 || isnull;
    mysql_stmt_close(st);
    return 0;
}

/* Whether a holder is writing worker's record now, whatever the table
 * says: another connection holds its lock and ran a command within half
 * the lease (a holder writes every heartbeat, under half the lease; one
 * whose writes have not landed for half the lease has stopped issuing,
 * and a partitioned holder's connection, which the server may keep for
 * hours, is idle that long). 0 with *used, or -1 after
 * db_mysql_conn_fail. A server without TIME_MS (MySQL) is not asked
 * again: *used 0. */
static int
wm_lock_used(struct wmysql *m, long long worker, int64_t lease_ms,
             int *used, char **cause)
{
    MYSQL_BIND p[1];
    long long v;
    int null;

    *used = 0;
    if (m->live_off || lease_ms <= 0)
        return 0;
    db_mysql_bind_i64(&p[0], &worker);
    if (wm_scalar(m, wm_sql_lock_used, p, &v, &null, cause) == -1) {
        if (m->c.last_errno == 0 || m->c.last_errno >= 2000)
            return -1;
        log_warn("snowflake: cannot see worker ID locks' connections (%s): "
                 "a claim then sees rows put back into leaf_worker only by "
                 "their holders' next writes (docs/operations.md)",
                 *cause != NULL ? *cause : "?");
        m->live_off = 1;
        return -1;          /* the connection is gone: the claim again */
    }
    *used = !null && v >= 0 && v < lease_ms / 2;
    return 0;
}

static int
wm_used(void *arg, long long worker, int64_t lease_ms, int *used,
        char **cause)
{
    return wm_lock_used(arg, worker, lease_ms, used, cause);
}

/* After a write that landed: hold worker's lock on this connection (it
 * ends with the connection). Not fatal: the write stands; a server that
 * refuses GET_LOCK (an error from the server, not a lost connection) is
 * not asked again. */
static void
wm_lock_take(struct wmysql *m, long long worker)
{
    MYSQL_BIND p[1];
    char *cause = NULL;
    long long v;
    int null;

    if (m->lock_off || m->locked == worker)
        return;
    db_mysql_bind_i64(&p[0], &worker);
    if (wm_scalar(m, wm_sql_lock, p, &v, &null, &cause) == -1) {
        if (m->c.last_errno != 0 && m->c.last_errno < 2000) {
            m->lock_off = 1;
            log_warn("snowflake: GET_LOCK refused by the server (%s): this "
                     "node's worker ID has no lock in mysql; a restore of "
                     "leaf_worker's rows is then seen only by its next "
                     "write (docs/operations.md)", cause ? cause : "?");
        }
        free(cause);
        return;
    }
    mysql_commit(m->c.db);      /* GET_LOCK opened no write; end the read */
    if (!null && v == 1)
        m->locked = worker;
}

/* Insert the epoch row, the server's clock read now (after the table was
 * locked: past every write that a lost row held): 0, or -1 after
 * db_mysql_conn_fail. */
static int
wm_epoch_insert(struct wmysql *m, long long *epoch, char **cause)
{
    MYSQL_BIND p[2];

    if (wm_now(m, epoch, cause) == -1)
        return -1;
    db_mysql_bind_i64(&p[0], epoch);
    db_mysql_bind_i64(&p[1], epoch);
    return db_mysql_conn_run(&m->c, wm_sql_epoch_insert, p, NULL, cause);
}

/* The epoch row's marker "@<CREATE_TIME ms>[:s<server_id>]": each part,
 * or -1 where it is missing ("~epoch", an older leafd's "@<ms>"). */
static void
wm_marker_parse(const char *marker, long long *created, long long *server)
{
    char *end;

    *created = -1;
    *server = -1;
    if (marker[0] != '@')
        return;
    *created = strtoll(marker + 1, &end, 10);
    if (end == marker + 1)
        *created = -1;
    if (end[0] == ':' && end[1] == 's') {
        char *e2;
        long long v = strtoll(end + 2, &e2, 10);
        if (e2 != end + 2 && *e2 == '\0')
            *server = v;
    }
}

/* The table went back in time, seen now (a live holder's lock on an ID
 * the table calls free): since, the epoch row's heartbeat_ms, is now. 0,
 * or -1 after db_mysql_conn_fail. */
static int
wm_since_now(struct wmysql *m, long long now, char **cause)
{
    MYSQL_BIND sp[1];

    db_mysql_bind_i64(&sp[0], &now);
    return db_mysql_conn_run(&m->c, wm_sql_since, sp, NULL, cause);
}

/* The identity is UNIQUE: before it takes another worker ID, its row for
 * worker gets a placeholder identity, released, its fence kept. 0, or -1
 * after db_mysql_conn_fail. */
static int
wm_move_out(struct wmysql *m, long long worker, char **cause)
{
    MYSQL_BIND p[2];
    char moved[32];
    unsigned long ml;

    snprintf(moved, sizeof moved, "~moved:%lld", worker);
    ml = strlen(moved);
    db_mysql_bind_str(&p[0], moved, ml, &ml);
    db_mysql_bind_i64(&p[1], &worker);
    return db_mysql_conn_run(&m->c, wm_sql_move, p, NULL, cause);
}

/* The serial_zones of worker's row as the claimed record (none when NULL;
 * at most WLEASE_REC_MAX + 1 bytes are read: more is refused above).
 * 0, or -1 after db_mysql_conn_fail. */
static int
wm_zones_get(struct wmysql *m, long long worker, char **cause)
{
    MYSQL_BIND p[1], r[1];
    MYSQL_STMT *st;
    my_bool isnull = 0;
    unsigned long len = 0;
    char *buf = xmalloc(WLEASE_REC_MAX + 2);
    int fr;

    db_mysql_bind_i64(&p[0], &worker);
    db_mysql_bind_str(&r[0], buf, WLEASE_REC_MAX + 1, &len);
    r[0].is_null = &isnull;
    if (db_mysql_conn_adhoc(&m->c, wm_sql_zones_get, p, r, &st, NULL, 0,
                            cause) == -1) {
        free(buf);
        return -1;
    }
    fr = mysql_stmt_fetch(st);
    mysql_stmt_close(st);
    wlease_rec_claim(&m->rec, (fr == 0 || fr == MYSQL_DATA_TRUNCATED) &&
                     !isnull ? buf : NULL, len);
    free(buf);
    return 0;
}

static int
wm_claim_once(void *arg, const struct wlease_claim *c, int64_t *worker,
              int64_t *fence_ms, char **cause)
{
    struct wmysql *m = arg;
    struct wrows_row row, *rows = NULL;
    MYSQL_BIND r[6], p[5];
    unsigned long il = 0, nl = 0, idl, inl;
    MYSQL_STMT *st;
    long long now, wid, hbv, fv, epoch = -1, since = 0, created;
    long long past_max = -1, past_fence = 0, server, m_created, m_server;
    char marker[WROWS_INST_MAX + 1] = "", seen[WM_NONCE_MAX + 1];
    size_t n = 0, cap = 0;
    int64_t take = -1, tfence = 0;
    int fr, insert = 0, has_epoch = 0, epoch_ok = 1, rc = WLEASE_DOWN;
    int waiting = 0, wr, null, used, live = 0, bumped = 0;

    if (strlen(c->identity) > WM_IDENT_MAX || strlen(c->nonce) >
        WM_NONCE_MAX) {
        *cause = xstrdup("snowflake identity over 128 bytes");
        return WLEASE_REFUSED;
    }
    if (wm_connect(m, 1, cause) == -1 || wm_now(m, &now, cause) == -1)
        return WLEASE_DOWN;
    memset(&row, 0, sizeof row);
    db_mysql_bind_i64(&r[0], &row.worker);
    db_mysql_bind_str(&r[1], row.ident, sizeof row.ident, &il);
    db_mysql_bind_str(&r[2], row.inst, sizeof row.inst, &nl);
    db_mysql_bind_i64(&r[3], &row.fence);
    db_mysql_bind_i64(&r[4], &row.hb);
    db_mysql_bind_i64(&r[5], &row.released);
    if (db_mysql_conn_adhoc(&m->c, wm_sql_lock_all, NULL, r, &st, NULL, 0,
                            cause) == -1)
        return WLEASE_DOWN;
    while ((fr = mysql_stmt_fetch(st)) == 0 || fr == MYSQL_DATA_TRUNCATED) {
        row.ident[il < sizeof row.ident ? il : sizeof row.ident - 1] = '\0';
        row.inst[nl < sizeof row.inst ? nl : sizeof row.inst - 1] = '\0';
        if (row.worker < 0) {           /* no worker ID: the epoch row? */
            if (row.worker == WM_EPOCH_WORKER) {
                has_epoch = 1;
                epoch = row.fence;
                since = row.hb;
                snprintf(marker, sizeof marker, "%s", row.inst);
                epoch_ok = strcmp(row.ident, WM_EPOCH_IDENT) == 0 &&
                           row.fence >= 0;
            }
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            rows = xrealloc(rows, cap * sizeof *rows);
        }
        rows[n++] = row;
    }
    mysql_stmt_close(st);
    if (!epoch_ok) {
        *cause = xasprintf("leaf_worker's epoch row (worker_id %d) is not "
                           "identity '%s' with a fence_ms of 0 or more "
                           "(found %lld): not claiming (docs/operations.md)",
                           WM_EPOCH_WORKER, WM_EPOCH_IDENT, epoch);
        rc = WLEASE_REFUSED;
        goto rollback;
    }
    if (!has_epoch && wm_epoch_insert(m, &epoch, cause) == -1) {
        free(rows);
        return WLEASE_DOWN;
    }
    assert(epoch >= 0);
    if (!has_epoch)
        since = epoch;      /* wm_epoch_insert's heartbeat_ms */
    /* a table created again (a dump restored: DROP, CREATE, INSERT) since
     * the epoch row's marker was written holds rows from before: since is
     * the end of the second its CREATE_TIME names */
    if (wm_created(m, &created, cause) == -1) {
        free(rows);
        return WLEASE_DOWN;
    }
    /* the server: another @@server_id than the marker names (a replica
     * promoted, which may lack the last writes) went back in time now */
    if (wm_scalar(m, wm_sql_server, NULL, &server, &null, cause) == -1) {
        free(rows);
        return WLEASE_DOWN;
    }
    if (null)
        server = -1;
    wm_marker_parse(marker, &m_created, &m_server);
    snprintf(seen, sizeof seen, "@%lld:s%lld", created > 0 ? created :
             m_created > 0 ? m_created : 0, server);
    if (strcmp(marker, seen) != 0) {
        MYSQL_BIND mp[2];
        unsigned long sl = strlen(seen);

        if (created > 0 && m_created > 0 && created != m_created &&
            created + 999 > since) {
            log_warn("snowflake: leaf_worker was created again at %lld "
                     "(a dump restored?): no worker ID whose row is older "
                     "before a lease has passed", created);
            since = created + 999;
        }
        if (server >= 0 && m_server >= 0 && server != m_server &&
            now > since) {
            log_warn("snowflake: leaf_worker's server changed (@@server_id "
                     "%lld, was %lld: a replica promoted, or another server "
                     "behind the address), and may lack the last writes: no "
                     "worker ID whose row is older before a lease has "
                     "passed", server, m_server);
            since = now;
        }
        db_mysql_bind_str(&mp[0], seen, sl, &sl);
        db_mysql_bind_i64(&mp[1], &since);
        if (db_mysql_conn_run(&m->c, wm_sql_marker, mp, NULL, cause) == -1) {
            free(rows);
            return WLEASE_DOWN;
        }
    }

    if (c->want_worker >= 0) {
        int64_t at, move;

        rc = wrows_wanted(c, rows, n, now, since, &at, &move, cause);
        if (rc != WLEASE_OK)
            goto rollback;
        rc = WLEASE_DOWN;
        /* free by the table, but its lock held: a live node's, and the
         * table went back in time (rows put back) */
        if ((at < 0 || strcmp(rows[at].ident, c->identity) != 0) &&
            (c->alias == NULL || c->alias[0] == '\0' || at < 0 ||
             strcmp(rows[at].ident, c->alias) != 0)) {
            if (wm_lock_used(m, c->want_worker, c->lease_ms, &used, cause) == -1) {
                free(rows);
                return WLEASE_DOWN;
            }
            if (used) {
                free(rows);
                if (wm_since_now(m, now, cause) == -1 ||
                    db_mysql_conn_commit(&m->c, cause) == -1)
                    return WLEASE_DOWN;
                *cause = wrows_live_lock(c->want_worker, now + c->lease_ms);
                return WLEASE_DOWN;
            }
        }
        if (move >= 0 && wm_move_out(m, move, cause) == -1) {
            free(rows);
            return WLEASE_DOWN;
        }
        take = c->want_worker;
        tfence = at >= 0 ? rows[at].fence : 0;
        insert = at < 0;
    }
    /* this identity's row; one outside the range (worker_bits lowered,
     * the range moved) is freed below, as the identity is UNIQUE */
    if (take < 0 && wrows_own(c, rows, n, now, &take, &tfence, &past_max,
                              &past_fence, cause) != WLEASE_OK) {
        rc = WLEASE_REFUSED;
        goto rollback;
    }
    /* else the lowest free: a gap, released, or lease expired (a lease
     * after since for a row older than since); and its fence below the
     * taker's clock */
rescan:
    if (take < 0) {
        struct wrows_pick pk;

        if (wrows_scan(c, rows, n, now, since, has_epoch, wm_used, m, &pk,
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
    /* since is now, and the rows looked at again: none older is free for
     * a lease, and a gap taken gates on it */
    if (live && !bumped) {
        wrows_log_live();
        if (wm_since_now(m, now, cause) == -1) {
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
        /* WLEASE_DOWN: a lease later it is free; the marker and since
         * written above are kept */
        free(rows);
        if (db_mysql_conn_commit(&m->c, cause) == -1)
            return WLEASE_DOWN;
        *cause = waiting ? wrows_waiting(since + c->lease_ms) :
                           wrows_live_lock(-1, since + c->lease_ms);
        return WLEASE_DOWN;
    }
    if (take < 0) {
        *cause = wrows_full(c);
        rc = WLEASE_REFUSED;
        goto rollback;
    }
    if (past_max >= 0) {
        wrows_log_moved(c, past_max, take);
        if (wm_move_out(m, past_max, cause) == -1) {
            free(rows);
            return WLEASE_DOWN;
        }
    }
    tfence = wrows_gate(c, rows, n, take, tfence, insert, past_fence, epoch,
                        since);
    wlease_rec_claim(&m->rec, NULL, 0);
    if (!insert && wm_zones_get(m, take, cause) == -1) {
        free(rows);
        return WLEASE_DOWN;
    }
    idl = strlen(c->identity);
    inl = strlen(c->nonce);
    wid = take;
    hbv = now;
    fv = tfence;
    if (insert) {
        db_mysql_bind_i64(&p[0], &wid);
        db_mysql_bind_str(&p[1], (char *)c->identity, idl, &idl);
        db_mysql_bind_str(&p[2], (char *)c->nonce, inl, &inl);
        db_mysql_bind_i64(&p[3], &fv);
        db_mysql_bind_i64(&p[4], &hbv);
        wr = db_mysql_conn_run(&m->c, wm_sql_insert, p, NULL, cause);
    } else {
        /* a taken-over row loses its old identity with this update */
        db_mysql_bind_str(&p[0], (char *)c->identity, idl, &idl);
        db_mysql_bind_str(&p[1], (char *)c->nonce, inl, &inl);
        db_mysql_bind_i64(&p[2], &hbv);
        db_mysql_bind_i64(&p[3], &wid);
        wr = db_mysql_conn_run(&m->c, wm_sql_take, p, NULL, cause);
    }
    free(rows);
    if (wr == -1 || db_mysql_conn_commit(&m->c, cause) == -1)
        return WLEASE_DOWN;
    m->held = take;
    m->held_hb = now;
    free(m->note.text);
    m->note.text = NULL;
    if (insert && (tfence == epoch + c->unknown_gate_ms ||
                   tfence == since + c->unknown_gate_ms)) {
        m->note.text = xasprintf("mysql has no record of this worker ID since "
                            "%lld (leaf_worker's epoch row, worker_id %d: "
                            "a new, truncated or re-created table), and a "
                            "node may have issued up to that + fence_step + "
                            "max_borrow + max_clock_offset under a lost row; "
                            "it ends by itself. Only on a table nothing was "
                            "ever issued from, `UPDATE leaf_worker SET "
                            "fence_ms = 0 WHERE worker_id = %d` skips it "
                            "(docs/operations.md)",
                            (long long)(tfence - c->unknown_gate_ms), WM_EPOCH_WORKER,
                            WM_EPOCH_WORKER);
        m->note.gate = tfence;
    }
    if (insert && tfence >= c->now_ms)
        log_warn("snowflake: mysql has no record of worker ID %" PRId64
                 " since %lld (leaf_worker's epoch row: a new or truncated "
                 "table): waiting until %" PRId64 " (%" PRId64 " ms) before "
                 "issuing, past anything a node could have issued before",
                 take, epoch, tfence, tfence - c->now_ms + 1);
    *worker = take;
    *fence_ms = tfence;
    return WLEASE_OK;

rollback:
    free(rows);
    mysql_rollback(m->c.db);
    return rc;
}

/* The claim locks every row (and the gaps) FOR UPDATE; two nodes claiming at
 * once into an empty or gapped table can deadlock on the gap locks, and
 * InnoDB rolls one back (1213) or it times out waiting (1205). Neither means
 * the store is down: that claim runs again at once, a few times. */
#define WM_ER_LOCK_WAIT_TIMEOUT 1205
#define WM_ER_LOCK_DEADLOCK     1213
#define WM_CLAIM_TRIES          5

static int
wm_claim(void *arg, const struct wlease_claim *c, int64_t *worker,
         int64_t *fence_ms, char **cause)
{
    struct wmysql *m = arg;
    int rc;

    for (int i = 1;; i++) {
        m->c.last_errno = 0;
        rc = wm_claim_once(arg, c, worker, fence_ms, cause);
        if (rc != WLEASE_DOWN || i == WM_CLAIM_TRIES ||
            (m->c.last_errno != WM_ER_LOCK_DEADLOCK &&
             m->c.last_errno != WM_ER_LOCK_WAIT_TIMEOUT))
            return rc;
        log_info("snowflake: leaf_worker claim rolled back (%s); again",
                 *cause);
        free(*cause);
        *cause = NULL;
    }
}

/* UPDATE ... WHERE instance = nonce, one transaction: WLEASE_OK, _LOST
 * (no row matched), _DOWN. */
static int
wm_update_held(struct wmysql *m, const char *sql, MYSQL_BIND *p,
               char **cause)
{
    MYSQL_STMT *st;
    my_ulonglong hit;

    if (db_mysql_conn_adhoc(&m->c, sql, p, NULL, &st, NULL, 0, cause) == -1)
        return WLEASE_DOWN;
    hit = mysql_stmt_affected_rows(st);
    mysql_stmt_close(st);
    if (db_mysql_conn_commit(&m->c, cause) == -1)
        return WLEASE_DOWN;
    if (hit == 0) {
        *cause = xstrdup("leaf_worker row is held by another instance now");
        db_mysql_conn_close(&m->c);     /* and our lock on it goes */
        return WLEASE_LOST;
    }
    return WLEASE_OK;
}

/* starting: the start's clock check, with the start's timeout. */
static int
wm_fence(void *arg, int64_t worker, const char *nonce, int64_t fence_ms,
         int starting, int64_t *store_ms, char **cause)
{
    struct wmysql *m = arg;
    MYSQL_BIND p[6], sp[1];
    long long f = fence_ms, now, w = worker, last = m->held_hb;
    unsigned long nl = strlen(nonce), rl = m->rec.next != NULL ?
                                          strlen(m->rec.next) : 0;
    my_bool rnull = m->rec.next == NULL;
    MYSQL_STMT *st;
    int same, rc;

    if (wm_connect(m, starting, cause) == -1 ||
        wm_now(m, &now, cause) == -1)
        return WLEASE_DOWN;
    db_mysql_bind_i64(&p[0], &f);
    db_mysql_bind_i64(&p[1], &now);
    db_mysql_bind_str(&p[2], m->rec.next != NULL ? m->rec.next : (char *)"",
                      rl, &rl);
    p[2].is_null = &rnull;
    db_mysql_bind_i64(&p[3], &w);
    db_mysql_bind_str(&p[4], (char *)nonce, nl, &nl);
    db_mysql_bind_i64(&p[5], &last);
    if (m->held != worker) {
        rc = wm_update_held(m, wm_sql_fence, p, cause);
        if (rc == WLEASE_OK) {
            *store_ms = now;
            wm_lock_take(m, worker);
        }
        return rc;
    }
    /* the row as this holder left it (the usual case), else WM_BACK: still
     * ours but older than we wrote it, a restored row: since is now */
    if (db_mysql_conn_adhoc(&m->c, wm_sql_fence_same, p, NULL, &st, NULL, 0,
                            cause) == -1)
        return WLEASE_DOWN;
    same = mysql_stmt_affected_rows(st) == 1;
    mysql_stmt_close(st);
    if (!same) {
        if (db_mysql_conn_adhoc(&m->c, wm_sql_fence, p, NULL, &st, NULL, 0,
                                cause) == -1)
            return WLEASE_DOWN;
        rc = mysql_stmt_affected_rows(st) == 1;
        mysql_stmt_close(st);
        if (!rc) {
            *cause = xstrdup("leaf_worker row is held by another instance "
                             "now");
            db_mysql_conn_close(&m->c);     /* rolls back; the lock goes */
            return WLEASE_LOST;
        }
        db_mysql_bind_i64(&sp[0], &now);
        if (db_mysql_conn_run(&m->c, wm_sql_since, sp, NULL, cause) == -1)
            return WLEASE_DOWN;
    }
    if (db_mysql_conn_commit(&m->c, cause) == -1)
        return WLEASE_DOWN;
    if (!same)
        log_warn("snowflake: leaf_worker's row of worker ID %" PRId64 " went "
                 "back in time (its heartbeat_ms is older than the %lld this "
                 "node wrote: a dump restored); written again with fence %"
                 PRId64 ", and other nodes take no worker ID whose row is "
                 "older for a lease", worker, last, fence_ms);
    m->held_hb = now;
    *store_ms = now;
    wm_lock_take(m, worker);
    return WLEASE_OK;
}

static int
wm_release(void *arg, int64_t worker, const char *nonce, int64_t fence_ms,
           char **cause)
{
    struct wmysql *m = arg;
    MYSQL_BIND p[4];
    long long f = fence_ms, w = worker;
    unsigned long nl = strlen(nonce), rl = m->rec.next != NULL ?
                                          strlen(m->rec.next) : 0;
    my_bool rnull = m->rec.next == NULL;

    if (wm_connect(m, 0, cause) == -1)
        return WLEASE_DOWN;
    db_mysql_bind_i64(&p[0], &f);
    db_mysql_bind_str(&p[1], m->rec.next != NULL ? m->rec.next : (char *)"",
                      rl, &rl);
    p[1].is_null = &rnull;
    db_mysql_bind_i64(&p[2], &w);
    db_mysql_bind_str(&p[3], (char *)nonce, nl, &nl);
    return wm_update_held(m, wm_sql_release, p, cause);
}

static char *
wm_claimed_record(void *arg)
{
    return wlease_rec_claimed(&((struct wmysql *)arg)->rec);
}

static void
wm_set_record(void *arg, const char *rec)
{
    wlease_rec_set(&((struct wmysql *)arg)->rec, rec);
}

static char *
wm_epoch_note(void *arg, int64_t *gate)
{
    return wlease_note_take(&((struct wmysql *)arg)->note, gate);
}

static void
wm_close(void *arg)
{
    struct wmysql *m = arg;

    if (m == NULL)
        return;
    free(m->note.text);
    wlease_rec_free(&m->rec);
    db_mysql_conn_free(&m->c);
    free(m);
}

/* ms as the client's whole seconds, at least 1 */
static unsigned int
wm_seconds(int64_t ms)
{
    return ms < 1000 ? 1 : (unsigned int)((ms + 999) / 1000);
}

int
workerid_mysql_store(const char *url, const char *user, const char *password,
                     int64_t timeout_ms, int64_t start_ms,
                     struct wlease_store *out, char **cause)
{
    struct wmysql *m = xcalloc(1, sizeof *m);

    if (url == NULL || db_mysql_target_from_url(url, &m->c.t, cause) == -1) {
        char *why = *cause;
        *cause = xasprintf("snowflake.mysql.url: %s", why ? why : "missing");
        free(why);
        free(m);
        return -1;
    }
    /* as the segment store: a JDBC URL takes leaf.jdbc.username/password,
     * a mysql:// URL's own user wins */
    if (user != NULL && *user != '\0' &&
        (strncmp(url, "jdbc:", 5) == 0 || m->c.t.user == NULL)) {
        free(m->c.t.user);
        free(m->c.t.password);
        m->c.t.user = xstrdup(user);
        m->c.t.password = password != NULL ? xstrdup(password) : NULL;
    }
    db_mysql_conn_set_where(&m->c);
    /* as it always has: every failure ends the connection (the next call
     * makes one with the timeout it needs), a deadlock too */
    m->c.deadlock_drops = 1;
    m->held = -1;
    m->locked = -1;
    m->service_s = wm_seconds(timeout_ms);
    m->start_s = wm_seconds(start_ms);
    memset(out, 0, sizeof *out);
    out->name = "mysql";
    out->claim = wm_claim;
    out->fence = wm_fence;
    out->release = wm_release;
    out->close = wm_close;
    out->epoch_note = wm_epoch_note;
    out->claimed_record = wm_claimed_record;
    out->set_record = wm_set_record;
    out->arg = m;
    return 0;
}
