/* db_pg.c: one PostgreSQL connection with leafd's options, and its
 * statements run with a deadline (see db_pg.h). */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_pg.h"
#include "log.h"
#include "util.h"

#define NKEYS_MAX 64               /* libpq has about 40 keywords */

/* "host:port,host:port/db" for messages: each host with its port (one
 * port for all, or the default). */
static void
set_where(struct db_pg_conn *c)
{
    const char *host = "", *port = "", *db = "", *user = "", *h, *p;
    char out[160];
    size_t len = 0;

    for (int i = 0; c->keys[i] != NULL; i++) {
        if (strcmp(c->keys[i], "host") == 0 ||
            (strcmp(c->keys[i], "hostaddr") == 0 && *host == '\0'))
            host = c->vals[i];
        else if (strcmp(c->keys[i], "port") == 0)
            port = c->vals[i];
        else if (strcmp(c->keys[i], "dbname") == 0)
            db = c->vals[i];
        else if (strcmp(c->keys[i], "user") == 0)
            user = c->vals[i];
    }
    out[0] = '\0';
    for (h = host, p = port; len < sizeof out - 1;) {
        size_t hn = strcspn(h, ","), pn = strcspn(p, ",");

        len += (size_t)snprintf(out + len, sizeof out - len, "%s%.*s:%.*s",
                                len ? "," : "", (int)hn, h, pn ? (int)pn : 4,
                                pn ? p : "5432");
        if (h[hn] == '\0' || len >= sizeof out - 1)
            break;
        h += hn + 1;
        if (p[pn] != '\0')
            p += pn + 1;
    }
    free(c->where);
    c->where = xasprintf("%s/%.60s", out, *db ? db : user);
}

/* key=val into the arrays at *n (replacing a key there). */
static void
put(struct db_pg_conn *c, int *n, const char *key, const char *val)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(c->keys[i], key) == 0) {
            free(c->vals[i]);
            c->vals[i] = xstrdup(val);
            return;
        }
    assert(*n < NKEYS_MAX);
    c->keys[*n] = xstrdup(key);
    c->vals[*n] = xstrdup(val);
    (*n)++;
}

static const char *
get(const struct db_pg_conn *c, const char *key)
{
    for (int i = 0; c->keys[i] != NULL; i++)
        if (strcmp(c->keys[i], key) == 0)
            return c->vals[i];
    return NULL;
}

int
db_pg_conn_init(struct db_pg_conn *c, const char *conninfo, const char *key,
                int64_t timeout_ms, const struct db_pg_stmt *sql, int nsql,
                char **cause)
{
    PQconninfoOption *opts;
    char buf[64], *opt;
    const char *user_opts;
    int n = 0;

    assert(nsql >= 0 && nsql <= DB_PG_STMTS);
    if (db_pg_conninfo_check(conninfo, key, cause) == -1)
        return -1;
    opts = PQconninfoParse(conninfo, NULL);
    if (opts == NULL) {
        util_set_cause(cause, "%s: cannot parse", key);
        return -1;
    }
    c->keys = xcalloc(NKEYS_MAX + 1, sizeof *c->keys);
    c->vals = xcalloc(NKEYS_MAX + 1, sizeof *c->vals);
    for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
        if (o->val != NULL)
            put(c, &n, o->keyword, o->val);
    PQconninfoFree(opts);
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
    if (get(c, "connect_timeout") == NULL) {
        int64_t s = (c->timeout_ms + 999) / 1000;

        snprintf(buf, sizeof buf, "%lld", (long long)(s < 2 ? 2 : s));
        put(c, &n, "connect_timeout", buf);
    }
    if (get(c, "application_name") == NULL)
        put(c, &n, "application_name", "leafd");
    /* The server ends a statement before the client's deadline, so that
     * its own error comes back, and a transaction left idle. */
    user_opts = get(c, "options");
    opt = xasprintf("%s%s-c statement_timeout=%lld "
                    "-c idle_in_transaction_session_timeout=%lld",
                    user_opts != NULL ? user_opts : "",
                    user_opts != NULL && *user_opts ? " " : "",
                    (long long)(c->timeout_ms * 4 / 5),
                    (long long)c->timeout_ms * 2);
    put(c, &n, "options", opt);
    free(opt);
    c->sql = sql;
    c->nsql = nsql;
    set_where(c);
    return 0;
}

void
db_pg_conn_close(struct db_pg_conn *c)
{
    if (c->db != NULL)
        PQfinish(c->db);
    c->db = NULL;
}

void
db_pg_conn_free(struct db_pg_conn *c)
{
    if (c == NULL)
        return;
    db_pg_conn_close(c);
    for (int i = 0; c->keys != NULL && c->keys[i] != NULL; i++) {
        free(c->keys[i]);
        free(c->vals[i]);
    }
    free(c->keys);
    free(c->vals);
    free(c->where);
    c->keys = c->vals = NULL;
    c->where = NULL;
}

int
db_pg_conn_fail(struct db_pg_conn *c, const char *what, const char *why,
                char **cause)
{
    util_set_cause(cause, "postgresql %s: %s: %s", c->where, what, why);
    db_pg_conn_close(c);
    return -1;
}

/* libpq's last line of text, without its newline. */
static void
pq_text(const char *msg, char *out, size_t cap)
{
    size_t len = strlen(msg);

    while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
        len--;
    snprintf(out, cap, "%.*s", (int)len, msg);
    for (char *p = out; *p; p++)
        if (*p == '\n')
            *p = ' ';
}

/* Wait until the socket is ready for events or the deadline passes:
 * 1 ready, 0 the deadline passed, -1 poll failed. */
static int
wait_sock(PGconn *db, short events, int64_t deadline)
{
    struct pollfd p;

    p.fd = PQsocket(db);
    p.events = events;
    if (p.fd < 0)
        return -1;
    for (;;) {
        int64_t left = deadline - util_mono_ms();
        int rc;

        if (left <= 0)
            return 0;
        rc = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (rc > 0)
            return 1;
        if (rc == -1 && errno != EINTR)
            return -1;
    }
}

/* A lost connection, a deadline passed: the connection is closed. */
static PGresult *
lost(struct db_pg_conn *c, const char *what, const char *why, char **cause)
{
    char text[256];

    pq_text(why != NULL ? why : PQerrorMessage(c->db), text, sizeof text);
    c->lost = 1;
    db_pg_conn_fail(c, what, text, cause);
    return NULL;
}

/* Flush what was sent and read every result; the first error wins. */
static PGresult *
wait_result(struct db_pg_conn *c, const char *what, const char *keep,
            char **cause)
{
    int64_t deadline = util_mono_ms() + c->timeout_ms;
    PGresult *res = NULL, *r;
    ExecStatusType st;
    char why[96];

    for (;;) {
        int f = PQflush(c->db);

        if (f == 0)
            break;
        if (f == -1)
            return lost(c, what, NULL, cause);
        f = wait_sock(c->db, POLLIN | POLLOUT, deadline);
        if (f <= 0) {
            snprintf(why, sizeof why, "could not send within %lld ms",
                     (long long)c->timeout_ms);
            return lost(c, what, why, cause);
        }
        if (PQconsumeInput(c->db) == 0)
            return lost(c, what, NULL, cause);
    }
    for (;;) {
        while (PQisBusy(c->db)) {
            int w = wait_sock(c->db, POLLIN, deadline);

            if (w <= 0) {
                PQclear(res);
                snprintf(why, sizeof why, "no answer within %lld ms "
                         "(segment.db_timeout_ms)", (long long)c->timeout_ms);
                return lost(c, what, w == 0 ? why : "poll failed", cause);
            }
            if (PQconsumeInput(c->db) == 0) {
                PQclear(res);
                return lost(c, what, NULL, cause);
            }
        }
        r = PQgetResult(c->db);
        if (r == NULL)
            break;
        if (res == NULL || (PQresultStatus(res) != PGRES_FATAL_ERROR &&
                            PQresultStatus(r) == PGRES_FATAL_ERROR)) {
            PQclear(res);
            res = r;
        } else {
            PQclear(r);
        }
    }
    if (res == NULL)
        return lost(c, what, NULL, cause);
    st = PQresultStatus(res);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return res;
    {
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        char text[256];

        snprintf(c->sqlstate, sizeof c->sqlstate, "%s",
                 state != NULL ? state : "");
        pq_text(PQresultErrorMessage(res), text, sizeof text);
        PQclear(res);
        util_set_cause(cause, "postgresql %s: %s: %s (SQLSTATE %s)", c->where,
                       what, text, c->sqlstate[0] ? c->sqlstate : "?");
        if (PQstatus(c->db) != CONNECTION_OK) {
            c->lost = 1;
            db_pg_conn_close(c);
        } else if (keep == NULL || strcmp(keep, c->sqlstate) != 0) {
            db_pg_conn_close(c);
        }
        return NULL;
    }
}

PGresult *
db_pg_conn_exec(struct db_pg_conn *c, int stmt, const char *sql, int n,
                const char *const *params, const char *what, const char *keep,
                char **cause)
{
    int ok;

    assert(c->db != NULL && n >= 0 && n <= DB_PG_PARAMS);
    assert(stmt < c->nsql);
    c->lost = 0;
    c->sqlstate[0] = '\0';
    c->nexec++;
    if (stmt >= 0) {
        char name[24];

        assert(n == c->sql[stmt].nparams);
        snprintf(name, sizeof name, "leafd_%d", stmt);
        ok = PQsendQueryPrepared(c->db, name, n, params, NULL, NULL, 0);
    } else {
        ok = PQsendQueryParams(c->db, sql, n, NULL, params, NULL, NULL, 0);
    }
    if (!ok)
        return lost(c, what, NULL, cause);
    return wait_result(c, what, keep, cause);
}

int
db_pg_conn_run(struct db_pg_conn *c, int stmt, const char *sql, int n,
               const char *const *params, const char *what, char **cause)
{
    PGresult *r = db_pg_conn_exec(c, stmt, sql, n, params, what, NULL, cause);

    if (r == NULL)
        return -1;
    PQclear(r);
    return 0;
}

/* Prepare c's statements on its connection: 0, or -1 (closed). */
static int
prepare(struct db_pg_conn *c, char **cause)
{
    for (int i = 0; i < c->nsql; i++) {
        char name[24];
        PGresult *r;

        snprintf(name, sizeof name, "leafd_%d", i);
        if (!PQsendPrepare(c->db, name, c->sql[i].sql, c->sql[i].nparams,
                           NULL)) {
            lost(c, "PREPARE", NULL, cause);
            return -1;
        }
        r = wait_result(c, "PREPARE", NULL, cause);
        if (r == NULL)
            return -1;
        PQclear(r);
    }
    return 0;
}

int
db_pg_conn_prepare(struct db_pg_conn *c, const struct db_pg_stmt *sql,
                   int nsql, char **cause)
{
    assert(c->db != NULL && nsql >= 0 && nsql <= DB_PG_STMTS);
    c->sql = sql;
    c->nsql = nsql;
    return prepare(c, cause);
}

int
db_pg_conn_open(struct db_pg_conn *c, char **cause)
{
    static int logged;              /* the first connect is logged */
    char text[256];

    if (c->db != NULL)
        return 0;
    c->sqlstate[0] = '\0';         /* the last connection's error is not this one's */
    c->db = PQconnectdbParams((const char *const *)c->keys,
                              (const char *const *)c->vals, 0);
    if (c->db == NULL) {
        util_set_cause(cause, "postgresql %s: connect: out of memory",
                       c->where);
        return -1;
    }
    if (PQstatus(c->db) != CONNECTION_OK) {
        pq_text(PQerrorMessage(c->db), text, sizeof text);
        c->lost = 1;
        db_pg_conn_fail(c, "connect", text, cause);
        return -1;
    }
    if (PQsetnonblocking(c->db, 1) != 0) {
        lost(c, "connect", NULL, cause);
        return -1;
    }
    if (prepare(c, cause) == -1)
        return -1;
    if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
        log_info("postgresql %s: connected to %s:%s (server %d, %s)",
                 c->where, PQhost(c->db), PQport(c->db),
                 PQserverVersion(c->db),
                 PQsslInUse(c->db) && PQsslAttribute(c->db, "protocol") ?
                 PQsslAttribute(c->db, "protocol") : "no TLS");
    return 1;
}

int64_t
db_pg_changed(PGresult *r)
{
    const char *t = PQcmdTuples(r);
    int64_t n = 0;

    if (util_parse_i64(t, strlen(t), 0, &n) == -1)
        n = 0;
    PQclear(r);
    return n;
}

int
db_pg_i64(const PGresult *r, int row, int col, int64_t *out)
{
    const char *v;

    if (row >= PQntuples(r) || col >= PQnfields(r) ||
        PQgetisnull(r, row, col))
        return -1;
    v = PQgetvalue(r, row, col);
    return util_parse_i64(v, strlen(v), 1, out);
}
