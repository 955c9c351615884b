/* db_mysql_url.h: MySQL URLs, as segment.mysql.url(s) and
 * snowflake.mysql.url take them. Pure (no MySQL library): fuzzed alone. */
#ifndef LEAFD_DB_MYSQL_URL_H
#define LEAFD_DB_MYSQL_URL_H

/* Parse Leaf's "jdbc:mysql://host:port/db?..." or "mysql://user:pass@host:port/db".
 * Fields are malloc'd; port defaults to 3306. Returns 0 or -1 with *cause
 * (then *t holds nothing to free).
 *  - schemes jdbc:mysql://, jdbc:mariadb://, mysql://, mariadb://
 *  - host: a name or IPv4 address (or [IPv6]); one host only. Note that the
 *    C API takes host "localhost" to mean the unix socket, not TCP: use
 *    127.0.0.1 for TCP. With ?socket= the host may be empty ("localhost").
 *  - user:password@ is percent-decoded (so '@', ':' and '/' can be escaped)
 *  - JDBC: driver parameters (useUnicode, characterEncoding, ...) are
 *    ignored, user= and password= are read. mysql://: only socket= is known,
 *    anything else is an error.
 *  - ?socket=/abs/path (leafd extension, both forms)
 *  - limits: URL 1024, host 255, user 128, password 256, database 64,
 *    socket 107 bytes; no spaces, control characters or '#'. */
struct db_mysql_target {
    char *host;
    int   port;
    char *user;
    char *password;
    char *database;
    char *socket;     /* from ?socket=/path (leafd extension), or NULL */
};
int  db_mysql_url_parse(const char *url, struct db_mysql_target *t, char **cause);
void db_mysql_target_free(struct db_mysql_target *t);

#endif
