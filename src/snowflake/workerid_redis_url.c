/* workerid_redis_url.c: snowflake.redis.url (see workerid_redis.h), apart
 * from the client so that it can be fuzzed alone (fuzz/fuzz_redis_url.c). */
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "workerid_redis.h"

#define WR_URL_MAX 1024

void
workerid_redis_url_free(struct workerid_redis_url *u)
{
    free(u->host);
    free(u->path);
    free(u->password);
    memset(u, 0, sizeof *u);
}

int
workerid_redis_parse_url(const char *url, struct workerid_redis_url *u,
                         char **cause)
{
    const char *s, *at, *slash, *colon, *end;
    int64_t v;

    memset(u, 0, sizeof *u);
    u->port = 6379;
    if (url == NULL || strlen(url) > WR_URL_MAX) {
        *cause = xstrdup("snowflake.redis.url: missing or too long");
        return -1;
    }
    if (strncmp(url, "unix://", 7) == 0) {
        const char *q = strchr(url + 7, '?');
        size_t n = q != NULL ? (size_t)(q - (url + 7)) : strlen(url + 7);
        if (n == 0 || url[7] != '/')
            goto bad;
        u->path = xstrndup(url + 7, n);
        if (q != NULL) {
            if (strncmp(q, "?db=", 4) != 0 ||
                util_parse_i64(q + 4, strlen(q + 4), 0, &v) == -1 ||
                v < 0 || v > 1000000)
                goto bad;
            u->db = (int)v;
        }
        return 0;
    }
    if (strncmp(url, "redis://", 8) != 0)
        goto bad;
    s = url + 8;
    end = s + strlen(s);
    slash = strchr(s, '/');
    if (slash == NULL)
        slash = end;
    at = memrchr(s, '@', (size_t)(slash - s));
    if (at != NULL) {
        const char *pw = memchr(s, ':', (size_t)(at - s));
        if (pw == NULL)
            goto bad;       /* [user]:password@ */
        u->password = xstrndup(pw + 1, (size_t)(at - pw - 1));
        s = at + 1;
    }
    colon = memchr(s, ':', (size_t)(slash - s));
    if (colon != NULL) {
        if (util_parse_i64(colon + 1, (size_t)(slash - colon - 1), 0,
                           &v) == -1 || v < 1 || v > 65535)
            goto bad;
        u->port = (int)v;
    } else {
        colon = slash;
    }
    if (colon == s)
        goto bad;
    u->host = xstrndup(s, (size_t)(colon - s));
    if (*slash == '/' && slash[1] != '\0') {
        if (util_parse_i64(slash + 1, strlen(slash + 1), 0, &v) == -1 ||
            v < 0 || v > 1000000)
            goto bad;
        u->db = (int)v;
    }
    return 0;
bad:
    workerid_redis_url_free(u);
    *cause = xstrdup("snowflake.redis.url: expected redis://[:password@]"
                     "host[:port][/db] or unix:///path[?db=N]");
    return -1;
}
