/* store_mysql_internal.h: the MySQL segment store's connection, shared by
 * store_mysql.c (leaf_alloc: loads, rows, serial rows) and
 * store_mysql_multi.c (the multi-db tables). Not for other modules: they
 * use store.h and store_impl.h. */
#ifndef LEAFD_STORE_MYSQL_INTERNAL_H
#define LEAFD_STORE_MYSQL_INTERNAL_H

#include <mysql.h>
#include <stdint.h>

#include "db_mysql.h"
#include "store.h"
#include "store_impl.h"

#define MY_TIMEOUT_S   5        /* when db_timeout_ms <= 0 */
#define MY_TAG_BUF     (TAG_MAX * 4 + 1)          /* varchar(128), utf8mb4 */
#define MY_DESC_BUF    (STORE_DESC_MAX * 4 + 1)   /* varchar(256), utf8mb4 */
#define MY_USER_MAX     128
#define MY_PASSWORD_MAX 256

struct store_mysql {
    struct store        base;
    struct db_mysql_target t;
    char               *where;      /* "host:port/db" for messages */
    unsigned int        timeout_s;
    int64_t             timeout_ms;
    MYSQL              *db;         /* NULL: not connected */
    MYSQL_STMT         *update;
    MYSQL_STMT         *select;
    MYSQL_STMT         *get;
    MYSQL_STMT         *list;
    MYSQL_STMT         *insert;
    MYSQL_STMT         *now_ms;
    MYSQL_STMT         *insert_serial;
    int                 stale;      /* last failure: connection dead early */
    unsigned int        last_errno; /* the last failure's server error */
};


typedef enum store_result (*my_tx_fn)(struct store_mysql *m, void *arg,
                                      char **cause);

/* The connection's steps (store_mysql.c), shared with the multi-db SQL
 * (store_mysql_multi.c). A failure rolls back, records its cause and
 * disconnects (store_my_fail: -1); the next call reconnects. store_my_tx
 * runs body in one transaction, again once on a connection that turned out
 * dead before anything was committed. */
void store_my_disconnect(struct store_mysql *m);
int  store_my_fail(struct store_mysql *m, MYSQL_STMT *st, const char *what,
                   char **cause);
int  store_my_rollback(struct store_mysql *m, char **cause);
int  store_my_connect(struct store_mysql *m, int statements, char **cause);
int  store_my_begin(struct store_mysql *m, int *reused, int64_t *t0,
                    char **cause);
int  store_my_fetch(struct store_mysql *m, MYSQL_STMT *st, const char *what,
                    char **cause);
int  store_my_adhoc(struct store_mysql *m, const char *sql, MYSQL_BIND *p,
                    MYSQL_BIND *r, MYSQL_STMT **st, const char *what,
                    unsigned int absent, char **cause);
int  store_my_run(struct store_mysql *m, const char *sql, MYSQL_BIND *p,
                  const char *what, char **cause);
int  store_my_commit(struct store_mysql *m, char **cause);
enum store_result store_my_tx(struct store_mysql *m, my_tx_fn body, void *arg,
                              char **cause);
/* The set's leafd_multi_db row matches want and is not frozen
 * (store_mysql_multi.c). */
enum store_result store_my_meta_check(struct store_mysql *m,
                                      const struct multi_meta *want,
                                      struct multi_meta *got, char **cause);

/* A string parameter of *len bytes at s. */
static inline void
store_my_bind_str(MYSQL_BIND *b, const char *s, unsigned long *len)
{
    db_mysql_bind_str(b, (char *)s, *len, len);
}

#endif
