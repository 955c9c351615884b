/* db_mysql_url.c: MySQL URLs, Leaf's JDBC form and leafd's mysql:// form
 * (see db_mysql_url.h). Pure: no I/O, no MySQL library; fuzzed alone
 * (fuzz/fuzz_mysql_url.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_mysql_url.h"
#include "util.h"

#define URL_MAX      1024   /* whole URL */
#define HOST_MAX     255
#define USER_MAX     128
#define PASSWORD_MAX 256
#define DATABASE_MAX 64     /* MySQL's limit on a schema name */
#define SOCKET_MAX   107    /* sun_path less its NUL */

void
db_mysql_target_free(struct db_mysql_target *t)
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
        util_set_cause(cause, "bad %s in MySQL URL (bad %%-escape, NUL, or "
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
url_host_port(const char *p, const char *end, struct db_mysql_target *t,
              char **cause)
{
    const char *h = p, *he, *colon = NULL;
    uint64_t port;

    if (memchr(p, ',', (size_t)(end - p)) != NULL) {
        util_set_cause(cause, "MySQL URL lists several hosts; leafd takes one");
        return -1;
    }
    if (p < end && *p == '[') {
        h = p + 1;
        he = memchr(h, ']', (size_t)(end - h));
        if (he == NULL || he == h) {
            util_set_cause(cause, "bad [IPv6] host in MySQL URL");
            return -1;
        }
        for (const char *q = h; q < he; q++)
            if (!(url_host_char((unsigned char)*q) || *q == ':')) {
                util_set_cause(cause, "bad [IPv6] host in MySQL URL");
                return -1;
            }
        if (he + 1 < end) {
            if (he[1] != ':') {
                util_set_cause(cause, "junk after ] in MySQL URL host");
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
                    util_set_cause(cause, "bad character '%c' in MySQL URL "
                                    "host (want a name or IPv4 address)", c);
                else
                    util_set_cause(cause, "bad byte 0x%02x in MySQL URL "
                                    "host (want a name or IPv4 address)", c);
                return -1;
            }
    }
    if (he - h > HOST_MAX) {
        util_set_cause(cause, "MySQL URL host longer than %d bytes", HOST_MAX);
        return -1;
    }
    if (colon != NULL) {
        if (util_parse_u64(colon + 1, (size_t)(end - colon - 1), &port) == -1 ||
            port < 1 || port > 65535) {
            util_set_cause(cause, "bad port \"%.*s\" in MySQL URL (want "
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
url_query(const char *p, const char *end, int jdbc, struct db_mysql_target *t,
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
                util_set_cause(cause, "MySQL URL socket must be an absolute "
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
            util_set_cause(cause, "unknown parameter \"%.*s\" in MySQL URL "
                            "(only socket=)", (int)klen, p);
            return -1;
        }
        p = e + 1;
    }
    return 0;
}

int
db_mysql_url_parse(const char *url, struct db_mysql_target *t, char **cause)
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
        util_set_cause(cause, "empty MySQL URL");
        return -1;
    }
    len = strnlen(url, URL_MAX + 1);
    if (len > URL_MAX) {
        util_set_cause(cause, "MySQL URL longer than %d bytes", URL_MAX);
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
        util_set_cause(cause, "not a MySQL URL: want "
                        "jdbc:mysql://host:port/db or "
                        "mysql://user:pass@host:port/db");
        return -1;
    }
    end = url + len;
    for (const char *c = url; c < end; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f || *c == '#') {
            util_set_cause(cause, "MySQL URL contains a space, control "
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
            util_set_cause(cause, "empty user name in MySQL URL");
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
        util_set_cause(cause, "MySQL URL names no database (want .../db)");
        goto error;
    }
    q = strchr(path, '?');
    db_end = q != NULL ? q : end;
    if (db_end == path) {
        util_set_cause(cause, "MySQL URL names no database (want .../db)");
        goto error;
    }
    if (memchr(path, '/', (size_t)(db_end - path)) != NULL) {
        util_set_cause(cause, "junk after the database name in MySQL URL");
        goto error;
    }
    if ((t->database = url_decode(path, (size_t)(db_end - path), DATABASE_MAX,
                                  "database", cause)) == NULL)
        goto error;
    if (q != NULL && url_query(q + 1, end, jdbc, t, cause) == -1)
        goto error;

    if (t->host == NULL) {
        if (t->socket == NULL) {
            util_set_cause(cause, "MySQL URL names no host");
            goto error;
        }
        t->host = xstrdup("localhost");
    }
    return 0;

error:
    db_mysql_target_free(t);
    return -1;
}
