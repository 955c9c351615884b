/* workerid_redis_sentinel.c: the text of Redis Sentinel (see
 * workerid_redis.h): snowflake.redis.sentinels, snowflake.redis.master_name
 * and a Sentinel's answer to SENTINEL get-master-addr-by-name, apart from
 * the client so that they can be fuzzed alone
 * (fuzz/fuzz_redis_sentinel.c). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"
#include "workerid_redis.h"

#define WR_SENTINELS_LEN 1024
#define WR_HOST_MAX      255

void
workerid_redis_sentinels_free(struct workerid_redis_sentinels *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->host[i]);
    memset(s, 0, sizeof *s);
}

/* A host name or an IPv4/IPv6 literal (without brackets): 1..255 bytes of
 * letters, digits, '.', '-', '_' and ':'. */
static int
wrs_host_ok(const char *h, size_t n)
{
    if (n == 0 || n > WR_HOST_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
              c == ':'))
            return 0;
    }
    return 1;
}

static int
wrs_port(const char *p, size_t n, int *port)
{
    int64_t v;

    if (n == 0 || n > 5 || util_parse_i64(p, n, 0, &v) == -1 || v < 1 ||
        v > 65535)
        return -1;
    *port = (int)v;
    return 0;
}

int
workerid_redis_parse_sentinels(const char *list,
                               struct workerid_redis_sentinels *s,
                               char **cause)
{
    const char *p, *end;
    int i = 0;

    memset(s, 0, sizeof *s);
    if (list == NULL || strlen(list) > WR_SENTINELS_LEN) {
        *cause = xstrdup("snowflake.redis.sentinels: missing or over 1024 "
                         "bytes");
        return -1;
    }
    p = list;
    end = list + strlen(list);
    while (p <= end) {
        const char *e = memchr(p, ',', (size_t)(end - p)), *a, *b, *hs, *he;
        const char *ps = NULL;

        if (e == NULL)
            e = end;
        a = p;
        b = e;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        i++;
        if (s->n == WORKERID_REDIS_SENTINELS_MAX) {
            *cause = xasprintf("snowflake.redis.sentinels: more than %d "
                               "sentinels", WORKERID_REDIS_SENTINELS_MAX);
            goto fail;
        }
        if (a < b && *a == '[') {           /* [v6]:port */
            const char *rb = memchr(a, ']', (size_t)(b - a));
            if (rb == NULL || rb + 1 >= b || rb[1] != ':')
                goto bad;
            hs = a + 1;
            he = rb;
            ps = rb + 2;
        } else {
            const char *c = memrchr(a, ':', (size_t)(b - a));
            if (c == NULL || memchr(a, ':', (size_t)(c - a)) != NULL)
                goto bad;                    /* none, or a bare v6 */
            hs = a;
            he = c;
            ps = c + 1;
        }
        if (!wrs_host_ok(hs, (size_t)(he - hs)) ||
            wrs_port(ps, (size_t)(b - ps), &s->port[s->n]) == -1)
            goto bad;
        for (int j = 0; j < s->n; j++)
            if (s->port[j] == s->port[s->n] &&
                strlen(s->host[j]) == (size_t)(he - hs) &&
                strncasecmp(s->host[j], hs, (size_t)(he - hs)) == 0) {
                /* one Sentinel counted twice would make a false majority
                 * (host names compare without regard to case) */
                *cause = xasprintf("snowflake.redis.sentinels: entry %d "
                                   "\"%.*s\" repeats entry %d", i,
                                   (int)(b - a < 80 ? b - a : 80), a, j + 1);
                goto fail;
            }
        s->host[s->n++] = xstrndup(hs, (size_t)(he - hs));
        p = e + 1;
        continue;
bad:
        *cause = xasprintf("snowflake.redis.sentinels: entry %d \"%.*s\" is "
                           "not host:port (port 1..65535; an IPv6 address "
                           "in brackets: [::1]:26379)", i,
                           (int)(b - a < 80 ? b - a : 80), a);
        goto fail;
    }
    return 0;
fail:
    workerid_redis_sentinels_free(s);
    return -1;
}

int
workerid_redis_check_master_name(const char *name, char **cause)
{
    size_t n = name != NULL ? strlen(name) : 0;

    if (n == 0 || n > WORKERID_REDIS_MASTER_NAME_MAX)
        goto bad;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_'))
            goto bad;
    }
    return 0;
bad:
    *cause = xasprintf("snowflake.redis.master_name: 1 to %d letters, digits, "
                       "'.', '-' or '_' (the name in sentinel.conf's "
                       "`sentinel monitor NAME ...`)",
                       WORKERID_REDIS_MASTER_NAME_MAX);
    return -1;
}

int
workerid_redis_master_addr(const char *host, size_t hlen, const char *port,
                           size_t plen, char *hbuf, size_t hsize, int *portp,
                           char **cause)
{
    if (!wrs_host_ok(host, hlen) || hlen >= hsize ||
        wrs_port(port, plen, portp) == -1) {
        *cause = xasprintf("sentinel named a master that is not a host and a "
                           "port (\"%.*s\" \"%.*s\")",
                           (int)(hlen < 64 ? hlen : 64), host,
                           (int)(plen < 16 ? plen : 16), port);
        return -1;
    }
    memcpy(hbuf, host, hlen);
    hbuf[hlen] = '\0';
    return 0;
}
