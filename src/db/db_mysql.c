/* db_mysql.c: the MySQL client setup leafd's MySQL users share (see
 * db_mysql.h): one place sets the connection options, so the segment store
 * and the worker-ID store cannot drift apart. */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errmsg.h>

#include "db_mysql.h"
#include "util.h"

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static int lib_ok;

static void
library_init(void)
{
    lib_ok = mysql_library_init(0, NULL, NULL) == 0;
}

int
db_mysql_library_init(void)
{
    pthread_once(&lib_once, library_init);
    return lib_ok ? 0 : -1;
}

int
db_mysql_thread_init(void)
{
    if (db_mysql_library_init() == -1)
        return -1;
    return mysql_thread_init() == 0 ? 0 : -1;
}

void
db_mysql_thread_end(void)
{
    if (lib_ok)
        mysql_thread_end();
}

void
db_mysql_library_end(void)
{
    if (lib_ok)
        mysql_library_end();
}

#define TLS_FILE_MAX (1 << 20)    /* bytes of a PEM file looked at */

/* Does the file at path hold a PEM block (in its first TLS_FILE_MAX bytes)?
 * 0, or -1 with *cause. A key's bytes are wiped before the buffer is freed. */
static int
tls_file_check(const char *what, const char *path, char **cause)
{
    static const char begin[] = "-----BEGIN ";
    char *buf;
    size_t n;
    int found;
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        util_set_cause(cause, "MySQL URL %s %s: %s", what, path,
                       strerror(errno));
        return -1;
    }
    buf = xmalloc(TLS_FILE_MAX);
    n = fread(buf, 1, TLS_FILE_MAX, f);
    found = memmem(buf, n, begin, sizeof begin - 1) != NULL;
    explicit_bzero(buf, n);
    free(buf);
    fclose(f);
    if (!found) {
        util_set_cause(cause, "MySQL URL %s %s: no PEM block (\"-----BEGIN\") "
                       "in it", what, path);
        return -1;
    }
    return 0;
}

int
db_mysql_target_from_url(const char *url, struct db_mysql_target *t,
                         char **cause)
{
    if (db_mysql_url_parse(url, t, cause) == -1)
        return -1;
    if ((t->ssl_ca != NULL && tls_file_check("ssl_ca", t->ssl_ca, cause) == -1) ||
        (t->ssl_cert != NULL &&
         tls_file_check("ssl_cert", t->ssl_cert, cause) == -1) ||
        (t->ssl_key != NULL && tls_file_check("ssl_key", t->ssl_key, cause) == -1)) {
        db_mysql_target_free(t);
        return -1;
    }
    return 0;
}

/* The auth plugins that never show the password to a server without TLS
 * (a challenge and its response): the only ones allowed where Connector/C
 * 3.3 notices a missing TLS only after logging in (required, verify_ca).
 * Its caching_sha2_password counts the connection as secure once TLS was
 * asked for, and would send the password in clear text. */
#define TLS_SAFE_AUTH "mysql_native_password,client_ed25519"

/* Connector/C's TLS options for t->ssl_mode (see db_mysql_url.h). 0, or -1
 * if the library refused one. */
static int
connect_tls_options(MYSQL *db, const struct db_mysql_target *t)
{
    my_bool on = 1;
    int rc = 0;

    switch (t->ssl_mode) {
    case DB_MYSQL_SSL_DISABLED:
        return 0;
    case DB_MYSQL_SSL_REQUIRED:
        rc |= mysql_options(db, MYSQL_OPT_SSL_ENFORCE, &on);
        rc |= mysql_options(db, MARIADB_OPT_RESTRICTED_AUTH, TLS_SAFE_AUTH);
        break;
    case DB_MYSQL_SSL_VERIFY_CA:
        /* A CA makes Connector/C check the chain (SSL_VERIFY_PEER). */
        assert(t->ssl_ca != NULL);
        rc |= mysql_options(db, MYSQL_OPT_SSL_ENFORCE, &on);
        rc |= mysql_options(db, MARIADB_OPT_RESTRICTED_AUTH, TLS_SAFE_AUTH);
        break;
    case DB_MYSQL_SSL_VERIFY_IDENTITY:
        /* The chain and the host name; a server without TLS is refused
         * before logging in. Without ssl_ca, the system's CAs. */
        rc |= mysql_options(db, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on);
        break;
    }
    if (t->ssl_ca != NULL)
        rc |= mysql_options(db, MYSQL_OPT_SSL_CA, t->ssl_ca);
    assert((t->ssl_cert == NULL) == (t->ssl_key == NULL));
    if (t->ssl_cert != NULL) {
        rc |= mysql_options(db, MYSQL_OPT_SSL_CERT, t->ssl_cert);
        rc |= mysql_options(db, MYSQL_OPT_SSL_KEY, t->ssl_key);
    }
    return rc != 0 ? -1 : 0;
}

/* What TLS was asked for, for a failed connect's cause ("" without TLS).
 * Paths only: a key's content and the password are never in it. */
static const char *
connect_tls_note(const struct db_mysql_target *t, char *buf, size_t cap)
{
    if (t->ssl_mode == DB_MYSQL_SSL_DISABLED)
        return "";
    snprintf(buf, cap, " [ssl_mode=%s%s%s%s%s]",
             db_mysql_ssl_mode_name(t->ssl_mode),
             t->ssl_ca != NULL ? ", ssl_ca=" : "",
             t->ssl_ca != NULL ? t->ssl_ca : "",
             t->ssl_cert != NULL ? ", ssl_cert=" : "",
             t->ssl_cert != NULL ? t->ssl_cert : "");
    return buf;
}

MYSQL *
db_mysql_connect(const struct db_mysql_target *t, const char *where,
                 unsigned int timeout_s, char **cause)
{
    unsigned int zero = 0;
    my_bool off = 0;
    char note[1200];
    MYSQL *db = mysql_init(NULL);

    if (db == NULL) {
        util_set_cause(cause, "mysql %s: mysql_init: out of memory", where);
        return NULL;
    }
    mysql_options(db, MYSQL_OPT_CONNECT_TIMEOUT, &timeout_s);
    mysql_options(db, MYSQL_OPT_READ_TIMEOUT, &timeout_s);
    mysql_options(db, MYSQL_OPT_WRITE_TIMEOUT, &timeout_s);
    mysql_options(db, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_options(db, MYSQL_OPT_RECONNECT, &off);
    mysql_options(db, MYSQL_OPT_LOCAL_INFILE, &zero);
    if (connect_tls_options(db, t) == -1) {
        util_set_cause(cause, "mysql %s: connect: the MySQL library refused "
                       "a TLS option%s", where,
                       connect_tls_note(t, note, sizeof note));
        mysql_close(db);
        return NULL;
    }
    if (mysql_real_connect(db, t->host, t->user, t->password, t->database,
                           (unsigned int)t->port, t->socket,
                           CLIENT_FOUND_ROWS) == NULL) {
        util_set_cause(cause, "mysql %s: connect: %s (%u)%s%s", where,
                       mysql_error(db), mysql_errno(db),
                       connect_tls_note(t, note, sizeof note),
                       mysql_errno(db) == CR_PLUGIN_NOT_ALLOWED ?
                       "; with ssl_mode required or verify_ca only "
                       TLS_SAFE_AUTH " may log in: use verify_identity" : "");
        mysql_close(db);
        return NULL;
    }
    /* Connector/C 3.3 goes on in clear text when the server offers no TLS,
     * unless the server certificate is verified (verify_identity): the
     * session is refused here. */
    if (t->ssl_mode != DB_MYSQL_SSL_DISABLED && mysql_get_ssl_cipher(db) == NULL) {
        util_set_cause(cause, "mysql %s: connect: the server did not start "
                       "TLS: it has none (mariadbd --ssl-cert/--ssl-key, "
                       "have_ssl=YES), or something on the way stripped "
                       "it%s", where, connect_tls_note(t, note, sizeof note));
        mysql_close(db);
        return NULL;
    }
    if (mysql_autocommit(db, 0) != 0) {
        util_set_cause(cause, "mysql %s: autocommit off: %s (%u)", where,
                  mysql_error(db), mysql_errno(db));
        mysql_close(db);
        return NULL;
    }
    return db;
}

void
db_mysql_bind_i64(MYSQL_BIND *b, long long *v)
{
    memset(b, 0, sizeof *b);
    b->buffer_type = MYSQL_TYPE_LONGLONG;
    b->buffer = v;
}

void
db_mysql_bind_str(MYSQL_BIND *b, char *s, unsigned long cap,
                  unsigned long *len)
{
    memset(b, 0, sizeof *b);
    b->buffer_type = MYSQL_TYPE_STRING;
    b->buffer = s;
    b->buffer_length = cap;
    b->length = len;
}

char *
db_mysql_cause(const char *where, const char *what, MYSQL *db,
               MYSQL_STMT *st, unsigned int *err)
{
    const char *text = st != NULL ? mysql_stmt_error(st) : mysql_error(db);
    unsigned int e = st != NULL ? mysql_stmt_errno(st) : mysql_errno(db);
    char *out = NULL;

    if (err != NULL)
        *err = e;
    util_set_cause(&out, "mysql %s: %s: %s (%u)", where, what, text, e);
    return out;
}
