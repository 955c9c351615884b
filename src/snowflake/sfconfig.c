/* sfconfig.c: snowflake mode from the config (see sfconfig.h): the layout,
 * `leafd decode`, the worker ID parameters and the start.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "sfcodec.h"
#include "sfconfig.h"
#include "snowflake.h"
#include "util.h"
#include "workerid.h"
#include "workerid_cache.h"
#include "workerid_lease.h"
#include "workerid_mysql.h"
#include "workerid_pg.h"
#include "workerid_redis.h"
#include "workerid_zk.h"

/* k8s with its fence also in a store (snowflake.k8s.fence_store). */
static int
sfconfig_k8s_store(const struct config *cfg)
{
    return cfg->worker_source == WORKER_K8S &&
           cfg->k8s_fence_store != K8S_FENCE_NONE;
}

/* The store holds worker IDs in MySQL. */
static int
sfconfig_uses_mysql(const struct config *cfg)
{
    return cfg->worker_source == WORKER_MYSQL ||
           (sfconfig_k8s_store(cfg) &&
            cfg->k8s_fence_store == K8S_FENCE_MYSQL);
}

/* The store holds worker IDs in PostgreSQL. */
static int
sfconfig_uses_pg(const struct config *cfg)
{
    return cfg->worker_source == WORKER_POSTGRESQL ||
           (sfconfig_k8s_store(cfg) &&
            cfg->k8s_fence_store == K8S_FENCE_POSTGRESQL);
}

/* The worker IDs this node may hold (config_worker_range), within the
 * layout l. 0, or -1 with *cause. */
static int
sfconfig_range(const struct config *cfg, const struct sfcodec_layout *l,
               uint64_t *min, uint64_t *max, char **cause)
{
    int64_t lo, hi;

    if (config_worker_range(cfg, &lo, &hi, cause) == -1)
        return -1;
    assert(lo >= 0 && lo <= hi && (uint64_t)hi <= l->max_worker);
    *min = (uint64_t)lo;
    *max = (uint64_t)hi;
    return 0;
}

/* The pod name (snowflake.k8s.ordinal_env, or the hostname) into buf, and
 * its worker ID: the ordinal + snowflake.k8s.ordinal_offset, inside the
 * range. 0, or -1 with *cause. */
static int
sfconfig_k8s_worker(const struct config *cfg, const struct sfcodec_layout *l,
                    char *buf, size_t size, int64_t *worker, char **cause)
{
    const char *name = NULL;
    uint64_t min, max;

    buf[0] = '\0';
    if (cfg->k8s_ordinal_env[0] != '\0') {
        name = getenv(cfg->k8s_ordinal_env);
        if (name == NULL) {
            *cause = xasprintf("snowflake.k8s.ordinal_env: %s is not set",
                               cfg->k8s_ordinal_env);
            return -1;
        }
    } else if (gethostname(buf, size) == 0) {
        buf[size - 1] = '\0';
        name = buf;
    }
    if (sfconfig_range(cfg, l, &min, &max, cause) == -1 ||
        workerid_k8s_ordinal(name, cfg->k8s_ordinal_offset, l->max_worker,
                             worker, cause) == -1)
        return -1;
    if ((uint64_t)*worker < min || (uint64_t)*worker > max) {
        *cause = xasprintf("pod %s: ordinal + snowflake.k8s.ordinal_offset "
                           "%" PRId64 " = worker ID %" PRId64 " is outside "
                           "snowflake.worker_id_min..worker_id_max (%" PRIu64
                           "..%" PRIu64 "): set the offset so that every "
                           "ordinal of the StatefulSet lands inside the "
                           "range, or scale it down", name,
                           cfg->k8s_ordinal_offset, *worker, min, max);
        return -1;
    }
    if (name != buf)
        snprintf(buf, size, "%s", name);
    return 0;
}

#define SFCONFIG_K8S_NS_FILE \
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

/* The pod's identity in a fence store into ident (which holds the pod
 * name): "<namespace>/<pod>", the namespace from snowflake.k8s.
 * namespace_env, else the service account's namespace file; *alias gets
 * the bare pod name, the identity of a run before namespaces, whose row
 * the pod takes back as its own. No namespace known: the bare name, alias
 * "", with a warning. 0, or -1 with *cause. */
static int
sfconfig_k8s_identity(const struct config *cfg, char *ident, size_t size,
                      char *alias, size_t alias_size, char **cause)
{
    char nsbuf[128] = "";
    const char *ns = NULL;

    snprintf(alias, alias_size, "%s", ident);
    if (cfg->k8s_namespace_env[0] != '\0') {
        ns = getenv(cfg->k8s_namespace_env);
        if (ns == NULL) {
            *cause = xasprintf("snowflake.k8s.namespace_env: %s is not set",
                               cfg->k8s_namespace_env);
            return -1;
        }
    } else {
        FILE *f = fopen(SFCONFIG_K8S_NS_FILE, "r");
        if (f != NULL) {
            if (fgets(nsbuf, sizeof nsbuf, f) != NULL) {
                nsbuf[strcspn(nsbuf, "\r\n")] = '\0';
                ns = nsbuf;
            }
            fclose(f);
        }
    }
    if (ns == NULL || *ns == '\0') {
        log_warn("snowflake: no namespace for pod %s (neither "
                 "snowflake.k8s.namespace_env nor %s): its identity in the "
                 "fence store is the bare pod name, which a pod of the same "
                 "name in another namespace on that store shares", alias,
                 SFCONFIG_K8S_NS_FILE);
        alias[0] = '\0';
        return 0;
    }
    return workerid_k8s_identity(alias, ns, ident, size, cause);
}

/* ZooKeeper: named, or auto with an address. */
static int
sfconfig_uses_zk(const struct config *cfg)
{
    return cfg->worker_source == WORKER_ZOOKEEPER ||
           (cfg->worker_source == WORKER_AUTO && cfg->zk_address != NULL &&
            *cfg->zk_address != '\0');
}

int
sfconfig_layout(struct sfcodec_layout *l, const struct config *cfg,
                      int64_t now_ms, char **cause)
{
    return sfcodec_layout_init(l, cfg->epoch_ms, (int)cfg->timestamp_bits,
                          (int)cfg->datacenter_bits, (int)cfg->worker_bits,
                          (int)cfg->sequence_bits, now_ms,
                          cfg->expiry_margin_days, cause);
}

int
sfconfig_decode_cli(const struct config *cfg, const char *id,
                     int leaf_format, struct sbuf *out, char **cause)
{
    struct sfcodec_layout l;

    if (sfconfig_layout(&l, cfg, -1, cause) == -1)
        return -1;
    return sfcodec_decode_to_json(&l, id, strlen(id), leaf_format, out, cause);
}

static struct wlease *lease_open(const struct config *cfg,
                                 const struct sfcodec_layout *l,
                                 int http_port,
                                 const struct wlease_hook *hook,
                                 char **cause);

struct snowflake *
sfconfig_start(const struct config *cfg, int http_port, snowflake_wake_fn wake,
                void *wake_arg, char **cause)
{
    return sfconfig_start_with(cfg, http_port, wake, wake_arg, NULL, cause);
}

struct snowflake *
sfconfig_start_with(const struct config *cfg, int http_port,
                    snowflake_wake_fn wake, void *wake_arg,
                    const struct wlease_hook *hook, char **cause)
{
    struct snowflake_options o;
    struct workerid *w;
    struct snowflake *sf;
    int64_t worker = -1, fence = 0;
    char *desc;

    memset(&o, 0, sizeof o);
    if (sfconfig_layout(&o.layout, cfg, util_wall_ms(), cause) == -1)
        return NULL;
    o.worker_range = 1;
    if (config_worker_range(cfg, &o.worker_min, &o.worker_max, cause) == -1)
        return NULL;
    if (cfg->sequence_random &&
        (cfg->sequence_random_bound < 1 ||
         (uint64_t)cfg->sequence_random_bound > o.layout.max_sequence + 1)) {
        *cause = xasprintf("snowflake.sequence_random_bound %" PRId64
                           " is outside 1..%" PRIu64 " (%d sequence bits)",
                           cfg->sequence_random_bound,
                           o.layout.max_sequence + 1,
                           o.layout.sequence_bits);
        return NULL;
    }
    if (cfg->sf_count_max < 1 || cfg->sf_count_max > 1000000) {
        *cause = xasprintf("snowflake.count_max %" PRId64 " is outside "
                           "1..1000000", cfg->sf_count_max);
        return NULL;
    }
    if (cfg->fence_step_ms < 10) {
        *cause = xasprintf("snowflake.fence_step_ms %" PRId64 " is below 10",
                           cfg->fence_step_ms);
        return NULL;
    }
    if (cfg->max_borrow_ms * 2 > cfg->fence_step_ms)
        log_warn("snowflake.max_borrow_ms %" PRId64 " is over half of "
                 "snowflake.fence_step_ms %" PRId64 ": bursts may wait for "
                 "the fence", cfg->max_borrow_ms, cfg->fence_step_ms);

    if (cfg->worker_source == WORKER_REDIS ||
        cfg->worker_source == WORKER_MYSQL ||
        cfg->worker_source == WORKER_POSTGRESQL || sfconfig_uses_zk(cfg) ||
        sfconfig_k8s_store(cfg)) {
        struct wlease *l = lease_open(cfg, &o.layout, http_port, hook,
                                      cause);
        if (l == NULL)
            return NULL;
        w = NULL;
        wlease_get(l, &worker, &fence);
        wlease_backend(l, &o.backend);
    } else {
        w = sfconfig_workerid_open(cfg, &o.layout, http_port, cause);
        if (w == NULL)
            return NULL;
        workerid_get(w, &worker, &fence);
        workerid_backend(w, &o.backend);
    }
    o.worker_id = worker;
    o.datacenter_id = cfg->datacenter_id;
    o.start_fence_ms = fence;
    o.sequence_random = cfg->sequence_random;
    o.sequence_random_bound = cfg->sequence_random_bound;
    o.max_backward_ms = cfg->max_backward_ms;
    o.max_borrow_ms = cfg->max_borrow_ms;
    o.fence_step_ms = cfg->fence_step_ms;
    o.start_wait_ms = cfg->start_wait_ms;
    o.count_max = (uint32_t)cfg->sf_count_max;
    o.wake = wake;
    o.wake_arg = wake_arg;

    sf = snowflake_create(&o, cause);
    if (sf == NULL)
        return NULL;
    desc = sfcodec_layout_describe(&o.layout);
    log_info("%s", desc);
    free(desc);
    if (worker >= 0) {
        int64_t now = util_wall_ms();
        log_info("snowflake worker ID %" PRId64 " from %s; fence %" PRId64
                 "%s", worker, o.backend.source(o.backend.arg), fence,
                 fence >= now ? " is ahead of the clock: IDs wait for it" : "");
    } else {
        log_warn("snowflake: no worker ID yet (%s %s unreachable); requests "
                 "are refused until it is reached", sfconfig_uses_zk(cfg) ?
                 "ZooKeeper" : "the worker ID store", sfconfig_uses_zk(cfg) ?
                 cfg->zk_address : sfconfig_uses_mysql(cfg) ? "(mysql)" :
                 sfconfig_uses_pg(cfg) ? "(postgresql)" :
                 cfg->sf_redis_sentinels[0] ? cfg->sf_redis_sentinels :
                 cfg->sf_redis_url);
    }
    return sf;
}

int
sfconfig_check(const struct config *cfg, char **cause)
{
    struct workerid_redis_sentinels sv;

    if (cfg->sf_redis_sentinels[0] == '\0')
        return 0;
    if (workerid_redis_check_master_name(cfg->sf_redis_master_name,
                                         cause) == -1 ||
        workerid_redis_parse_sentinels(cfg->sf_redis_sentinels, &sv,
                                       cause) == -1)
        return -1;
    workerid_redis_sentinels_free(&sv);
    return 0;
}

/* This node's ip for a store identity: snowflake.ip, or the first
 * non-loopback IPv4, or 127.0.0.1 (logged). */
static void
sfconfig_ip(const struct config *cfg, char *buf, size_t size, int warn)
{
    if (cfg->sf_ip != NULL && *cfg->sf_ip != '\0') {
        snprintf(buf, size, "%s", cfg->sf_ip);
    } else if (workerid_local_ipv4(buf, size) != 0) {
        snprintf(buf, size, "127.0.0.1");
        if (warn)
            log_warn("no non-loopback IPv4 address: registering as 127.0.0.1 "
                     "(set snowflake.ip)");
    }
}

/* The Redis and MySQL stores' timeout for starting (each command of a
 * claim and of the start's clock-check write): a quarter of the lease, 1 to
 * 5 s. A fence write in service and a release have the heartbeat's (at most
 * 1 s; MySQL's client counts whole seconds, so 1 s). */
static int64_t
start_op_timeout(int64_t lease_ms)
{
    int64_t t = lease_ms / 4;

    return t < 1000 ? 1000 : t > 5000 ? 5000 : t;
}

/* The PostgreSQL store for cfg (not connected): 0, or -1 with *cause. */
static int
pg_store(const struct config *cfg, int64_t start_ms, struct wlease_store *st,
         char **cause)
{
    int own = cfg->sf_pg_url != NULL && cfg->sf_pg_url[0];

    return workerid_pg_store(own ? cfg->sf_pg_url : cfg->pg_url,
                             own ? "snowflake.postgresql.url" :
                                   "segment.postgresql.url", 1000, start_ms,
                             st, cause);
}

int
sfconfig_check_store(const struct config *cfg, char **cause)
{
    struct wlease_store st;

    if (!cfg->snowflake_enable || !sfconfig_uses_pg(cfg))
        return 0;
    if (pg_store(cfg, 1000, &st, cause) == -1)
        return -1;
    st.close(st.arg);
    return 0;
}

struct wlease *
sfconfig_lease_open(const struct config *cfg, const struct sfcodec_layout *l,
                    int http_port, char **cause)
{
    return lease_open(cfg, l, http_port, NULL, cause);
}

static struct wlease *
lease_open(const struct config *cfg, const struct sfcodec_layout *l,
           int http_port, const struct wlease_hook *hook, char **cause)
{
    struct wlease_params p;
    struct wlease_store st;
    char ip[64], ident[256], alias[256] = "", *cache = NULL;
    struct wlease *w;
    int zk = sfconfig_uses_zk(cfg);

    memset(&p, 0, sizeof p);
    sfconfig_ip(cfg, ip, sizeof ip, 1);
    p.port = cfg->snowflake_port > 0 ? (int)cfg->snowflake_port : http_port;
    if (sfconfig_k8s_store(cfg)) {
        /* the worker ID is the pod's; the store holds it for the pod name */
        if (sfconfig_k8s_worker(cfg, l, ident, sizeof ident,
                                &p.worker_id, cause) == -1 ||
            sfconfig_k8s_identity(cfg, ident, sizeof ident, alias,
                                  sizeof alias, cause) == -1)
            return NULL;
        p.alias = alias;
        p.fixed_worker = 1;
        p.source = "k8s";
    } else {
        snprintf(ident, sizeof ident, "%s:%d", ip, p.port);
    }
    p.identity = ident;
    p.ip = ip;
    p.leaf_name = cfg->leaf_name;
    if (cfg->cache_file != NULL && *cfg->cache_file != '\0')
        p.cache_path = cfg->cache_file;
    else if (p.fixed_worker)  /* as without a store: the worker ID's */
        p.cache_path = cache = xasprintf(
            "leafd-snowflake-%s-worker-%lld-%lld.json", cfg->leaf_name,
            (long long)cfg->datacenter_id, (long long)p.worker_id);
    else
        p.cache_path = cache = xasprintf("leafd-snowflake-%s-%d.json",
                                         cfg->leaf_name, p.port);
    p.datacenter_id = cfg->datacenter_id;
    if (sfconfig_range(cfg, l, &p.min_worker, &p.max_worker, cause) == -1) {
        free(cache);
        return NULL;
    }
    if (hook != NULL)
        p.hook = *hook;
    workerid_cache_layout(l->epoch_ms, l->timestamp_bits, l->datacenter_bits,
                          l->worker_bits, l->sequence_bits, p.layout,
                          sizeof p.layout);
    p.heartbeat_ms = cfg->heartbeat_ms > 0 ? cfg->heartbeat_ms : 3000;
    /* ZooKeeper (Leaf's rule): a held node goes to nobody else unless
     * snowflake.takeover; then the lease is takeover_age_ms */
    p.lease_ms = zk && !cfg->takeover ? 0 : cfg->takeover_age_ms;
    p.release_on_stop = cfg->release_on_stop;
    p.max_clock_offset_ms = cfg->max_clock_offset_ms;
    p.unknown_gate_ms = cfg->fence_step_ms + cfg->max_borrow_ms +
                        cfg->max_clock_offset_ms;
    if (p.lease_ms > 0 && p.lease_ms < 4 * cfg->fence_step_ms) {
        *cause = xasprintf("snowflake.takeover_age_ms %" PRId64 " (the "
                           "lease) must be at least 4 x "
                           "snowflake.fence_step_ms (%" PRId64 ")",
                           p.lease_ms, 4 * cfg->fence_step_ms);
        free(cache);
        return NULL;
    }
    if (zk) {
        struct workerid_zk_params zp;

        memset(&zp, 0, sizeof zp);
        zp.address = cfg->zk_address;
        zp.leaf_name = cfg->leaf_name;
        zp.ip = ip;
        zp.port = p.port;
        zp.session_timeout_ms = cfg->zk_timeout_ms > 0 ? cfg->zk_timeout_ms :
                                                         10000;
        zp.heartbeat_ms = p.heartbeat_ms;
        zp.fence_step_ms = cfg->fence_step_ms;
        zp.takeover = cfg->takeover;
        if (workerid_zk_store(&zp, &st, cause) == -1) {
            free(cache);
            return NULL;
        }
    } else if (sfconfig_uses_mysql(cfg)) {
        const char *url = cfg->sf_mysql_url[0] ? cfg->sf_mysql_url :
                          cfg->mysql_url[0] ? cfg->mysql_url : cfg->jdbc_url;
        if (workerid_mysql_store(url, cfg->jdbc_username,
                                 cfg->jdbc_password, 1000,
                                 start_op_timeout(p.lease_ms), &st,
                                 cause) == -1) {
            free(cache);
            return NULL;
        }
    } else if (sfconfig_uses_pg(cfg)) {
        if (pg_store(cfg, start_op_timeout(p.lease_ms), &st, cause) == -1) {
            free(cache);
            return NULL;
        }
    } else if (workerid_redis_store(cfg->sf_redis_url, cfg->sf_redis_prefix,
                                    p.heartbeat_ms < 1000 ? p.heartbeat_ms :
                                    1000, start_op_timeout(p.lease_ms), &st,
                                    cause) == -1) {
        free(cache);
        return NULL;
    } else if (cfg->sf_redis_sentinels[0] != '\0' &&
               workerid_redis_use_sentinels(&st, cfg->sf_redis_sentinels,
                                            cfg->sf_redis_master_name,
                                            cause) == -1) {
        st.close(st.arg);
        free(cache);
        return NULL;
    }
    w = wlease_open(&p, &st, cause);
    free(cache);
    return w;
}

struct workerid *
sfconfig_workerid_open(const struct config *cfg, const struct sfcodec_layout *l,
              int http_port, char **cause)
{
    struct workerid_params p;
    char ipbuf[64], *cache = NULL;
    struct workerid *w;

    memset(&p, 0, sizeof p);
    p.leaf_name = cfg->leaf_name;
    p.port = cfg->snowflake_port > 0 ? (int)cfg->snowflake_port : http_port;
    sfconfig_ip(cfg, ipbuf, sizeof ipbuf, 0);
    p.ip = ipbuf;
    p.worker_id = cfg->worker_id;
    if (cfg->worker_source == WORKER_K8S) {
        char name[256];

        if (sfconfig_k8s_worker(cfg, l, name, sizeof name,
                                &p.worker_id, cause) == -1)
            return NULL;
        p.k8s = 1;
    }
    if (cfg->cache_file != NULL && *cfg->cache_file != '\0')
        p.cache_path = cfg->cache_file;
    else                    /* the fence belongs to the worker ID */
        p.cache_path = cache = xasprintf(
            "leafd-snowflake-%s-worker-%lld-%lld.json",
            p.leaf_name != NULL ? p.leaf_name : "",
            (long long)cfg->datacenter_id, (long long)p.worker_id);
    p.datacenter_id = cfg->datacenter_id;
    if (sfconfig_range(cfg, l, &p.min_worker, &p.max_worker, cause) == -1) {
        free(cache);
        return NULL;
    }
    workerid_cache_layout(l->epoch_ms, l->timestamp_bits, l->datacenter_bits,
                          l->worker_bits, l->sequence_bits, p.layout,
                          sizeof p.layout);
    w = workerid_open_params(&p, cause);
    free(cache);
    return w;
}
