/* db_mysql_conn.h: one MySQL connection and the steps every statement of
 * leafd's MySQL users takes on it (the segment stores and the multi-db set
 * in store/, the worker-ID store in snowflake/): prepare, execute, fetch,
 * commit, roll back, record a failure, and run a transaction again once
 * when a connection kept from an earlier call turns out dead.
 *
 * Failure rule: a step that fails records the server's text and number
 * (*cause, last_errno), rolls back if the connection still answers and
 * closes the connection, its prepared statements with it; the step returns
 * -1 and the next db_mysql_conn_begin reconnects. After a deadlock
 * (ER_LOCK_DEADLOCK) InnoDB has rolled the transaction back and the
 * connection is kept, unless deadlock_drops says otherwise.
 *
 * Ownership: the caller embeds a struct db_mysql_conn, zeroed, and fills t,
 * where (db_mysql_conn_set_where), timeout_s, and for db_mysql_conn_begin
 * and _tx sql, nsql and timeout_ms; db_mysql_conn_free releases what it
 * holds. cause may be NULL everywhere; a cause is malloc'd, the caller
 * frees it.
 *
 * Threads: one thread at a time per connection, after
 * db_mysql_thread_init (db_mysql.h).
 */
#ifndef LEAFD_DB_MYSQL_CONN_H
#define LEAFD_DB_MYSQL_CONN_H

#include <mysql.h>
#include <stddef.h>
#include <stdint.h>

#include "db_mysql.h"

#define DB_MYSQL_CONN_STMTS 8     /* statements prepared at connect, at most */

struct db_mysql_conn {
    struct db_mysql_target t;     /* owned */
    char               *where;    /* "host:port/db" for messages, owned */
    unsigned int        timeout_s;  /* the client's timeouts at connect */
    int64_t             timeout_ms; /* a rerun only within half of it */
    const char *const  *sql;      /* prepared at connect into stmt[] */
    size_t              nsql;     /* <= DB_MYSQL_CONN_STMTS */
    int                 deadlock_drops; /* 1: a deadlock closes it too */
    MYSQL              *db;       /* NULL: not connected */
    MYSQL_STMT         *stmt[DB_MYSQL_CONN_STMTS];
    int                 stale;    /* last failure: the connection died */
    unsigned int        last_errno; /* the last failure's server error */
};

/* where from t: "host:port/database", or "socket/database". */
void db_mysql_conn_set_where(struct db_mysql_conn *c);

/* Close the statements and the connection (none: a no-op). */
void db_mysql_conn_close(struct db_mysql_conn *c);

/* db_mysql_conn_close, then free t and where (c itself is the caller's;
 * NULL: a no-op). */
void db_mysql_conn_free(struct db_mysql_conn *c);

/* Connect (db_mysql_connect, timeout_s); with statements, prepare sql[]
 * into stmt[]. Logs the server and its TLS. 0, or -1 with *cause. */
int db_mysql_conn_open(struct db_mysql_conn *c, int statements, char **cause);

/* A failure of what: cause from st (or the connection when st is NULL),
 * then the failure rule above. st is not closed. Returns -1. */
int db_mysql_conn_fail(struct db_mysql_conn *c, MYSQL_STMT *st,
                       const char *what, char **cause);

/* End a transaction that changed nothing: 0, or -1 after
 * db_mysql_conn_fail. */
int db_mysql_conn_rollback(struct db_mysql_conn *c, char **cause);

/* COMMIT: 0, or -1 after db_mysql_conn_fail; it may have committed all the
 * same, so db_mysql_conn_tx does not run the call again. */
int db_mysql_conn_commit(struct db_mysql_conn *c, char **cause);

/* Before an attempt: connect (with the statements) if not connected.
 * *reused: the connection is from an earlier call; *t0 the start. 0, or
 * -1 with *cause. */
int db_mysql_conn_begin(struct db_mysql_conn *c, int *reused, int64_t *t0,
                        char **cause);

/* Execute a prepared st with params bound (NULL: none); with results, bind
 * them and store the result set. 0, or -1 after db_mysql_conn_fail. */
int db_mysql_conn_exec(struct db_mysql_conn *c, MYSQL_STMT *st,
                       MYSQL_BIND *params, MYSQL_BIND *results,
                       const char *what, char **cause);

/* The next row of st: 1 a row (truncation is the caller's to check in the
 * lengths), 0 no more, -1 after db_mysql_conn_fail. */
int db_mysql_conn_fetch(struct db_mysql_conn *c, MYSQL_STMT *st,
                        const char *what, char **cause);

/* sql prepared for this call, executed with p (NULL: none), its result
 * (when r) stored for db_mysql_conn_fetch. what NULL names the failure by
 * the statement's first 40 bytes. 0 with *st to close; 1 when the prepare
 * failed with error absent (e.g. ER_NO_SUCH_TABLE; 0: none), *st NULL and
 * the transaction still usable; -1 after db_mysql_conn_fail, *st NULL. */
int db_mysql_conn_adhoc(struct db_mysql_conn *c, const char *sql,
                        MYSQL_BIND *p, MYSQL_BIND *r, MYSQL_STMT **st,
                        const char *what, unsigned int absent, char **cause);

/* db_mysql_conn_adhoc for a statement without a result: 0, or -1. */
int db_mysql_conn_run(struct db_mysql_conn *c, const char *sql,
                      MYSQL_BIND *p, const char *what, char **cause);

/* The body of a call: one transaction, which it ends (commit, rollback or
 * a failed step). -1: the database failed, after db_mysql_conn_fail; any
 * other value is the caller's own result. */
typedef int (*db_mysql_tx_fn)(void *arg, char **cause);

/* One call: db_mysql_conn_begin, then body; body runs once more when it
 * failed on a connection kept from an earlier call that died at once (a
 * connection error, within half of timeout_ms) before anything was
 * committed, the first cause freed then. body's result, or -1 when
 * connecting failed. */
int db_mysql_conn_tx(struct db_mysql_conn *c, db_mysql_tx_fn body, void *arg,
                     char **cause);

/* Deadlock rule: MariaDB reports an InnoDB deadlock, and Galera a write set
 * that lost certification (at COMMIT, or on a statement when a replicated
 * write aborted it), as ER_LOCK_DEADLOCK; either way the whole transaction
 * was rolled back and nothing of it committed, on any node, so running it
 * again cannot use a range twice. db_mysql_conn_tx_retry is
 * db_mysql_conn_tx, run again while body fails with ER_LOCK_DEADLOCK, at
 * most DB_MYSQL_DEADLOCK_RETRIES more times, after a random pause of 1..10
 * ms times the attempt (at most 5), and only while the pause still ends
 * within timeout_ms of the first start; each earlier cause is freed. The
 * last result otherwise as db_mysql_conn_tx's. Many reruns: two nodes
 * loading one row through two Galera nodes (tests/blackbox/galera.py, step
 * 20, about 700 loads/s each) lost certification in 1 load of 250, but a
 * load that lost once lost again in 2 reruns of 3, and 8 reruns left 1
 * load in about 3,000 failing. */
#define DB_MYSQL_DEADLOCK_RETRIES 32
int db_mysql_conn_tx_retry(struct db_mysql_conn *c, db_mysql_tx_fn body,
                           void *arg, char **cause);

#endif
