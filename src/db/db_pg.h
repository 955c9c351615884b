/* db_pg.h: the one PostgreSQL client setup (libpq) leafd's PostgreSQL
 * users share: the connection string's checks, a connection with leafd's
 * options, and statements run with a deadline.
 *
 * Connection strings are libpq's own, in either form: a URI
 * (postgresql://user@host1:5432,host2:5432/db?sslmode=verify-full) or
 * keywords (host=h1,h2 dbname=leaf sslmode=verify-full). libpq does TLS,
 * several hosts (target_session_attrs=read-write follows the primary),
 * passfile and ~/.pgpass; leafd adds its checks (db_pg_conninfo_check),
 * connect_timeout and statement_timeout from the configured timeout, and
 * a client-side deadline on every statement: the socket is polled, and a
 * statement without an answer within the timeout closes the connection.
 *
 * Failure rule: a statement that fails records the server's text and
 * SQLSTATE (*cause, sqlstate[]); unless its SQLSTATE is the one the caller
 * said it handles, the connection is closed, its prepared statements with
 * it, and the next db_pg_conn_open reconnects. A transaction open on a
 * connection whose statement failed is thus rolled back by the server.
 *
 * Ownership: the caller embeds a struct db_pg_conn, zeroed, and calls
 * db_pg_conn_init; db_pg_conn_free releases what it holds. cause may be
 * NULL everywhere; a cause is malloc'd, the caller frees it.
 *
 * Threads: one thread at a time per connection; libpq is thread-safe
 * for distinct connections.
 */
#ifndef LEAFD_DB_PG_H
#define LEAFD_DB_PG_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#define DB_PG_CONNINFO_MAX 1024   /* bytes of a connection string */
#define DB_PG_STMTS        24     /* statements prepared at connect, at most */
#define DB_PG_PARAMS       10     /* parameters of one statement, at most */

/* A statement prepared at connect under the name "leafd_<index>". */
struct db_pg_stmt {
    const char *sql;
    int         nparams;
};

struct db_pg_conn {
    char                    **keys, **vals;  /* the connection's, owned */
    char                     *where;   /* "host:port/db" for messages */
    int64_t                   timeout_ms;
    const struct db_pg_stmt  *sql;     /* prepared at connect */
    int                       nsql;    /* <= DB_PG_STMTS */
    PGconn                   *db;      /* NULL: not connected */
    int                       lost;    /* last failure: the connection died */
    int                       nexec;   /* statements sent (the caller
                                          zeroes it; db_pg_conn_exec counts) */
    char                      sqlstate[6]; /* the last failure's ("": none) */
};

/* A connection string leafd accepts: at most DB_PG_CONNINFO_MAX bytes,
 * parsed by libpq (PQconninfoParse: unknown keywords, bad quoting, a bad
 * URI), then leafd's checks of the values libpq leaves to connect time:
 * sslmode, target_session_attrs, port(s) (1..65535, as many as hosts or
 * one), connect_timeout, a host given, no replication, and the files it
 * names (sslrootcert, sslcert, sslkey, passfile) readable. 0, or -1 with
 * *cause naming key (the config key) and the part that is wrong, never a
 * password. Pure but for the files' access(2); fuzzed. */
int db_pg_conninfo_check(const char *conninfo, const char *key, char **cause);

/* conninfo with every password masked ("***"): a URI's (in its
 * authority, password= in its query) or the keyword form's password=
 * (quoted or not); the rest as given. malloc'd. Pure; fuzzed. */
char *db_pg_conninfo_redacted(const char *conninfo);

/* db_pg_conninfo_check, then keep the string's settings in c with
 * leafd's: connect_timeout (whole seconds of timeout_ms, at least 2, when
 * not given), statement_timeout and idle_in_transaction_session_timeout
 * (timeout_ms, added to options), application_name leafd (when not
 * given). sql[0..nsql) are prepared at every connect. 0, or -1 with
 * *cause; nothing is connected. */
int db_pg_conn_init(struct db_pg_conn *c, const char *conninfo,
                    const char *key, int64_t timeout_ms,
                    const struct db_pg_stmt *sql, int nsql, char **cause);

/* Connected already: 0. Else connect (libpq's connect_timeout per host)
 * and prepare the statements: 1 on a new connection, or -1 with *cause
 * (nothing to close). Logs the server and its TLS at the first connect
 * and after a failure. */
int db_pg_conn_open(struct db_pg_conn *c, char **cause);

/* Prepare sql[0..nsql) on the open connection, and at every connect
 * after (they become c's statements): for statements that name a table
 * the caller creates once connected (db_pg_conn_init given none). 0, or
 * -1 with *cause (the connection closed). */
int db_pg_conn_prepare(struct db_pg_conn *c, const struct db_pg_stmt *sql,
                       int nsql, char **cause);

/* Close the connection (none: a no-op). */
void db_pg_conn_close(struct db_pg_conn *c);

/* db_pg_conn_close, and free what init made (NULL: a no-op). */
void db_pg_conn_free(struct db_pg_conn *c);

/* Run prepared statement i (sql[i]; stmt < 0: the text sql, unprepared)
 * with text parameters params[0..n) (NULL: SQL NULL) and wait for its
 * result, at most timeout_ms. The result (PGRES_COMMAND_OK or
 * PGRES_TUPLES_OK; the caller PQclears it), or NULL after a failure: *cause
 * "postgresql <where>: <what>: <server's text>", sqlstate set, and the
 * connection closed unless its SQLSTATE is keep (NULL: none). Needs an
 * open connection (db_pg_conn_open). */
PGresult *db_pg_conn_exec(struct db_pg_conn *c, int stmt, const char *sql,
                          int n, const char *const *params, const char *what,
                          const char *keep, char **cause);

/* db_pg_conn_exec of a statement without a result the caller reads:
 * 0, or -1 after a failure. */
int db_pg_conn_run(struct db_pg_conn *c, int stmt, const char *sql, int n,
                   const char *const *params, const char *what, char **cause);

/* Record a failure that is not libpq's (a result leafd cannot read):
 * *cause "postgresql <where>: <what>: <why>", the connection closed. -1. */
int db_pg_conn_fail(struct db_pg_conn *c, const char *what, const char *why,
                    char **cause);

/* The rows a command changed (its tag's count, 0 when none), r cleared. */
int64_t db_pg_changed(PGresult *r);

/* A result's field as an integer: 0, or -1 (NULL, not an integer). */
int db_pg_i64(const PGresult *r, int row, int col, int64_t *out);

#endif
