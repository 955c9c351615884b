/* db_mysql.h: the one MySQL/MariaDB client setup every MySQL user of leafd
 * shares (the segment stores, the multi-db set, the worker-ID store): the
 * library's thread calls and a connection with the same options everywhere.
 *
 * Threads: every thread that uses the MySQL C API calls
 * db_mysql_thread_init() before its first call and db_mysql_thread_end()
 * before it exits; the first init also runs mysql_library_init, once per
 * process (db_mysql_library_init runs only that). db_mysql_library_end()
 * is for the very end of main.
 */
#ifndef LEAFD_DB_MYSQL_H
#define LEAFD_DB_MYSQL_H

#include <mysql.h>

#include "db_mysql_url.h"

/* 0, or -1 if the MySQL library cannot start (on this thread). */
int  db_mysql_library_init(void);
int  db_mysql_thread_init(void);
void db_mysql_thread_end(void);
void db_mysql_library_end(void);

/* db_mysql_url_parse, then the TLS files the URL names (ssl_ca, ssl_cert,
 * ssl_key) each read once: a file that cannot be opened or holds no PEM
 * block is refused now, at start, rather than at every connect. 0, or -1
 * with *cause naming the parameter and path (never a file's content), and
 * then *t holds nothing to free. */
int db_mysql_target_from_url(const char *url, struct db_mysql_target *t,
                             char **cause);

/* A connection to t with leafd's options: connect, read and write
 * timeouts of timeout_s seconds each, utf8mb4, no automatic reconnect (the
 * caller reconnects), LOCAL INFILE off, CLIENT_FOUND_ROWS (an UPDATE counts
 * the rows it matched), autocommit off (every caller runs explicit
 * transactions), and the TLS of t->ssl_mode: a session that did not start
 * TLS when asked is refused (Connector/C 3.3 would go on in clear text).
 * where names the target in *cause. The connection, or NULL
 * with *cause (cause may be NULL) and nothing to close. */
MYSQL *db_mysql_connect(const struct db_mysql_target *t, const char *where,
                        unsigned int timeout_s, char **cause);

/* Parameters and results of a prepared statement: an integer at *v; a
 * string in s (cap bytes) whose length is *len (in: a parameter's length;
 * out: a result's). */
void db_mysql_bind_i64(MYSQL_BIND *b, long long *v);
void db_mysql_bind_str(MYSQL_BIND *b, char *s, unsigned long cap,
                       unsigned long *len);

/* The failure of what (a statement's text or a step's name) on where, with
 * the server's own text and number: from st, or from db when st is NULL.
 * *err (may be NULL) gets the number. A malloc'd "mysql <where>: <what>:
 * <text> (<errno>)". */
char *db_mysql_cause(const char *where, const char *what, MYSQL *db,
                     MYSQL_STMT *st, unsigned int *err);

#endif
