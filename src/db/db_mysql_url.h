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
 *  - TLS, both forms, named as the mysql client's options ('-' and '_' are
 *    the same, values in any case): ssl_mode=disabled|required|verify_ca|
 *    verify_identity, ssl_ca=, ssl_cert=, ssl_key= (absolute PEM paths).
 *    Without ssl_mode, any of ssl_ca/ssl_cert/ssl_key means verify_identity
 *    and none means disabled. verify_ca needs ssl_ca; required and disabled
 *    take no ssl_ca; ssl_cert and ssl_key come together. preferred (clear
 *    text when the server has no TLS) is refused. JDBC also: Connector/J's
 *    sslMode=, useSSL=true and requireSSL=true (required),
 *    verifyServerCertificate=true (verify_ca); its Java key stores
 *    (trustCertificateKeyStoreUrl, clientCertificateKeyStoreUrl) are refused.
 *  - limits: URL 1024, host 255, user 128, password 256, database 64,
 *    socket 107, ssl_ca/ssl_cert/ssl_key 512 bytes each; no spaces,
 *    control characters or '#'. */
enum db_mysql_ssl_mode {
    DB_MYSQL_SSL_DISABLED = 0,      /* clear text */
    DB_MYSQL_SSL_REQUIRED,          /* TLS; the certificate is not checked */
    DB_MYSQL_SSL_VERIFY_CA,         /* TLS; the chain is checked (ssl_ca) */
    DB_MYSQL_SSL_VERIFY_IDENTITY    /* and the host is the certificate's */
};

struct db_mysql_target {
    char *host;
    int   port;
    char *user;
    char *password;
    char *database;
    char *socket;     /* from ?socket=/path (leafd extension), or NULL */
    enum db_mysql_ssl_mode ssl_mode;
    char *ssl_ca;     /* PEM files, absolute paths, or NULL */
    char *ssl_cert;
    char *ssl_key;
};

/* A malloc'd copy of url fit to print: the password of user:password@ and
 * the value of every password= parameter are "***". Other text, also a
 * URL db_mysql_url_parse refuses, is copied as it is. */
char *db_mysql_url_redacted(const char *url);

/* The URL spelling of a mode ("verify_ca"). */
const char *db_mysql_ssl_mode_name(enum db_mysql_ssl_mode m);
int  db_mysql_url_parse(const char *url, struct db_mysql_target *t, char **cause);
void db_mysql_target_free(struct db_mysql_target *t);

#endif
