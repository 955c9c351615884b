/* db_mysql_conn.c: the steps of leafd's MySQL statements on one connection
 * (see db_mysql_conn.h): one copy of the failure rule, the transaction and
 * its one rerun, for the segment stores and the worker-ID store alike. */
#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "csprng.h"
#include "db_mysql_conn.h"
#include "log.h"
#include "util.h"

void
db_mysql_conn_set_where(struct db_mysql_conn *c)
{
    free(c->where);
    if (c->t.socket != NULL)
        c->where = xasprintf("%s/%s", c->t.socket, c->t.database);
    else
        c->where = xasprintf("%s:%d/%s", c->t.host, c->t.port, c->t.database);
}

void
db_mysql_conn_close(struct db_mysql_conn *c)
{
    for (size_t i = 0; i < DB_MYSQL_CONN_STMTS; i++) {
        if (c->stmt[i] != NULL)
            mysql_stmt_close(c->stmt[i]);
        c->stmt[i] = NULL;
    }
    if (c->db != NULL)
        mysql_close(c->db);
    c->db = NULL;
}

void
db_mysql_conn_free(struct db_mysql_conn *c)
{
    if (c == NULL)
        return;
    db_mysql_conn_close(c);
    db_mysql_target_free(&c->t);
    free(c->where);
    c->where = NULL;
}

/* Errors that mean the connection died, not that the statement was bad. */
static int
conn_error(unsigned int err)
{
    return err == CR_SERVER_GONE_ERROR || err == CR_SERVER_LOST ||
           err == CR_SERVER_LOST_EXTENDED || err == ER_CONNECTION_KILLED ||
           err == ER_SERVER_SHUTDOWN;
}

int
db_mysql_conn_fail(struct db_mysql_conn *c, MYSQL_STMT *st, const char *what,
                   char **cause)
{
    unsigned int err;
    char *why = db_mysql_cause(c->where, what, c->db, st, &err);
    int dead;

    if (cause != NULL)
        *cause = why;
    else
        free(why);
    c->last_errno = err;
    c->stale = conn_error(err);
    dead = c->stale;
    if (!dead && mysql_rollback(c->db) != 0) {
        log_warn("ROLLBACK on %s: %s", c->where, mysql_error(c->db));
        dead = 1;
    }
    if (err != ER_LOCK_DEADLOCK || dead || c->deadlock_drops)
        db_mysql_conn_close(c);
    return -1;
}

int
db_mysql_conn_rollback(struct db_mysql_conn *c, char **cause)
{
    if (mysql_rollback(c->db) != 0)
        return db_mysql_conn_fail(c, NULL, "ROLLBACK", cause);
    return 0;
}

int
db_mysql_conn_commit(struct db_mysql_conn *c, char **cause)
{
    if (mysql_commit(c->db) == 0)
        return 0;
    db_mysql_conn_fail(c, NULL, "COMMIT", cause);
    c->stale = 0;
    return -1;
}

static int
conn_prepare(struct db_mysql_conn *c, const char *sql, MYSQL_STMT **st,
             char **cause)
{
    if ((*st = mysql_stmt_init(c->db)) == NULL)
        return db_mysql_conn_fail(c, NULL, "mysql_stmt_init", cause);
    if (mysql_stmt_prepare(*st, sql, strlen(sql)) != 0) {
        char what[64];
        snprintf(what, sizeof what, "prepare \"%.40s...\"", sql);
        return db_mysql_conn_fail(c, *st, what, cause);
    }
    return 0;
}

int
db_mysql_conn_open(struct db_mysql_conn *c, int statements, char **cause)
{
    const char *cipher;

    assert(c->nsql <= DB_MYSQL_CONN_STMTS);
    if ((c->db = db_mysql_connect(&c->t, c->where, c->timeout_s,
                                  cause)) == NULL)
        return -1;
    for (size_t i = 0; statements && i < c->nsql; i++)
        if (conn_prepare(c, c->sql[i], &c->stmt[i], cause) == -1)
            return -1;
    cipher = mysql_get_ssl_cipher(c->db);
    log_info("connected to mysql %s (server %s, %s%s)", c->where,
             mysql_get_server_info(c->db), cipher != NULL ? "TLS " : "no TLS",
             cipher != NULL ? cipher : "");
    return 0;
}

int
db_mysql_conn_begin(struct db_mysql_conn *c, int *reused, int64_t *t0,
                    char **cause)
{
    *reused = c->db != NULL;
    c->stale = 0;
    *t0 = util_mono_ms();
    if (c->db == NULL && db_mysql_conn_open(c, 1, cause) == -1)
        return -1;
    return 0;
}

/* After a failed attempt on a reused connection: run again once when it
 * died at once (not a timeout) before anything was committed. Frees the
 * first cause then. */
static int
conn_retry(struct db_mysql_conn *c, int attempt, int reused, int64_t t0,
           char **cause)
{
    if (attempt > 0 || !reused || !c->stale ||
        util_mono_ms() - t0 >= c->timeout_ms / 2)
        return 0;
    log_info("%s; reconnecting", cause != NULL && *cause != NULL ? *cause :
             "mysql connection lost");
    if (cause != NULL) {
        free(*cause);
        *cause = NULL;
    }
    return 1;
}

int
db_mysql_conn_exec(struct db_mysql_conn *c, MYSQL_STMT *st,
                   MYSQL_BIND *params, MYSQL_BIND *results, const char *what,
                   char **cause)
{
    if (params != NULL && mysql_stmt_bind_param(st, params) != 0)
        return db_mysql_conn_fail(c, st, what, cause);
    if (mysql_stmt_execute(st) != 0)
        return db_mysql_conn_fail(c, st, what, cause);
    if (results != NULL) {
        if (mysql_stmt_bind_result(st, results) != 0 ||
            mysql_stmt_store_result(st) != 0)
            return db_mysql_conn_fail(c, st, what, cause);
    }
    return 0;
}

int
db_mysql_conn_fetch(struct db_mysql_conn *c, MYSQL_STMT *st,
                    const char *what, char **cause)
{
    int rc = mysql_stmt_fetch(st);

    if (rc == 0 || rc == MYSQL_DATA_TRUNCATED)
        return 1;
    if (rc == MYSQL_NO_DATA)
        return 0;
    return db_mysql_conn_fail(c, st, what, cause);
}

int
db_mysql_conn_adhoc(struct db_mysql_conn *c, const char *sql, MYSQL_BIND *p,
                    MYSQL_BIND *r, MYSQL_STMT **st, const char *what,
                    unsigned int absent, char **cause)
{
    char quoted[64];
    int rc;

    if ((*st = mysql_stmt_init(c->db)) == NULL)
        return db_mysql_conn_fail(c, NULL, "mysql_stmt_init", cause);
    if (mysql_stmt_prepare(*st, sql, strlen(sql)) != 0) {
        if (absent == 0 || mysql_stmt_errno(*st) != absent)
            goto fail;
        mysql_stmt_close(*st);
        *st = NULL;
        return 1;
    }
    if ((p != NULL && mysql_stmt_bind_param(*st, p) != 0) ||
        mysql_stmt_execute(*st) != 0 ||
        (r != NULL && (mysql_stmt_bind_result(*st, r) != 0 ||
                       mysql_stmt_store_result(*st) != 0)))
        goto fail;
    return 0;

fail:
    if (what == NULL) {
        snprintf(quoted, sizeof quoted, "\"%.40s...\"", sql);
        what = quoted;
    }
    rc = db_mysql_conn_fail(c, *st, what, cause);
    mysql_stmt_close(*st);
    *st = NULL;
    return rc;
}

int
db_mysql_conn_run(struct db_mysql_conn *c, const char *sql, MYSQL_BIND *p,
                  const char *what, char **cause)
{
    MYSQL_STMT *st;

    if (db_mysql_conn_adhoc(c, sql, p, NULL, &st, what, 0, cause) == -1)
        return -1;
    mysql_stmt_close(st);
    return 0;
}

int
db_mysql_conn_tx(struct db_mysql_conn *c, db_mysql_tx_fn body, void *arg,
                 char **cause)
{
    int reused, rc;
    int64_t t0;

    for (int attempt = 0;; attempt++) {
        if (db_mysql_conn_begin(c, &reused, &t0, cause) == -1)
            return -1;
        rc = body(arg, cause);
        if (rc != -1 || !conn_retry(c, attempt, reused, t0, cause))
            return rc;
    }
}

/* The pause before rerun `attempt` (0-based) after a deadlock: 1..10 ms
 * times attempt + 1 (at most 5), random, so that two nodes that met do not
 * meet again in step. */
static int64_t
conn_deadlock_pause_ms(int attempt)
{
    unsigned char rnd = 0;

    if (csprng_fill(&rnd, 1) == -1)
        rnd = 0;
    return (int64_t)(1 + rnd % 10) * (attempt < 4 ? attempt + 1 : 5);
}

int
db_mysql_conn_tx_retry(struct db_mysql_conn *c, db_mysql_tx_fn body,
                       void *arg, char **cause)
{
    int64_t start = util_mono_ms(), pause;
    int rc;

    for (int attempt = 0;; attempt++) {
        c->last_errno = 0;
        rc = db_mysql_conn_tx(c, body, arg, cause);
        if (rc != -1 || c->last_errno != ER_LOCK_DEADLOCK ||
            attempt == DB_MYSQL_DEADLOCK_RETRIES)
            return rc;
        pause = conn_deadlock_pause_ms(attempt);
        if (util_mono_ms() - start + pause >= c->timeout_ms)
            return rc;
        log_info("%s; running it again (%d of %d)",
                 cause != NULL && *cause != NULL ? *cause : "deadlock",
                 attempt + 1, DB_MYSQL_DEADLOCK_RETRIES);
        if (cause != NULL) {
            free(*cause);
            *cause = NULL;
        }
        usleep((useconds_t)pause * 1000);
    }
}
