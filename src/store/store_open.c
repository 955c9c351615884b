/* store_open.c: picks the segment store's backend from the config
 * (store_open, see store.h): several MySQL URLs make a multi store
 * (store_multi.c), one a MySQL store (store_mysql.c); several
 * PostgreSQL URIs (segment.postgresql.urls) a multi store too, one (or
 * segment.postgresql.url) a PostgreSQL store (store_pg.c); none SQLite
 * (store_sqlite.c). Above the backends, so that they never call up into
 * it. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "multi_block.h"
#include "store.h"
#include "store_impl.h"
#include "store_marks.h"

static int
nonempty(const char *s)
{
    return s != NULL && *s != '\0';
}

/* segment.mysql.urls (pg 0) or segment.postgresql.urls (pg 1): a set
 * when it lists two or more, else its one database as if given alone
 * (segment.mysql.url, segment.postgresql.url). */
static struct store *
open_list(const struct config *cfg, const char *list, int pg, char **cause)
{
    char *urls[STORE_MULTI_MAX];
    int n = store_multi_split_kind(list, pg, urls, STORE_MULTI_MAX, cause);
    struct store *s;

    if (n < 0)
        return NULL;
    if (n >= 2) {
        for (int i = 0; i < n; i++)
            free(urls[i]);
        return store_multi_open(cfg, cause);
    }
    if (pg) {
        s = store_pg_open_single(cfg, urls[0], "segment.postgresql.urls",
                                 cause);
    } else {
        s = store_mysql_open_url(cfg, urls[0], "segment.mysql.urls", cause);
        if (s != NULL)
            store_mysql_single(s, cfg);
    }
    free(urls[0]);
    return s;
}

struct store *
store_open(const struct config *cfg, char **cause)
{
    int kind = cfg->store;

    if ((kind == STORE_AUTO || kind == STORE_MYSQL) &&
        nonempty(cfg->mysql_urls))
        return open_list(cfg, cfg->mysql_urls, 0, cause);
    if ((kind == STORE_AUTO || kind == STORE_POSTGRESQL) &&
        nonempty(cfg->pg_urls))
        return open_list(cfg, cfg->pg_urls, 1, cause);
    if (kind == STORE_AUTO)
        kind = nonempty(cfg->jdbc_url) || nonempty(cfg->mysql_url) ?
            STORE_MYSQL : nonempty(cfg->pg_url) ? STORE_POSTGRESQL :
            STORE_SQLITE;
    switch (kind) {
    case STORE_SQLITE:
        return store_sqlite_open(cfg, cause);
    case STORE_MYSQL:
        return store_mysql_open(cfg, cause);
    case STORE_POSTGRESQL:
        return store_pg_open(cfg, cause);
    default:
        store_set_cause(cause, "unknown segment.store kind %d", kind);
        return NULL;
    }
}

int
store_fence(const struct config *cfg, int64_t floor, int64_t serial_floor,
            FILE *out, char **cause)
{
    struct store *s = store_open(cfg, cause);
    char server[MARKS_SERVER_MAX];
    struct marks_fence last;
    int64_t rows = 0;
    enum store_result rc;

    if (s == NULL)
        return -1;
    if (s->ops->fence_set == NULL) {
        store_set_cause(cause, "a %s store cannot be fenced%s", s->ops->name,
                        store_multi_count() > 0 ? " (several databases: "
                        "leafd multi-db init --floor=ID raises a set)" : "");
        store_close(s);
        return -1;
    }
    rc = s->ops->fence_set(s, floor, serial_floor, &rows, cause);
    if (rc == STORE_OK)
        rc = s->ops->fence_get(s, &last, server, sizeof server, cause);
    store_close(s);
    if (rc != STORE_OK)
        return -1;
    assert(last.id > 0 && last.floor == floor);
    fprintf(out, "fence #%lld of %s: floor %lld, serial floor %lld, %lld rows "
            "raised; refused nodes whose marks are at most these resume\n",
            (long long)last.id, last.server, (long long)last.floor,
            (long long)last.serial_floor, (long long)rows);
    return 0;
}

int
store_check_urls(const struct config *cfg, char **cause)
{
    char *urls[STORE_MULTI_MAX];
    int n, rc = 0;

    if (!nonempty(cfg->pg_urls)) {
        struct store *s = store_open(cfg, cause);

        if (s == NULL)
            return -1;
        store_close(s);
        return 0;
    }
    n = store_multi_split_kind(cfg->pg_urls, 1, urls, STORE_MULTI_MAX, cause);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        struct store *s = rc == 0 ? store_pg_open_url(cfg, urls[i],
                                                      "segment.postgresql.urls",
                                                      cause) : NULL;

        if (s == NULL)
            rc = -1;
        else
            store_close(s);
        free(urls[i]);
    }
    return rc;
}
