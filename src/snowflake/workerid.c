/* workerid.c: snowflake worker IDs that need no shared store: static
 * (snowflake.worker_id) and k8s (a StatefulSet ordinal, workerid_k8s.c),
 * whose fence is the cache file; and this node's IPv4 address, which the
 * stores use for the identity (see workerid.h).
 *
 * The fence: every persist writes the cache file (workerid_cache.c: temp
 * file, fsync, rename, fsync of the directory) before the generator issues
 * up to it, and the next start gates on the file's fence. No other process
 * can inherit a static worker ID through a store, so the file alone counts
 * (SNOWFLAKE_PERSIST_OK once it is written).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"
#include "workerid.h"
#include "workerid_cache.h"
#include "workerid_zk.h"        /* WORKERID_ZK_STATE_HELP */

struct workerid {
    struct workerid_params p;       /* strings below are our own copies */
    char            *leaf_name;
    char            *cache_path;
    char            *ip;
    int64_t          worker;
    int64_t          start_fence;
};

int
workerid_local_ipv4(char *buf, size_t size)
{
    struct ifaddrs *ifa, *i;
    int rc = -1;

    if (getifaddrs(&ifa) == -1)
        return -1;
    for (i = ifa; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
            !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
            continue;
        if (inet_ntop(AF_INET,
                      &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr,
                      buf, (socklen_t)size) != NULL) {
            rc = 0;
            break;
        }
    }
    freeifaddrs(ifa);
    return rc;
}

struct workerid *
workerid_open_params(const struct workerid_params *p, char **cause)
{
    struct workerid *w;
    struct workerid_cache c;
    int crc;

    if (p->cache_path == NULL || *p->cache_path == '\0') {
        *cause = xstrdup("snowflake: no cache file path");
        return NULL;
    }
    if (p->worker_id < 0 || (uint64_t)p->worker_id < p->min_worker ||
        (uint64_t)p->worker_id > p->max_worker) {
        *cause = xasprintf("snowflake.worker_id %" PRId64 " is outside "
                           "%" PRIu64 "..%" PRIu64 " (snowflake.worker_id_min"
                           ", worker_id_max)", p->worker_id, p->min_worker,
                           p->max_worker);
        return NULL;
    }
    crc = workerid_cache_read(p->cache_path, &c, cause);
    if (crc == -1)
        return NULL;
    if (crc == 0 && workerid_cache_layout_check(p->cache_path, &c, p->layout,
                                                cause) == -1) {
        workerid_cache_free(&c);
        return NULL;
    }
    if (crc == 0) {
        log_info("snowflake cache file %s: worker ID %" PRId64 ", fence %"
                 PRId64, p->cache_path, c.worker_id, c.fence_ms);
        if (c.worker_id >= 0 && c.worker_id != p->worker_id)
            log_info("the cache file was written for worker ID %" PRId64
                     "; its fence still applies", c.worker_id);
    }
    w = xcalloc(1, sizeof *w);
    w->p = *p;
    w->leaf_name = xstrdup(p->leaf_name != NULL ? p->leaf_name : "");
    w->cache_path = xstrdup(p->cache_path);
    w->ip = xstrdup(p->ip != NULL ? p->ip : "");
    w->p.leaf_name = w->leaf_name;
    w->p.cache_path = w->cache_path;
    w->p.ip = w->ip;
    w->worker = p->worker_id;
    w->start_fence = crc == 0 ? c.fence_ms : 0;
    workerid_cache_free(&c);
    return w;
}

void
workerid_close(struct workerid *w)
{
    if (w == NULL)
        return;
    free(w->leaf_name);
    free(w->cache_path);
    free(w->ip);
    free(w);
}

int
workerid_get(struct workerid *w, int64_t *worker, int64_t *fence_ms)
{
    *worker = w->worker;
    *fence_ms = w->start_fence;
    return 0;
}

const char *
workerid_source(struct workerid *w)
{
    return w->p.k8s ? "k8s" : "static";
}

int
workerid_persist(struct workerid *w, int64_t fence_ms, char **cause)
{
    struct workerid_cache c;

    memset(&c, 0, sizeof c);
    c.leaf_name = w->leaf_name;
    c.source = (char *)workerid_source(w);
    c.ip = w->ip;
    c.port = w->p.port;
    c.worker_id = w->worker;
    c.datacenter_id = w->p.datacenter_id;
    c.fence_ms = fence_ms;
    c.zk_node = (char *)"";
    c.nonce = (char *)"";
    c.layout = w->p.layout;
    if (workerid_cache_write(w->cache_path, &c, cause) == -1)
        return SNOWFLAKE_PERSIST_FAILED;
    return SNOWFLAKE_PERSIST_OK;
}

int
workerid_tick(struct workerid *w, int64_t now_ms)
{
    (void)w;
    (void)now_ms;
    return SNOWFLAKE_TICK_NONE;
}

/* --- backend glue --------------------------------------------------------- */

static int
wid_be_persist(void *arg, int64_t fence, char **cause)
{
    return workerid_persist(arg, fence, cause);
}

static int
wid_be_tick(void *arg, int64_t now)
{
    return workerid_tick(arg, now);
}

static int
wid_be_worker(void *arg, int64_t *worker, int64_t *fence)
{
    return workerid_get(arg, worker, fence);
}

static const char *
wid_be_source(void *arg)
{
    return workerid_source(arg);
}

static void
wid_be_close(void *arg)
{
    workerid_close(arg);
}

static void
wid_be_state_json(void *arg, struct sbuf *out)
{
    struct workerid *w = arg;

    sbuf_puts(out, ",\"ip\":");
    sbuf_json_str(out, w->ip);
    sbuf_printf(out, ",\"port\":%d,\"cache_file\":", w->p.port);
    sbuf_json_str(out, w->cache_path);
    sbuf_puts(out, ",\"zk_node\":null,\"zk_state\":\"none\"");
}

static void
wid_be_metrics(void *arg, struct sbuf *out)
{
    (void)arg;
    sbuf_metric_i64(out, "leafd_snowflake_zk_session_state", "gauge",
                    WORKERID_ZK_STATE_HELP, 0);
}

void
workerid_backend(struct workerid *w, struct snowflake_backend *b)
{
    memset(b, 0, sizeof *b);
    b->persist = wid_be_persist;
    b->tick = wid_be_tick;
    b->worker = wid_be_worker;
    b->state_json = wid_be_state_json;
    b->metrics = wid_be_metrics;
    b->source = wid_be_source;
    b->close = wid_be_close;
    b->arg = w;
}
