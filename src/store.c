/* store.c: picks a segment store backend, checks arguments before any SQL
 * runs, and parses MySQL URLs (Leaf's JDBC form and leafd's mysql:// form).
 * The backends are store_sqlite.c and store_mysql.c. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "store.h"
#include "store_impl.h"

#define URL_MAX      1024   /* whole URL */
#define HOST_MAX     255
#define USER_MAX     128
#define PASSWORD_MAX 256
#define DATABASE_MAX 64     /* MySQL's limit on a schema name */
#define SOCKET_MAX   107    /* sun_path less its NUL */

void
store_set_cause(char **cause, const char *fmt, ...)
{
    va_list ap;
    char *p;

    if (cause == NULL)
        return;
    va_start(ap, fmt);
    if (vasprintf(&p, fmt, ap) < 0) {
        fprintf(stderr, "leafd: out of memory formatting an error\n");
        abort();
    }
    va_end(ap);
    *cause = p;
}

void
store_copy_text(char *dst, size_t cap, const char *src, size_t len)
{
    size_t n = len;

    if (n > cap - 1) {
        n = cap - 1;
        /* src[n] is the first byte dropped: back up to its character's start. */
        while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static int
nonempty(const char *s)
{
    return s != NULL && *s != '\0';
}

struct store *
store_open(const struct config *cfg, char **cause)
{
    int kind = cfg->store;

    if (kind != STORE_SQLITE && nonempty(cfg->mysql_urls)) {
        char *urls[STORE_MULTI_MAX];
        int n = store_multi_split(cfg->mysql_urls, urls, STORE_MULTI_MAX, cause);
        struct store *s;

        if (n < 0)
            return NULL;
        if (n >= 2) {
            for (int i = 0; i < n; i++)
                free(urls[i]);
            return store_multi_open(cfg, cause);
        }
        /* One URL: exactly segment.mysql.url. */
        s = store_mysql_open_url(cfg, urls[0], "segment.mysql.urls", cause);
        free(urls[0]);
        return s;
    }
    if (kind == STORE_AUTO)
        kind = nonempty(cfg->jdbc_url) || nonempty(cfg->mysql_url) ?
            STORE_MYSQL : STORE_SQLITE;
    switch (kind) {
    case STORE_SQLITE:
        return store_sqlite_open(cfg, cause);
    case STORE_MYSQL:
        return store_mysql_open(cfg, cause);
    default:
        store_set_cause(cause, "unknown segment.store kind %d", kind);
        return NULL;
    }
}

void
store_close(struct store *s)
{
    if (s != NULL)
        s->ops->close(s);
}

const char *
store_kind_name(const struct store *s)
{
    return s->ops->name;
}

/* A tag the table can hold: 1..TAG_MAX bytes. Checked before any SQL. */
static int
store_check_tag(const char *tag, char **cause)
{
    size_t len;

    if (tag == NULL || *tag == '\0') {
        store_set_cause(cause, "empty biz_tag");
        return -1;
    }
    len = strnlen(tag, TAG_MAX + 1);
    if (len > TAG_MAX) {
        store_set_cause(cause, "biz_tag longer than %d bytes", TAG_MAX);
        return -1;
    }
    return 0;
}

enum store_result
store_alloc(struct store *s, const char *tag, int64_t step, int64_t *max_id,
            int64_t *db_step, char **cause)
{
    if (store_check_tag(tag, cause) == -1)
        return STORE_BAD_ARG;
    if (step < 1 || step > STORE_STEP_MAX) {
        store_set_cause(cause, "step %lld of %s is not in [1, %d]", (long long)step,
                        tag, STORE_STEP_MAX);
        return STORE_BAD_ROW;
    }
    return s->ops->alloc(s, tag, step, max_id, db_step, cause);
}

/* The backends call key through this: a row name is checked as any tag. */
struct serial_key_check {
    store_serial_key_fn key;
    void               *arg;
};

static int
serial_key_checked(void *arg, int64_t db_ms, char *tag, size_t cap,
                   struct store_serial_floor *floor)
{
    struct serial_key_check *k = arg;

    memset(floor, 0, sizeof *floor);
    if (k->key(k->arg, db_ms, tag, cap, floor) == -1)
        return -1;
    assert(floor->n >= 0 && floor->n <= STORE_SERIAL_FLOOR_MAX);
    for (int i = 0; i < floor->n; i++)
        if (store_check_tag(floor->row[i].tag, NULL) == -1)
            return -1;
    return store_check_tag(tag, NULL);
}

void
store_like_pattern(const char *tag, int prefix, char *out)
{
    size_t n = strnlen(tag, TAG_MAX);

    assert(tag[n] == '\0');
    for (size_t i = 0; i < n; i++) {
        if (tag[i] == '%' || tag[i] == '_' || tag[i] == '!')
            *out++ = '!';
        *out++ = tag[i];
    }
    if (prefix)
        *out++ = '%';
    *out = '\0';
}

enum store_result
store_serial_alloc(struct store *s, int64_t offset_ms, store_serial_key_fn key,
                   void *arg, int64_t step, int64_t *db_ms, char *tag,
                   size_t cap, int64_t *max_id, char **cause)
{
    struct serial_key_check k = { key, arg };

    if (step < 1 || step > STORE_STEP_MAX || cap < TAG_MAX + 1) {
        store_set_cause(cause, "serial step %lld is not in [1, %d]",
                        (long long)step, STORE_STEP_MAX);
        return STORE_BAD_ARG;
    }
    return s->ops->serial_alloc(s, offset_ms, serial_key_checked, &k, step,
                                db_ms, tag, cap, max_id, cause);
}

enum store_result
store_get(struct store *s, const char *tag, struct store_row *row,
          char **cause)
{
    if (store_check_tag(tag, cause) == -1)
        return STORE_BAD_ARG;
    return s->ops->get(s, tag, row, cause);
}

static int
store_row_cmp(const void *a, const void *b)
{
    return strcmp(((const struct store_row *)a)->biz_tag,
                  ((const struct store_row *)b)->biz_tag);
}

enum store_result
store_list(struct store *s, struct store_row **rows, size_t *n, char **cause)
{
    *rows = NULL;
    *n = 0;
    if (s->ops->list(s, rows, n, cause) == -1)
        return STORE_DB_ERROR;
    /* Byte order, whatever the database's collation says. */
    if (*n > 1)
        qsort(*rows, *n, sizeof **rows, store_row_cmp);
    return STORE_OK;
}

enum store_result
store_insert(struct store *s, const char *tag, int64_t max_id, int64_t step,
             const char *description, char **cause)
{
    if (store_check_tag(tag, cause) == -1)
        return STORE_BAD_ARG;
    if (step < 1 || step > INT32_MAX) {
        store_set_cause(cause, "step %lld for %s is outside 1..%d",
                        (long long)step, tag, INT32_MAX);
        return STORE_BAD_ARG;
    }
    if (max_id < 0) {
        store_set_cause(cause, "max_id %lld for %s is negative",
                        (long long)max_id, tag);
        return STORE_BAD_ARG;
    }
    if (description != NULL &&
        strnlen(description, STORE_DESC_MAX + 1) > STORE_DESC_MAX) {
        store_set_cause(cause, "description for %s longer than %d bytes", tag,
                        STORE_DESC_MAX);
        return STORE_BAD_ARG;
    }
    if (description != NULL && strcmp(description, STORE_SERIAL_DESCRIPTION) == 0) {
        store_set_cause(cause, "description '%s' for %s is reserved for serial "
                        "numbers' rows", description, tag);
        return STORE_BAD_ARG;
    }
    return s->ops->insert(s, tag, max_id, step, description, cause);
}

int
store_row_is_serial(const struct store_row *row)
{
    return strcmp(row->description, STORE_SERIAL_DESCRIPTION) == 0;
}

/* ---- URL parsing ---- */

void
store_mysql_target_free(struct mysql_target *t)
{
    if (t == NULL)
        return;
    free(t->host);
    free(t->user);
    free(t->password);
    free(t->database);
    free(t->socket);
    memset(t, 0, sizeof *t);
    t->port = 3306;
}

/* Percent-decode [s, s+len) into a malloc'd string of at most max bytes. */
static char *
url_decode(const char *s, size_t len, size_t max, const char *what,
           char **cause)
{
    char buf[1024];
    long n;

    if (max > sizeof buf)
        max = sizeof buf;
    n = util_pct_decode(s, len, buf, max);
    if (n < 0) {
        store_set_cause(cause, "bad %s in MySQL URL (bad %%-escape, NUL, or "
                        "longer than %zu bytes)", what, max);
        return NULL;
    }
    return xstrndup(buf, (size_t)n);
}

static int
url_host_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

/* host[:port] or [v6]:port from [p, end). */
static int
url_host_port(const char *p, const char *end, struct mysql_target *t,
              char **cause)
{
    const char *h = p, *he, *colon = NULL;
    uint64_t port;

    if (memchr(p, ',', (size_t)(end - p)) != NULL) {
        store_set_cause(cause, "MySQL URL lists several hosts; leafd takes one");
        return -1;
    }
    if (p < end && *p == '[') {
        h = p + 1;
        he = memchr(h, ']', (size_t)(end - h));
        if (he == NULL || he == h) {
            store_set_cause(cause, "bad [IPv6] host in MySQL URL");
            return -1;
        }
        for (const char *q = h; q < he; q++)
            if (!(url_host_char((unsigned char)*q) || *q == ':')) {
                store_set_cause(cause, "bad [IPv6] host in MySQL URL");
                return -1;
            }
        if (he + 1 < end) {
            if (he[1] != ':') {
                store_set_cause(cause, "junk after ] in MySQL URL host");
                return -1;
            }
            colon = he + 1;
        }
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        he = colon != NULL ? colon : end;
        for (const char *q = h; q < he; q++)
            if (!url_host_char((unsigned char)*q)) {
                unsigned char c = (unsigned char)*q;
                if (c < 0x80)
                    store_set_cause(cause, "bad character '%c' in MySQL URL "
                                    "host (want a name or IPv4 address)", c);
                else
                    store_set_cause(cause, "bad byte 0x%02x in MySQL URL "
                                    "host (want a name or IPv4 address)", c);
                return -1;
            }
    }
    if (he - h > HOST_MAX) {
        store_set_cause(cause, "MySQL URL host longer than %d bytes", HOST_MAX);
        return -1;
    }
    if (colon != NULL) {
        if (util_parse_u64(colon + 1, (size_t)(end - colon - 1), &port) == -1 ||
            port < 1 || port > 65535) {
            store_set_cause(cause, "bad port \"%.*s\" in MySQL URL (want "
                            "1..65535)", (int)(end - colon - 1), colon + 1);
            return -1;
        }
        t->port = (int)port;
    }
    if (he > h)
        t->host = xstrndup(h, (size_t)(he - h));
    return 0;
}

/* The query string [p, end): key=value pairs split by '&'. */
static int
url_query(const char *p, const char *end, int jdbc, struct mysql_target *t,
          char **cause)
{
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp != NULL ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        const char *v = eq != NULL ? eq + 1 : e;
        size_t klen = (size_t)((eq != NULL ? eq : e) - p);
        size_t vlen = (size_t)(e - v);

        if (klen == 6 && memcmp(p, "socket", 6) == 0) {
            free(t->socket);
            if ((t->socket = url_decode(v, vlen, SOCKET_MAX, "socket",
                                        cause)) == NULL)
                return -1;
            if (t->socket[0] != '/') {
                store_set_cause(cause, "MySQL URL socket must be an absolute "
                                "path");
                return -1;
            }
        } else if (jdbc && klen == 4 && memcmp(p, "user", 4) == 0) {
            if (t->user == NULL &&
                (t->user = url_decode(v, vlen, USER_MAX, "user", cause)) ==
                    NULL)
                return -1;
        } else if (jdbc && klen == 8 && memcmp(p, "password", 8) == 0) {
            if (t->password == NULL &&
                (t->password = url_decode(v, vlen, PASSWORD_MAX, "password",
                                          cause)) == NULL)
                return -1;
        } else if (!jdbc && klen > 0) {
            /* JDBC URLs carry many driver options, ignored; ours has one. */
            store_set_cause(cause, "unknown parameter \"%.*s\" in MySQL URL "
                            "(only socket=)", (int)klen, p);
            return -1;
        }
        p = e + 1;
    }
    return 0;
}

int
store_parse_mysql_url(const char *url, struct mysql_target *t, char **cause)
{
    static const struct {
        const char *prefix;
        int jdbc;
    } schemes[] = {
        { "jdbc:mysql://", 1 },
        { "jdbc:mariadb://", 1 },
        { "mysql://", 0 },
        { "mariadb://", 0 },
    };
    const char *p = NULL, *end, *auth_end, *at, *path, *q, *db_end;
    int jdbc = 0;
    size_t len;

    memset(t, 0, sizeof *t);
    t->port = 3306;
    if (url == NULL || *url == '\0') {
        store_set_cause(cause, "empty MySQL URL");
        return -1;
    }
    len = strnlen(url, URL_MAX + 1);
    if (len > URL_MAX) {
        store_set_cause(cause, "MySQL URL longer than %d bytes", URL_MAX);
        return -1;
    }
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t n = strlen(schemes[i].prefix);
        if (strncmp(url, schemes[i].prefix, n) == 0) {
            p = url + n;
            jdbc = schemes[i].jdbc;
            break;
        }
    }
    if (p == NULL) {
        store_set_cause(cause, "not a MySQL URL: want "
                        "jdbc:mysql://host:port/db or "
                        "mysql://user:pass@host:port/db");
        return -1;
    }
    end = url + len;
    for (const char *c = url; c < end; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f || *c == '#') {
            store_set_cause(cause, "MySQL URL contains a space, control "
                            "character or '#'");
            return -1;
        }

    /* authority = [userinfo@]host[:port], up to the first '/' or '?' */
    auth_end = p + strcspn(p, "/?");
    path = *auth_end == '/' ? auth_end + 1 : NULL;
    at = NULL;
    for (const char *c = p; c < auth_end; c++)
        if (*c == '@')
            at = c;
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *ue = colon != NULL ? colon : at;
        if (ue == p) {
            store_set_cause(cause, "empty user name in MySQL URL");
            goto error;
        }
        if ((t->user = url_decode(p, (size_t)(ue - p), USER_MAX, "user",
                                  cause)) == NULL)
            goto error;
        if (colon != NULL &&
            (t->password = url_decode(colon + 1, (size_t)(at - colon - 1),
                                      PASSWORD_MAX, "password", cause)) ==
                NULL)
            goto error;
        p = at + 1;
    }
    if (url_host_port(p, auth_end, t, cause) == -1)
        goto error;

    /* /database[?query] */
    if (path == NULL) {
        store_set_cause(cause, "MySQL URL names no database (want .../db)");
        goto error;
    }
    q = strchr(path, '?');
    db_end = q != NULL ? q : end;
    if (db_end == path) {
        store_set_cause(cause, "MySQL URL names no database (want .../db)");
        goto error;
    }
    if (memchr(path, '/', (size_t)(db_end - path)) != NULL) {
        store_set_cause(cause, "junk after the database name in MySQL URL");
        goto error;
    }
    if ((t->database = url_decode(path, (size_t)(db_end - path), DATABASE_MAX,
                                  "database", cause)) == NULL)
        goto error;
    if (q != NULL && url_query(q + 1, end, jdbc, t, cause) == -1)
        goto error;

    if (t->host == NULL) {
        if (t->socket == NULL) {
            store_set_cause(cause, "MySQL URL names no host");
            goto error;
        }
        t->host = xstrdup("localhost");
    }
    return 0;

error:
    store_mysql_target_free(t);
    return -1;
}
