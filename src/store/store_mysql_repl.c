/* store_mysql_repl.c: what a single MySQL store checks about the server
 * it writes to (segment.mysql.replication), and leafd db-fence on MySQL.
 *
 * DESIGN
 *
 * A failover must never repeat a range. Two facts carry the rule:
 *
 * 1. Marks (store_marks.h). Every range this process receives, segment or
 *    serial, must start at or above the highest max_id it received before
 *    for that row, or it is refused and the process stops loading until a
 *    fence. That catches a database that went back in time (a restored
 *    dump, a promoted replica that lacks the last commits) as soon as it
 *    hands this node a range it already had. It cannot catch a range this
 *    node never had but another node did: for that, rule 2.
 *
 * 2. The server's identity. Every load reads @@server_id and @@read_only
 *    with its row, after its UPDATE and before its COMMIT (galera: the
 *    cluster's state UUID instead of the server), and the process records
 *    the identity of the server of its
 *    loads (store_marks_server, kept in segment.marks_file). A load on a
 *    server whose identity differs from the last one is a failover, and:
 *    - async (the default): refused, and the process with it (code
 *      db_failover), until an operator runs leafd db-fence with a floor
 *      above every ID any node issued: an asynchronous replica may lack
 *      commits, and no node can know what another node was given.
 *    - semi-sync: accepted from a server this node loaded from under
 *      semi-sync (its identity is recorded with ";semi"). In this mode a
 *      range is used only when a replica acknowledged its commit: before
 *      the COMMIT, the server must say Rpl_semi_sync_master_status ON with
 *      wait point AFTER_SYNC (else the load is rolled back, STORE_DEGRADED),
 *      and after
 *      the COMMIT, status still ON and Rpl_semi_sync_master_no_tx (commits
 *      the server gave up waiting for) unchanged since before the UPDATE
 *      (else the committed range is dropped, never used: STORE_DEGRADED).
 *      So every range any node uses is on a replica; the operator's part
 *      is to promote the replica with every acknowledged event (one
 *      replica, or the failover tool's "most advanced replica").
 *    - galera: a change of node within the cluster (same cluster state
 *      UUID) is accepted, and a load needs wsrep_ready ON and
 *      wsrep_local_state 4 (Synced) on its node, and the writer's lease:
 *      one Galera node at a time takes loads, the one named in
 *      leafd_galera_writer, whose lease (2 x segment.db_timeout_ms on the
 *      database's clock) every load through it renews in its transaction;
 *      a load through another node is refused as the database down until
 *      the lease lapses (each Galera node's clock: around a handover, or
 *      with clocks apart by more than the lease, two nodes may both load;
 *      their loads then conflict in certification on the writer's row as
 *      on the tag's). Two loads through two nodes at once lost an update
 *      in make test (both committed one range; the cause is not known), so
 *      leafd keeps loads on one node; the lease makes two at once rare, it
 *      does not make them impossible. A certification conflict (1213) is a
 *      failed load, retried. A new cluster (another UUID) is refused as
 *      under async.
 *    A server that says read_only is refused as down (STORE_DB_ERROR): a
 *    replica, or a primary being demoted.
 *
 * 3. The fence. leafd db-fence raises every row past the operator's floor
 *    and adds a row to leafd_fence (id, floor, serial floor, the server).
 *    A refused node reads the last fence at its first try after the
 *    refusal and records its id; only a later fence of the server that
 *    answers now, whose floors are at or above the node's segment and
 *    serial marks, lifts the refusal (store_marks_fenced). So a fence of
 *    an earlier incident, or of another server, never lets a node back.
 *
 * What no check here can see: a node that never loaded before (no marks,
 * no identity: also a node restarted without segment.marks_file) trusts
 * the server it finds; a restored dump on the same server is seen only by
 * the nodes that received ranges above it; a Galera cluster bootstrapped
 * by force from a node that lacks commits keeps its state UUID; under
 * semi-sync, a commit whose wait for the acknowledgement is cut short (a
 * killed query), or made while an administrator had semi-sync switched off
 * and on again (no_tx does not count those), may count as acknowledged. The operator fences after
 * every restore, every async failover and every forced bootstrap
 * (docs/operations.md, "Replicated databases").
 */
#include <mysql.h>
#include <mysqld_error.h>
#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "store.h"
#include "store_impl.h"
#include "store_marks.h"
#include "store_mysql_internal.h"
#include "util.h"

static const char *const repl_names[] = { "async", "semi-sync", "galera" };

/* MariaDB's status variables for the modes that need them (prepared per
 * load: MySQL 8 has no information_schema.GLOBAL_STATUS, and async mode
 * must work there). */
static const char sql_repl_status[] =
    "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
    "WHERE VARIABLE_NAME IN ('RPL_SEMI_SYNC_MASTER_STATUS', "
    "'RPL_SEMI_SYNC_MASTER_NO_TX', 'WSREP_READY', 'WSREP_LOCAL_STATE', "
    "'WSREP_CLUSTER_STATE_UUID', 'WSREP_GCOMM_UUID')";
/* Galera: one node of the cluster takes loads at a time (the writer),
 * by a lease in a row every load renews in its transaction. */
static const char sql_writer_ddl[] =
    "CREATE TABLE IF NOT EXISTS leafd_galera_writer ("
    " id tinyint NOT NULL, node varchar(40) NOT NULL, until_ms bigint NOT NULL,"
    " PRIMARY KEY (id)) ENGINE=InnoDB";
static const char sql_writer_row[] =
    "INSERT IGNORE INTO leafd_galera_writer (id, node, until_ms) VALUES (1, '', 0)";
/* The database's clock in unix ms, whatever the session time zone. */
#define SQL_NOW_MS "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " \
    "UTC_TIMESTAMP(3)) DIV 1000)"
static const char sql_writer_claim[] =
    "UPDATE leafd_galera_writer SET node = ?, until_ms = " SQL_NOW_MS " + ? "
    "WHERE id = 1 AND (node = ? OR until_ms < " SQL_NOW_MS ")";
static const char sql_writer_get[] =
    "SELECT node, until_ms - " SQL_NOW_MS " FROM leafd_galera_writer WHERE id = 1";
static const char sql_identity[] =
    "SELECT @@GLOBAL.server_id, @@GLOBAL.read_only";
static const char sql_wait_point[] =
    "SELECT @@GLOBAL.rpl_semi_sync_master_wait_point";
static const char sql_fence_last[] =
    "SELECT id, floor, serial_floor, server FROM leafd_fence "
    "ORDER BY id DESC LIMIT 1";
static const char sql_serial_rows[] =
    "SELECT COUNT(*) FROM leaf_alloc WHERE description = '"
    STORE_SERIAL_DESCRIPTION "'";
static const char sql_fence_ddl[] =
    "CREATE TABLE IF NOT EXISTS leafd_fence ("
    " id bigint NOT NULL AUTO_INCREMENT,"
    " floor bigint NOT NULL,"
    " serial_floor bigint NOT NULL,"
    " server varchar(96) NOT NULL,"
    " fenced_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,"
    " PRIMARY KEY (id)) ENGINE=InnoDB";
static const char sql_fence_rows[] =
    "UPDATE leaf_alloc SET max_id = ? WHERE max_id < ? AND "
    "(description IS NULL OR description <> '" STORE_SERIAL_DESCRIPTION "')";
static const char sql_fence_serial[] =
    "UPDATE leaf_alloc SET max_id = ? WHERE max_id < ? AND "
    "description = '" STORE_SERIAL_DESCRIPTION "'";
static const char sql_fence_insert[] =
    "INSERT INTO leafd_fence (floor, serial_floor, server) VALUES (?, ?, ?)";

/* What one read of the server said. */
_Static_assert(sizeof ((struct my_repl_state *)0)->id == MARKS_SERVER_MAX,
               "an identity fits the marks");

/* The last state seen, for /health and /metrics. */
static struct {
    pthread_mutex_t   lock;        /* guards everything below */
    int               mode;        /* -1: no single MySQL store */
    struct my_repl_state st;
    int               read;        /* st was read at least once */
    int               degraded;
    char              degraded_why[256];
    uint64_t          changes, dropped;
    /* the PostgreSQL store (store_pg.c): pg_mode "" when none */
    char              pg_mode[8];
    char              pg_server[MARKS_SERVER_MAX];
} shown = { .lock = PTHREAD_MUTEX_INITIALIZER, .mode = -1 };

static void
show(const struct store_mysql *m, const struct my_repl_state *st)
{
    pthread_mutex_lock(&shown.lock);
    shown.mode = m->repl;
    shown.st = *st;
    shown.read = 1;
    pthread_mutex_unlock(&shown.lock);
}

static void
show_degraded(int on, const char *why)
{
    pthread_mutex_lock(&shown.lock);
    if (on && !shown.degraded)
        log_error("durability degraded: %s", why);
    else if (!on && shown.degraded)
        log_info("durability restored: a replica acknowledges commits again");
    if (on)
        snprintf(shown.degraded_why, sizeof shown.degraded_why, "%s", why);
    shown.degraded = on;
    pthread_mutex_unlock(&shown.lock);
}

void
store_repl_degraded(int on, const char *why)
{
    show_degraded(on, why);
}

void
store_repl_show_pg(const char *mode, const char *server, int changed)
{
    pthread_mutex_lock(&shown.lock);
    snprintf(shown.pg_mode, sizeof shown.pg_mode, "%s", mode);
    snprintf(shown.pg_server, sizeof shown.pg_server, "%s", server);
    if (changed)
        shown.changes++;
    pthread_mutex_unlock(&shown.lock);
}

void
store_repl_pg_dropped(void)
{
    pthread_mutex_lock(&shown.lock);
    shown.dropped++;
    pthread_mutex_unlock(&shown.lock);
}

/* Strings of one status row into st. */
static void
status_value(struct my_repl_state *st, const char *name, const char *v)
{
    if (strcmp(name, "RPL_SEMI_SYNC_MASTER_STATUS") == 0)
        snprintf(st->semi, sizeof st->semi, "%.7s", v);
    else if (strcmp(name, "RPL_SEMI_SYNC_MASTER_NO_TX") == 0)
        st->no_tx = strtoll(v, NULL, 10);
    else if (strcmp(name, "WSREP_READY") == 0)
        snprintf(st->ready, sizeof st->ready, "%.7s", v);
    else if (strcmp(name, "WSREP_LOCAL_STATE") == 0)
        st->wsrep_state = strtoll(v, NULL, 10);
    else if (strcmp(name, "WSREP_GCOMM_UUID") == 0)
        snprintf(st->node, sizeof st->node, "%.39s", v);
    else if (strcmp(name, "WSREP_CLUSTER_STATE_UUID") == 0)
        snprintf(st->cluster, sizeof st->cluster, "%.39s", v);
}

/* The identity marks record for the server st describes. */
static void
repl_identity(const struct store_mysql *m, struct my_repl_state *st)
{
    if (m->repl == REPL_GALERA)
        snprintf(st->id, sizeof st->id, "galera:%s", st->cluster);
    else
        snprintf(st->id, sizeof st->id, "server_id=%lld", st->server_id);
}

/* Read the server's state inside the caller's transaction (with have_id,
 * not its server_id and read_only, which the load reads with its row, nor
 * is it shown yet): 0, or -1 after db_mysql_conn_fail. */
static int
read_state(struct store_mysql *m, struct my_repl_state *st, int have_id,
           char **cause)
{
    MYSQL_BIND r[2];
    MYSQL_STMT *q;
    char name[64], val[64];
    unsigned long name_len = 0, val_len = 0;
    int rc;

    if (!have_id) {
        memset(st, 0, sizeof *st);
        db_mysql_bind_i64(&r[0], &st->server_id);
        db_mysql_bind_i64(&r[1], &st->read_only);
        if (db_mysql_conn_adhoc(&m->c, sql_identity, NULL, r, &q,
                                "SELECT @@server_id", 0, cause) != 0)
            return -1;
        rc = db_mysql_conn_fetch(&m->c, q, "SELECT @@server_id", cause);
        mysql_stmt_close(q);
        if (rc != 1)
            return rc == -1 ? -1 : db_mysql_conn_fail(&m->c, NULL,
                                                      "SELECT @@server_id",
                                                      cause);
    }
    if (m->repl != REPL_ASYNC) {
        db_mysql_bind_str(&r[0], name, sizeof name, &name_len);
        db_mysql_bind_str(&r[1], val, sizeof val, &val_len);
        if (db_mysql_conn_adhoc(&m->c, sql_repl_status, NULL, r, &q,
                                "SELECT GLOBAL_STATUS", 0, cause) != 0)
            return -1;
        while ((rc = db_mysql_conn_fetch(&m->c, q, "SELECT GLOBAL_STATUS",
                                         cause)) == 1) {
            name[name_len < sizeof name ? name_len : sizeof name - 1] = '\0';
            val[val_len < sizeof val ? val_len : sizeof val - 1] = '\0';
            status_value(st, name, val);
        }
        mysql_stmt_close(q);
        if (rc == -1)
            return -1;
    }
    if (m->repl == REPL_SEMI_SYNC) {
        db_mysql_bind_str(&r[0], st->wait_point, sizeof st->wait_point,
                          &val_len);
        if (db_mysql_conn_adhoc(&m->c, sql_wait_point, NULL, r, &q,
                                "SELECT rpl_semi_sync_master_wait_point", 0,
                                cause) != 0)
            return -1;
        rc = db_mysql_conn_fetch(&m->c, q, "SELECT wait point", cause);
        mysql_stmt_close(q);
        if (rc == -1)
            return -1;
        st->wait_point[val_len < sizeof st->wait_point ? val_len :
                       sizeof st->wait_point - 1] = '\0';
    }
    repl_identity(m, st);
    if (!have_id)
        show(m, st);
    return 0;
}

static enum store_result
refuse(struct store_mysql *m, enum store_result rc, char **cause,
       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Roll back and return rc with *cause from fmt. */
static enum store_result
refuse(struct store_mysql *m, enum store_result rc, char **cause,
       const char *fmt, ...)
{
    va_list ap;

    if (db_mysql_conn_rollback(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    va_start(ap, fmt);
    util_vset_cause(cause, fmt, ap);
    va_end(ap);
    return rc;
}

/* The writer lease, in the load's transaction: 1 this node is the writer
 * (the lease renewed), 0 another node is (*holder, *left_ms), -1 after
 * db_mysql_conn_fail; the table is made when missing (2: run the load
 * again). */
static int
writer_claim(struct store_mysql *m, const char *node, char *holder,
             size_t cap, long long *left_ms, char **cause)
{
    MYSQL_BIND p[3], r[2];
    MYSQL_STMT *q;
    unsigned long nlen = strlen(node), hlen = 0;
    long long lease = m->c.timeout_ms * 2;
    int rc;

    store_my_bind_str(&p[0], node, &nlen);
    db_mysql_bind_i64(&p[1], &lease);
    store_my_bind_str(&p[2], node, &nlen);
    rc = db_mysql_conn_adhoc(&m->c, sql_writer_claim, p, NULL, &q,
                             "UPDATE leafd_galera_writer", ER_NO_SUCH_TABLE,
                             cause);
    if (rc == -1)
        return -1;
    if (rc == 1) {
        /* No table yet: the caller's transaction is rolled back, the table
         * made (DDL commits by itself), and the load fails this once. */
        if (db_mysql_conn_rollback(&m->c, cause) == -1 ||
            db_mysql_conn_run(&m->c, sql_writer_ddl, NULL,
                              "CREATE TABLE leafd_galera_writer", cause) == -1 ||
            db_mysql_conn_run(&m->c, sql_writer_row, NULL,
                              "INSERT leafd_galera_writer", cause) == -1 ||
            db_mysql_conn_commit(&m->c, cause) == -1)
            return -1;
        return 2;
    }
    rc = mysql_stmt_affected_rows(q) == 1;
    mysql_stmt_close(q);
    if (rc == 1)
        return 1;
    db_mysql_bind_str(&r[0], holder, cap - 1, &hlen);
    db_mysql_bind_i64(&r[1], left_ms);
    if (db_mysql_conn_adhoc(&m->c, sql_writer_get, NULL, r, &q,
                            "SELECT leafd_galera_writer", 0, cause) != 0)
        return -1;
    rc = db_mysql_conn_fetch(&m->c, q, "SELECT leafd_galera_writer", cause);
    mysql_stmt_close(q);
    if (rc == -1)
        return -1;
    holder[rc == 1 && hlen < cap ? hlen : 0] = '\0';
    if (rc == 0) {                  /* the row is gone: made again, alone */
        if (db_mysql_conn_rollback(&m->c, cause) == -1 ||
            db_mysql_conn_run(&m->c, sql_writer_row, NULL,
                              "INSERT leafd_galera_writer", cause) == -1 ||
            db_mysql_conn_commit(&m->c, cause) == -1)
            return -1;
        return 2;
    }
    return 0;
}

enum store_result
store_my_repl_pre(struct store_mysql *m, char **cause)
{
    struct my_repl_state *st = &m->pre;

    assert(m->repl == REPL_SEMI_SYNC || m->repl == REPL_GALERA);
    memset(st, 0, sizeof *st);
    if (read_state(m, st, 1, cause) == -1)
        return STORE_DB_ERROR;
    if (m->repl == REPL_GALERA &&
        (strcmp(st->ready, "ON") != 0 || st->wsrep_state != 4))
        return refuse(m, STORE_DB_ERROR, cause, "galera node %s is not ready "
                      "(wsrep_ready %s, wsrep_local_state %lld; 4 is Synced): "
                      "it is not in the primary component, or joining",
                      m->c.where, st->ready[0] ? st->ready : "missing",
                      st->wsrep_state);
    if (m->repl == REPL_GALERA) {
        char holder[40] = "";
        long long left = 0;
        int rc;

        if (st->node[0] == '\0')
            return refuse(m, STORE_DB_ERROR, cause, "galera node %s has no "
                          "wsrep_gcomm_uuid: it cannot hold the writer's "
                          "lease", m->c.where);
        rc = writer_claim(m, st->node, holder, sizeof holder, &left, cause);
        if (rc == -1)
            return STORE_DB_ERROR;
        if (rc == 2) {
            store_set_cause(cause, "galera: leafd_galera_writer made on %s; "
                            "the load runs again", m->c.where);
            return STORE_DB_ERROR;
        }
        if (rc != 1)
            return refuse(m, STORE_DB_ERROR, cause, "galera node %s (%s) is "
                          "not the cluster's writer: node %s holds the lease "
                          "for %lld ms more; leafd loads through one Galera "
                          "node at a time, and another leafd loads through "
                          "that one (point every node at one Galera node, or "
                          "let this one take over when that one stops)",
                          m->c.where, st->node, holder[0] ? holder : "?",
                          left);
    }
    if (m->repl == REPL_SEMI_SYNC &&
        (strcmp(st->semi, "ON") != 0 ||
         strcmp(st->wait_point, "AFTER_SYNC") != 0)) {
        char why[256];

        snprintf(why, sizeof why, "semi-sync on %s is %s with wait point %s: "
                 "no replica acknowledges commits losslessly (needs "
                 "Rpl_semi_sync_master_status ON and AFTER_SYNC); loads are "
                 "refused until it is", m->c.where,
                 st->semi[0] ? st->semi : "missing",
                 st->wait_point[0] ? st->wait_point : "missing");
        show_degraded(1, why);
        return refuse(m, STORE_DEGRADED, cause, "%s", why);
    }
    m->no_tx = st->no_tx;
    return STORE_OK;
}

enum store_result
store_my_repl_check(struct store_mysql *m, long long server_id,
                    long long read_only, char **cause)
{
    struct my_repl_state st;
    char last[MARKS_SERVER_MAX];

    assert(m->repl >= REPL_ASYNC && m->repl <= REPL_GALERA);
    /* Galera and semi-sync: their state read before the UPDATE. */
    if (m->repl == REPL_ASYNC)
        memset(&st, 0, sizeof st);
    else
        st = m->pre;
    st.server_id = server_id;
    st.read_only = read_only;
    repl_identity(m, &st);
    show(m, &st);
    if (st.read_only)
        return refuse(m, STORE_DB_ERROR, cause, "mysql %s (server_id %lld) is "
                      "read-only: a replica, or a primary being demoted; "
                      "loads wait for a writable primary", m->c.where,
                      st.server_id);

    store_marks_server(last, sizeof last);
    if (last[0] != '\0' && !store_marks_same_server(last, st.id)) {
        /* Galera: another cluster. Semi-sync accepts a change of server
         * only from a server this node loaded from under semi-sync, where
         * it used acknowledged ranges only. */
        if (m->repl != REPL_SEMI_SYNC || strstr(last, ";semi") == NULL) {
            store_marks_refuse("db_failover", "the database server behind %s "
                               "changed from %s to %s under "
                               "segment.mysql.replication = %s: the new server "
                               "may lack ranges that nodes already handed "
                               "out; every load is refused until an operator "
                               "runs leafd db-fence --floor=N with N above "
                               "every ID any node issued (the largest "
                               "marks_max of the nodes' /health; this node's "
                               "is %" PRId64 ")", m->c.where, last, st.id,
                               repl_names[m->repl], store_marks_max());
            return refuse(m, STORE_REFUSED, cause, "the database server "
                          "changed from %s to %s: loads are refused until "
                          "leafd db-fence", last, st.id);
        }
        log_warn("database server behind %s changed from %s to %s: accepted "
                 "(semi-sync: every range in use was acknowledged by a "
                 "replica)", m->c.where, last, st.id);
        pthread_mutex_lock(&shown.lock);
        shown.changes++;
        pthread_mutex_unlock(&shown.lock);
    }
    if (m->repl == REPL_SEMI_SYNC) {
        char id[MARKS_SERVER_MAX + 8];

        snprintf(id, sizeof id, "%s;semi", st.id);
        if (strcmp(last, id) != 0)
            store_marks_set_server(id);
    } else if (last[0] == '\0' || !store_marks_same_server(last, st.id)) {
        store_marks_set_server(st.id);
    }
    return STORE_OK;
}

enum store_result
store_my_repl_acked(struct store_mysql *m, int64_t max_id, char **cause)
{
    struct my_repl_state st;
    char why[256];

    assert(m->repl == REPL_SEMI_SYNC);
    if (read_state(m, &st, 0, cause) == -1)
        return STORE_DB_ERROR;
    if (db_mysql_conn_rollback(&m->c, cause) == -1)   /* the read's */
        return STORE_DB_ERROR;
    if (strcmp(st.semi, "ON") == 0 && st.no_tx == m->no_tx) {
        show_degraded(0, NULL);
        return STORE_OK;
    }
    snprintf(why, sizeof why, "the commit of the range ending at %" PRId64
             " on %s was not acknowledged by a replica (semi-sync %s, "
             "Rpl_semi_sync_master_no_tx %lld -> %lld): the range is dropped; "
             "semi-sync fell back to asynchronous", max_id, m->c.where,
             st.semi[0] ? st.semi : "missing", m->no_tx, st.no_tx);
    show_degraded(1, why);
    pthread_mutex_lock(&shown.lock);
    shown.dropped++;
    pthread_mutex_unlock(&shown.lock);
    store_set_cause(cause, "%s", why);
    return STORE_DEGRADED;
}

/* ---- the state without a load (store_probe) ---- */

static enum store_result
probe_once(struct store_mysql *m, void *arg, char **cause)
{
    struct my_repl_state st;

    (void)arg;
    if (read_state(m, &st, 0, cause) == -1 ||
        db_mysql_conn_rollback(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    if (m->repl == REPL_SEMI_SYNC) {
        int on = strcmp(st.semi, "ON") == 0 &&
                 strcmp(st.wait_point, "AFTER_SYNC") == 0;
        char why[256];

        snprintf(why, sizeof why, "semi-sync on %s is %s with wait point %s: "
                 "no replica acknowledges commits losslessly", m->c.where,
                 st.semi[0] ? st.semi : "missing",
                 st.wait_point[0] ? st.wait_point : "missing");
        show_degraded(!on, why);
    }
    return STORE_OK;
}

void
store_my_probe(struct store *s)
{
    struct store_mysql *m = (struct store_mysql *)s;
    char *cause = NULL;

    if (m->repl < 0)
        return;                 /* a database of a set */
    if (store_my_tx(m, probe_once, NULL, &cause) != STORE_OK)
        log_debug("replication state of %s not read: %s", m->c.where,
                  cause ? cause : "?");
    free(cause);
}

/* ---- leafd db-fence ---- */

struct fence_get_arg {
    struct marks_fence *last;
    char               *server;
    size_t              cap;
};

static enum store_result
fence_get_once(struct store_mysql *m, void *arg, char **cause)
{
    struct fence_get_arg *a = arg;
    struct marks_fence *last = a->last;
    struct my_repl_state st;
    MYSQL_STMT *q;
    MYSQL_BIND r[4];
    long long id = 0, floor = 0, serial_floor = 0;
    unsigned long len = 0;
    int rc;

    if (read_state(m, &st, 0, cause) == -1)
        return STORE_DB_ERROR;
    memset(last, 0, sizeof *last);
    db_mysql_bind_i64(&r[0], &id);
    db_mysql_bind_i64(&r[1], &floor);
    db_mysql_bind_i64(&r[2], &serial_floor);
    db_mysql_bind_str(&r[3], last->server, sizeof last->server - 1, &len);
    rc = db_mysql_conn_adhoc(&m->c, sql_fence_last, NULL, r, &q,
                             "SELECT leafd_fence", ER_NO_SUCH_TABLE, cause);
    if (rc == -1)
        return STORE_DB_ERROR;
    if (rc == 0) {
        rc = db_mysql_conn_fetch(&m->c, q, "SELECT leafd_fence", cause);
        mysql_stmt_close(q);
        if (rc == -1)
            return STORE_DB_ERROR;
        if (rc == 1) {
            last->id = id;
            last->floor = floor;
            last->serial_floor = serial_floor;
            last->server[len < sizeof last->server ? len :
                         sizeof last->server - 1] = '\0';
        }
    }
    if (db_mysql_conn_rollback(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    snprintf(a->server, a->cap, "%s", st.id);
    return STORE_OK;
}

enum store_result
store_my_fence_get(struct store *s, struct marks_fence *last, char *server,
                   size_t cap, char **cause)
{
    struct store_mysql *m = (struct store_mysql *)s;
    struct fence_get_arg a = { last, server, cap };

    if (m->repl < 0)
        m->repl = REPL_ASYNC;
    return store_my_tx(m, fence_get_once, &a, cause);
}

struct fence_set_arg {
    long long floor, serial_floor;
    int64_t  *rows;
};

static enum store_result
fence_set_once(struct store_mysql *m, void *arg, char **cause)
{
    struct fence_set_arg *a = arg;
    struct my_repl_state st;
    MYSQL_BIND p[3];
    MYSQL_STMT *q;
    char server[MARKS_SERVER_MAX];
    unsigned long server_len;

    /* CREATE TABLE commits by itself: before the transaction's writes. */
    if (db_mysql_conn_run(&m->c, sql_fence_ddl, NULL,
                          "CREATE TABLE leafd_fence", cause) == -1 ||
        read_state(m, &st, 0, cause) == -1)
        return STORE_DB_ERROR;
    if (st.read_only)
        return refuse(m, STORE_DB_ERROR, cause, "mysql %s (server_id %lld) is "
                      "read-only: fence the primary", m->c.where, st.server_id);
    if (a->serial_floor == 0) {
        MYSQL_BIND r[1];
        long long n = 0;
        int rc;

        db_mysql_bind_i64(&r[0], &n);
        if (db_mysql_conn_adhoc(&m->c, sql_serial_rows, NULL, r, &q,
                                "SELECT COUNT(*) leaf_alloc", 0, cause) != 0)
            return STORE_DB_ERROR;
        rc = db_mysql_conn_fetch(&m->c, q, "SELECT COUNT(*)", cause);
        mysql_stmt_close(q);
        if (rc == -1)
            return STORE_DB_ERROR;
        if (n > 0)
            return refuse(m, STORE_BAD_ARG, cause, "mysql %s holds %lld serial "
                          "rows: give --serial-floor=S too, S above the "
                          "largest serial_marks_max of the nodes' /health",
                          m->c.where, n);
    }
    db_mysql_bind_i64(&p[0], &a->floor);
    db_mysql_bind_i64(&p[1], &a->floor);
    if (db_mysql_conn_adhoc(&m->c, sql_fence_rows, p, NULL, &q,
                            "UPDATE leaf_alloc (fence)", 0, cause) != 0)
        return STORE_DB_ERROR;
    *a->rows = (int64_t)mysql_stmt_affected_rows(q);
    mysql_stmt_close(q);
    if (a->serial_floor > 0) {
        db_mysql_bind_i64(&p[0], &a->serial_floor);
        db_mysql_bind_i64(&p[1], &a->serial_floor);
        if (db_mysql_conn_adhoc(&m->c, sql_fence_serial, p, NULL, &q,
                                "UPDATE leaf_alloc (fence serial)", 0,
                                cause) != 0)
            return STORE_DB_ERROR;
        *a->rows += (int64_t)mysql_stmt_affected_rows(q);
        mysql_stmt_close(q);
    }
    snprintf(server, sizeof server, "%s", st.id);
    server_len = strlen(server);
    db_mysql_bind_i64(&p[0], &a->floor);
    db_mysql_bind_i64(&p[1], &a->serial_floor);
    store_my_bind_str(&p[2], server, &server_len);
    if (db_mysql_conn_run(&m->c, sql_fence_insert, p, "INSERT leafd_fence",
                          cause) == -1 ||
        db_mysql_conn_commit(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

enum store_result
store_my_fence_set(struct store *s, int64_t floor, int64_t serial_floor,
                   int64_t *rows, char **cause)
{
    struct store_mysql *m = (struct store_mysql *)s;
    struct fence_set_arg a = { floor, serial_floor, rows };

    if (m->repl < 0)
        m->repl = REPL_ASYNC;
    return store_my_tx(m, fence_set_once, &a, cause);
}

/* ---- /health and /metrics ---- */

void
store_repl_status_json(struct sbuf *b)
{
    char code[32], why[MARKS_WHY_MAX], server[MARKS_SERVER_MAX];
    int refused = store_marks_refused(code, sizeof code, why, sizeof why);

    store_marks_server(server, sizeof server);
    sbuf_printf(b, "\"marks_max\":%" PRId64 ",\"serial_marks_max\":%" PRId64
                ",\"marks\":%zu,\"server\":", store_marks_max(),
                store_marks_serial_max(), store_marks_count());
    sbuf_json_str(b, server);
    if (refused) {
        sbuf_puts(b, ",\"refused\":{\"code\":");
        sbuf_json_str(b, code);
        sbuf_puts(b, ",\"reason\":");
        sbuf_json_str(b, why);
        sbuf_printf(b, ",\"needs_fence_after\":%" PRId64 "}",
                    store_marks_refused_fence());
    }
    pthread_mutex_lock(&shown.lock);
    if (shown.mode >= 0) {
        const struct my_repl_state *st = &shown.st;

        sbuf_printf(b, ",\"replication\":{\"mode\":\"%s\"", repl_names[shown.mode]);
        if (shown.read) {
            sbuf_printf(b, ",\"server_id\":%lld,\"read_only\":%s",
                        st->server_id, st->read_only ? "true" : "false");
            if (shown.mode == REPL_SEMI_SYNC) {
                sbuf_puts(b, ",\"semi_sync\":");
                sbuf_json_str(b, st->semi[0] ? st->semi : "missing");
                sbuf_puts(b, ",\"wait_point\":");
                sbuf_json_str(b, st->wait_point);
                sbuf_printf(b, ",\"no_tx\":%lld", st->no_tx);
            }
            if (shown.mode == REPL_GALERA) {
                sbuf_puts(b, ",\"wsrep_ready\":");
                sbuf_json_str(b, st->ready[0] ? st->ready : "missing");
                sbuf_printf(b, ",\"wsrep_local_state\":%lld,\"cluster\":",
                            st->wsrep_state);
                sbuf_json_str(b, st->cluster);
            }
        }
        sbuf_printf(b, ",\"durability\":\"%s\"", shown.degraded ? "degraded" : "ok");
        if (shown.degraded) {
            sbuf_puts(b, ",\"degraded_reason\":");
            sbuf_json_str(b, shown.degraded_why);
        }
        sbuf_printf(b, ",\"server_changes\":%" PRIu64 ",\"ranges_dropped\":%"
                    PRIu64 "}", shown.changes, shown.dropped);
    } else if (shown.pg_mode[0] != '\0') {
        sbuf_printf(b, ",\"replication\":{\"store\":\"postgresql\",\"mode\":\"%s\","
                    "\"server\":", shown.pg_mode);
        sbuf_json_str(b, shown.pg_server);
        sbuf_printf(b, ",\"durability\":\"%s\"", shown.degraded ? "degraded" : "ok");
        if (shown.degraded) {
            sbuf_puts(b, ",\"degraded_reason\":");
            sbuf_json_str(b, shown.degraded_why);
        }
        sbuf_printf(b, ",\"server_changes\":%" PRIu64 ",\"ranges_dropped\":%"
                    PRIu64 "}", shown.changes, shown.dropped);
    }
    pthread_mutex_unlock(&shown.lock);
}

int
store_repl_health(char *why, size_t cap)
{
    char code[32], reason[MARKS_WHY_MAX];
    int bad = 0;

    if (store_marks_refused(code, sizeof code, reason, sizeof reason)) {
        snprintf(why, cap, "loads refused (%s): %s", code, reason);
        return 2;
    }
    pthread_mutex_lock(&shown.lock);
    if (shown.degraded) {
        snprintf(why, cap, "durability degraded: %s", shown.degraded_why);
        bad = 1;
    }
    pthread_mutex_unlock(&shown.lock);
    return bad;
}

void
store_repl_metrics(struct sbuf *b)
{
    char code[32];
    int refused = store_marks_refused(code, sizeof code, NULL, 0);

    sbuf_printf(b, "# HELP leafd_segment_marks_max The highest max_id this "
                "node received for any row.\n"
                "# TYPE leafd_segment_marks_max gauge\n"
                "leafd_segment_marks_max %" PRId64 "\n"
                "# HELP leafd_serial_marks_max The highest max_id this node "
                "received for any serial row.\n"
                "# TYPE leafd_serial_marks_max gauge\n"
                "leafd_serial_marks_max %" PRId64 "\n"
                "# HELP leafd_segment_loads_refused 1 while loads are refused "
                "until leafd db-fence, by code.\n"
                "# TYPE leafd_segment_loads_refused gauge\n"
                "leafd_segment_loads_refused{code=\"store_behind\"} %d\n"
                "leafd_segment_loads_refused{code=\"db_failover\"} %d\n",
                store_marks_max(), store_marks_serial_max(),
                refused && strcmp(code, "store_behind") == 0,
                refused && strcmp(code, "db_failover") == 0);
    pthread_mutex_lock(&shown.lock);
    if (shown.mode >= 0) {
        const struct my_repl_state *st = &shown.st;

        sbuf_printf(b, "# HELP leafd_db_durability_degraded 1 while no "
                    "replica acknowledges commits (semi-sync).\n"
                    "# TYPE leafd_db_durability_degraded gauge\n"
                    "leafd_db_durability_degraded{mode=\"%s\"} %d\n"
                    "# HELP leafd_db_read_only 1 when the server said read_only.\n"
                    "# TYPE leafd_db_read_only gauge\n"
                    "leafd_db_read_only %d\n"
                    "# HELP leafd_db_server_changes_total Changes of server "
                    "accepted (semi-sync, galera).\n"
                    "# TYPE leafd_db_server_changes_total counter\n"
                    "leafd_db_server_changes_total %" PRIu64 "\n"
                    "# HELP leafd_db_ranges_dropped_total Committed ranges "
                    "not used: no replica acknowledged them.\n"
                    "# TYPE leafd_db_ranges_dropped_total counter\n"
                    "leafd_db_ranges_dropped_total %" PRIu64 "\n",
                    repl_names[shown.mode], shown.degraded,
                    (int)st->read_only, shown.changes, shown.dropped);
        if (shown.mode == REPL_GALERA)
            sbuf_printf(b, "# HELP leafd_db_wsrep_local_state The Galera "
                        "node's wsrep_local_state (4: Synced).\n"
                        "# TYPE leafd_db_wsrep_local_state gauge\n"
                        "leafd_db_wsrep_local_state %lld\n", st->wsrep_state);
    } else if (shown.pg_mode[0] != '\0') {
        /* the PostgreSQL store: the same series, without read_only (a
         * standby is refused at connect) */
        sbuf_printf(b, "# HELP leafd_db_durability_degraded 1 while no "
                    "standby acknowledges commits (sync).\n"
                    "# TYPE leafd_db_durability_degraded gauge\n"
                    "leafd_db_durability_degraded{mode=\"%s\"} %d\n"
                    "# HELP leafd_db_server_changes_total Changes of server "
                    "accepted (sync: a promoted standby of the cluster).\n"
                    "# TYPE leafd_db_server_changes_total counter\n"
                    "leafd_db_server_changes_total %" PRIu64 "\n"
                    "# HELP leafd_db_ranges_dropped_total Committed ranges "
                    "not used: no standby acknowledged them.\n"
                    "# TYPE leafd_db_ranges_dropped_total counter\n"
                    "leafd_db_ranges_dropped_total %" PRIu64 "\n",
                    shown.pg_mode, shown.degraded, shown.changes, shown.dropped);
    }
    pthread_mutex_unlock(&shown.lock);
}
