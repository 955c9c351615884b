/* db_mysql.c: the MySQL client setup leafd's MySQL users share (see
 * db_mysql.h): one place sets the connection options, so the segment store
 * and the worker-ID store cannot drift apart. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

MYSQL *
db_mysql_connect(const struct db_mysql_target *t, const char *where,
                 unsigned int timeout_s, char **cause)
{
    unsigned int zero = 0;
    my_bool off = 0;
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
    if (mysql_real_connect(db, t->host, t->user, t->password, t->database,
                           (unsigned int)t->port, t->socket,
                           CLIENT_FOUND_ROWS) == NULL) {
        util_set_cause(cause, "mysql %s: connect: %s (%u)", where, mysql_error(db),
                  mysql_errno(db));
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
