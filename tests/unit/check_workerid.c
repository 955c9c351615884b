/* check_workerid.c: snowflake worker IDs: the cache file and the static
 * source (workerid.c), and, when LEAFD_TEST_ZK=host:port names a ZooKeeper
 * (tests/lib/zookeeper.sh start DIR), the ZooKeeper store under the lease
 * (workerid_zk.c, workerid_lease.c): Leaf-compatible registration, reuse,
 * takeover, release_on_stop and fence writes against it, a TCP proxy cut
 * between leafd and it, and a model of Java Leaf's registration, heartbeat
 * and fallback. With
 * LEAFD_TEST_ZK_DIR=DIR too, a test stops and restarts that ZooKeeper (no
 * worker ID until it is back; fences unconfirmed while it is down). Under
 * CI=1 (or true) a missing LEAFD_TEST_ZK or LEAFD_TEST_ZK_DIR fails the run. */
#include <check.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "sfconfig.h"
#include "snowflake.h"
#include "idset.h"
#include "tcpproxy.h"
#include "util.h"
#include "workerid.h"
#include "workerid_lease.h"
#include "workerid_zk.h"
#include "workerid_zk_node.h"
#include "zk.h"

static char tmpdir[64];

static void
setup_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/leafd-wid-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void
teardown_tmp(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", tmpdir);
}

static char *
tmp_path(const char *name)
{
    return xasprintf("%s/%s", tmpdir, name);
}

static void
write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* --- the cache file ------------------------------------------------------- */

START_TEST(cache_roundtrip)
{
    struct workerid_cache c = {0}, r;
    char *path = tmp_path("c.json"), *cause = NULL;

    c.leaf_name = "com.example.leaf";
    c.source = "zookeeper";
    c.ip = "10.1.2.3";
    c.port = 8080;
    c.worker_id = 513;
    c.datacenter_id = 2;
    c.fence_ms = 1700000003000LL;
    c.zk_node = "/snowflake/com.example.leaf/forever/10.1.2.3:8080-0000000513";
    ck_assert_int_eq(workerid_cache_write(path, &c, &cause), 0);
    ck_assert_int_eq(workerid_cache_read(path, &r, &cause), 0);
    ck_assert_str_eq(r.leaf_name, c.leaf_name);
    ck_assert_str_eq(r.source, c.source);
    ck_assert_str_eq(r.ip, c.ip);
    ck_assert_int_eq(r.port, 8080);
    ck_assert_int_eq(r.worker_id, 513);
    ck_assert_int_eq(r.datacenter_id, 2);
    ck_assert_int_eq(r.fence_ms, 1700000003000LL);
    ck_assert_str_eq(r.zk_node, c.zk_node);
    workerid_cache_free(&r);
    free(path);
}
END_TEST

START_TEST(cache_atomic_write)
{
    struct workerid_cache c = {0}, r;
    char *path = tmp_path("c.json"), *tmp = tmp_path("c.json.tmp");
    char *cause = NULL;
    struct stat st;

    c.worker_id = 1;
    c.fence_ms = 1000;
    ck_assert_int_eq(workerid_cache_write(path, &c, &cause), 0);
    ck_assert_int_eq(stat(tmp, &st), -1);           /* nothing left over */
    /* a crash half-way through the next write leaves only the temp file */
    write_file(tmp, "{\"format\":1,\"worker_id\":2,\"fen");
    ck_assert_int_eq(workerid_cache_read(path, &r, &cause), 0);
    ck_assert_int_eq(r.fence_ms, 1000);
    workerid_cache_free(&r);
    /* and the next write goes through */
    c.fence_ms = 2000;
    ck_assert_int_eq(workerid_cache_write(path, &c, &cause), 0);
    ck_assert_int_eq(workerid_cache_read(path, &r, &cause), 0);
    ck_assert_int_eq(r.fence_ms, 2000);
    ck_assert_int_eq(stat(tmp, &st), -1);
    workerid_cache_free(&r);
    /* an unwritable place fails with the reason */
    ck_assert_int_eq(workerid_cache_write("/nonexistent-dir/c.json", &c, &cause),
                     -1);
    ck_assert_ptr_nonnull(strstr(cause, "/nonexistent-dir/c.json"));
    free(cause);
    free(path);
    free(tmp);
}
END_TEST

START_TEST(cache_corrupt)
{
    static const char *bad[] = {
        "", "garbage", "[1,2]", "{\"format\":1}",
        "{\"format\":1,\"worker_id\":3}",
        "{\"format\":2,\"worker_id\":3,\"fence\":5}",
        "{\"format\":1,\"worker_id\":\"3\",\"fence\":5}",
        "{\"format\":1,\"worker_id\":3,\"fence\":-5}",
        "{\"format\":1,\"worker_id\":3,\"fence\":5",
    };
    struct workerid_cache r;
    char *path = tmp_path("c.json"), *cause = NULL;

    ck_assert_int_eq(workerid_cache_read(path, &r, &cause), 1);   /* missing */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, bad[i]);
        cause = NULL;
        ck_assert_msg(workerid_cache_read(path, &r, &cause) == -1, "accepted %s",
                      bad[i]);
        ck_assert_ptr_nonnull(strstr(cause, "corrupt"));
        ck_assert_ptr_nonnull(strstr(cause, path));
        free(cause);
    }
    write_file(path, "{\"format\":1,\"worker_id\":3,\"fence\":5}");
    ck_assert_int_eq(workerid_cache_read(path, &r, &cause), 0);
    ck_assert_int_eq(r.worker_id, 3);
    ck_assert_str_eq(r.ip, "");
    workerid_cache_free(&r);
    free(path);
}
END_TEST

/* --- static source ---------------------------------------------------------- */

static struct workerid_params
static_params(const char *cache, int64_t worker)
{
    struct workerid_params p;

    memset(&p, 0, sizeof p);
    p.leaf_name = "t";
    p.cache_path = cache;
    p.ip = "127.0.0.1";
    p.port = 9000;
    p.worker_id = worker;
    p.max_worker = 1023;
    return p;
}

START_TEST(static_source)
{
    char *path = tmp_path("s.json"), *cause = NULL;
    struct workerid_params p = static_params(path, 12);
    struct workerid *w;
    struct workerid_cache r;
    int64_t worker, fence;

    w = workerid_open_params(&p, &cause);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(workerid_get(w, &worker, &fence), 0);
    ck_assert_int_eq(worker, 12);
    ck_assert_int_eq(fence, 0);
    ck_assert_str_eq(workerid_source(w), "static");
    ck_assert_int_eq(workerid_persist(w, 1234567, &cause), 0);
    ck_assert_int_eq(workerid_tick(w, 0), SNOWFLAKE_TICK_NONE);
    workerid_close(w);
    ck_assert_int_eq(workerid_cache_read(path, &r, &cause), 0);
    ck_assert_int_eq(r.worker_id, 12);
    ck_assert_int_eq(r.fence_ms, 1234567);
    ck_assert_str_eq(r.source, "static");
    workerid_cache_free(&r);
    /* the fence is read back at the next start */
    w = workerid_open_params(&p, &cause);
    ck_assert_ptr_nonnull(w);
    workerid_get(w, &worker, &fence);
    ck_assert_int_eq(fence, 1234567);
    workerid_close(w);
    /* a worker ID beyond the layout */
    p.worker_id = 1024;
    ck_assert_ptr_null(workerid_open_params(&p, &cause));
    ck_assert_ptr_nonnull(strstr(cause, "0..1023"));
    free(cause);
    /* a corrupt cache file stops the start */
    p.worker_id = 12;
    write_file(path, "{oops");
    ck_assert_ptr_null(workerid_open_params(&p, &cause));
    ck_assert_ptr_nonnull(strstr(cause, "corrupt"));
    free(cause);
    free(path);
}
END_TEST

static void
base_config(struct config *cfg, const char *cache)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->leaf_name = "leafd-test";
    cfg->snowflake_enable = 1;
    cfg->zk_address = "";
    cfg->worker_source = WORKER_STATIC;
    cfg->worker_id = 3;
    cfg->worker_id_max = -1;        /* the whole field, as the key's default */
    cfg->epoch_ms = SFCODEC_LEAF_EPOCH_MS;
    cfg->timestamp_bits = 41;
    cfg->worker_bits = 10;
    cfg->sequence_bits = 12;
    cfg->sequence_random_bound = 100;
    cfg->max_backward_ms = 1000;
    cfg->max_borrow_ms = 1000;
    cfg->fence_step_ms = 3000;
    cfg->start_wait_ms = 5000;
    cfg->expiry_margin_days = 365;
    cfg->sf_count_max = 4096;
    cfg->cache_file = (char *)cache;
    cfg->sf_ip = "";
    cfg->heartbeat_ms = 3000;
    cfg->zk_timeout_ms = 4000;
    cfg->takeover_age_ms = 600000;
}

/* The cache file records the layout. A restart on another layout is
 * refused, naming both, unless every new ID is above every old one: bits
 * moved out of timestamp_bits (worker_bits raised), the same epoch. */
START_TEST(layout_change_checked)
{
    char *path = tmp_path("layout.json"), *cause = NULL;
    struct config cfg;
    struct snowflake *sf;
    struct snowflake_refusal why;
    struct workerid_cache c;
    uint64_t ids[10], last;
    static const int64_t refused[][3] = {   /* timestamp, worker, sequence */
        { 42, 9, 12 },                      /* worker_bits lowered */
        { 41, 9, 13 },                      /* ... into the sequence */
        { 41, 11, 11 },                     /* raised from the sequence */
    };

    base_config(&cfg, path);
    sf = sfconfig_start(&cfg, 8123, NULL, NULL, &cause);
    ck_assert_msg(sf != NULL, "%s", cause);
    ck_assert_int_eq(snowflake_next(sf, 10, ids, &why), SNOWFLAKE_OK);
    last = ids[9];
    snowflake_stop(sf);
    ck_assert_int_eq(workerid_cache_read(path, &c, &cause), 0);
    ck_assert_str_eq(c.layout, "1288834974657:41/0/10/12");
    workerid_cache_free(&c);

    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        cfg.timestamp_bits = refused[i][0];
        cfg.worker_bits = refused[i][1];
        cfg.sequence_bits = refused[i][2];
        ck_assert_ptr_null(sfconfig_start(&cfg, 8123, NULL, NULL, &cause));
        ck_assert_msg(strstr(cause, "snowflake layout changed") != NULL &&
                      strstr(cause, "1288834974657:41/0/10/12") != NULL,
                      "%s", cause);
        free(cause);
        cause = NULL;
    }
    /* worker_bits raised out of timestamp_bits: every ID above the old */
    cfg.timestamp_bits = 40;
    cfg.worker_bits = 11;
    cfg.sequence_bits = 12;
    sf = sfconfig_start(&cfg, 8123, NULL, NULL, &cause);
    ck_assert_msg(sf != NULL, "%s", cause);
    while (snowflake_next(sf, 10, ids, &why) != SNOWFLAKE_OK)
        usleep(1000);
    ck_assert_uint_gt(ids[0], last);
    snowflake_stop(sf);
    /* and back (lowered into timestamp_bits): refused */
    cfg.timestamp_bits = 41;
    cfg.worker_bits = 10;
    ck_assert_ptr_null(sfconfig_start(&cfg, 8123, NULL, NULL, &cause));
    ck_assert_msg(strstr(cause, "1288834974657:40/0/11/12") != NULL, "%s",
                  cause);
    free(cause);
    free(path);
}
END_TEST

START_TEST(start_static_and_restart)
{
    char *path = tmp_path("start.json"), *cause = NULL, *reason = NULL;
    struct config cfg;
    struct snowflake *sf;
    struct snowflake_refusal why;
    struct sbuf b = {0};
    uint64_t ids[100];
    int rc;

    base_config(&cfg, path);
    sf = sfconfig_start(&cfg, 8123, NULL, NULL, &cause);
    ck_assert_msg(sf != NULL, "%s", cause);
    ck_assert_int_eq(snowflake_next(sf, 100, ids, &why), SNOWFLAKE_OK);
    ck_assert_uint_eq((ids[0] >> 12) & 1023, 3);
    ck_assert_int_eq(snowflake_health(sf, &reason), 0);
    snowflake_state_json(sf, &b);
    ck_assert_ptr_nonnull(strstr(b.p, "\"source\":\"static\""));
    ck_assert_ptr_nonnull(strstr(b.p, "\"worker_id\":3"));
    sbuf_free(&b);
    snowflake_stop(sf);

    /* a clean stop left the last timestamp issued as the fence: the
     * restart serves at once, above every earlier ID */
    {
        uint64_t last = ids[99];
        sf = sfconfig_start(&cfg, 8123, NULL, NULL, &cause);
        ck_assert_msg(sf != NULL, "%s", cause);
        rc = snowflake_next(sf, 1, ids, &why);
        if (rc == SNOWFLAKE_WAIT)      /* the same ms as the last ID: a ms at most */
            ck_assert_int_le(why.wait_ms, 2);
        else
            ck_assert_int_eq(rc, SNOWFLAKE_OK);
        while (rc != SNOWFLAKE_OK) {
            usleep(1000);
            rc = snowflake_next(sf, 1, ids, &why);
        }
        ck_assert_uint_gt(ids[0], last);
        snowflake_stop(sf);
    }

    /* a crash leaves the fence a step ahead: the restart waits for it */
    {
        struct workerid_cache c;
        ck_assert_int_eq(workerid_cache_read(path, &c, &cause), 0);
        c.fence_ms = util_wall_ms() + 3000;
        ck_assert_int_eq(workerid_cache_write(path, &c, &cause), 0);
        workerid_cache_free(&c);
    }
    sf = sfconfig_start(&cfg, 8123, NULL, NULL, &cause);
    ck_assert_msg(sf != NULL, "%s", cause);
    rc = snowflake_next(sf, 1, ids, &why);
    ck_assert_int_eq(rc, SNOWFLAKE_WAIT);
    ck_assert_str_eq(why.code, "fence_not_passed");
    ck_assert_int_gt(why.wait_ms, 2000);
    ck_assert_int_le(why.wait_ms, 3001);
    ck_assert_int_eq(snowflake_health(sf, &reason), -1);
    free(reason);
    snowflake_stop(sf);

    /* bad layouts and IDs stop the start */
    cfg.sequence_bits = 11;
    ck_assert_ptr_null(sfconfig_start(&cfg, 8123, NULL, NULL, &cause));
    ck_assert_ptr_nonnull(strstr(cause, "63"));
    free(cause);
    cfg.sequence_bits = 12;
    cfg.timestamp_bits = 40;
    cfg.worker_bits = 11;
    cfg.epoch_ms = util_wall_ms() - (1LL << 40) + 86400000LL * 30;
    ck_assert_ptr_null(sfconfig_start(&cfg, 8123, NULL, NULL, &cause));
    ck_assert_ptr_nonnull(strstr(cause, "margin"));
    free(cause);
    free(path);
}
END_TEST

/* --- ZooKeeper -------------------------------------------------------------- */

static const char *zk_addr;
static int name_seq;

static char *
fresh_name(void)
{
    return xasprintf("wid%ld_%d_%d", (long)time(NULL), (int)getpid(),
                     name_seq++);
}

/* ZooKeeper worker IDs: the ZooKeeper store (workerid_zk.c) under the lease
 * (workerid_lease.c), opened as sfconfig_lease_open does. */
struct zkt_params {
    const char *leaf_name;
    const char *zk_address;
    const char *cache_path;
    const char *ip;
    int         port;
    uint64_t    min_worker;
    uint64_t    max_worker;
    int64_t     heartbeat_ms;
    int64_t     zk_timeout_ms;
    int64_t     fence_step_ms;
    int         takeover;
    int64_t     takeover_age_ms;
    int         release_on_stop;
    int64_t     max_clock_offset_ms;
    int64_t     unknown_gate_ms;
    snowflake_clock_fn clock;
    void       *clock_arg;
};

static struct wlease *
zkt_open(const struct zkt_params *p, char **cause)
{
    struct workerid_zk_params zp;
    struct wlease_params lp;
    struct wlease_store st;
    char ident[96];

    memset(&zp, 0, sizeof zp);
    zp.address = p->zk_address;
    zp.leaf_name = p->leaf_name;
    zp.ip = p->ip;
    zp.port = p->port;
    zp.session_timeout_ms = p->zk_timeout_ms;
    zp.heartbeat_ms = p->heartbeat_ms;
    zp.fence_step_ms = p->fence_step_ms;
    zp.takeover = p->takeover;
    if (workerid_zk_store(&zp, &st, cause) == -1)
        return NULL;
    memset(&lp, 0, sizeof lp);
    snprintf(ident, sizeof ident, "%s:%d", p->ip, p->port);
    lp.identity = ident;
    lp.cache_path = p->cache_path;
    lp.leaf_name = p->leaf_name;
    lp.ip = p->ip;
    lp.port = p->port;
    lp.min_worker = p->min_worker;
    lp.max_worker = p->max_worker;
    lp.heartbeat_ms = p->heartbeat_ms;
    lp.lease_ms = p->takeover ? p->takeover_age_ms : 0;
    lp.release_on_stop = p->release_on_stop;
    lp.max_clock_offset_ms = p->max_clock_offset_ms;
    lp.unknown_gate_ms = p->unknown_gate_ms;
    lp.clock = p->clock;
    lp.clock_arg = p->clock_arg;
    return wlease_open(&lp, &st, cause);
}

static int
zkt_persist(struct wlease *l, int64_t fence_ms, char **cause)
{
    struct snowflake_backend b;

    wlease_backend(l, &b);
    return b.persist(b.arg, fence_ms, cause);
}

static int
zkt_tick(struct wlease *l, int64_t now_ms)
{
    struct snowflake_backend b;

    wlease_backend(l, &b);
    return b.tick(b.arg, now_ms);
}

static const char *
zkt_source(struct wlease *l)
{
    struct snowflake_backend b;

    wlease_backend(l, &b);
    return b.source(b.arg);
}

static char *
zkt_node(struct wlease *l)
{
    return workerid_zk_node(wlease_store_arg(l));
}

static struct zk *
zkt_client(struct wlease *l)
{
    return workerid_zk_client(wlease_store_arg(l));
}

static struct zkt_params
zk_params(const char *name, const char *ip, int port, const char *cache)
{
    struct zkt_params p;

    memset(&p, 0, sizeof p);
    p.leaf_name = name;
    p.zk_address = zk_addr;
    p.cache_path = cache;
    p.ip = ip;
    p.port = port;
    p.max_worker = 1023;
    p.heartbeat_ms = 200;
    p.zk_timeout_ms = 4000;
    p.fence_step_ms = 3000;
    p.takeover_age_ms = 600000;
    return p;
}

static struct zk *
zk_test_open(void)
{
    char *cause = NULL;
    struct zk *z = zk_open(zk_addr, 4000, &cause);

    ck_assert_msg(z != NULL, "%s", cause);
    ck_assert_msg(zk_wait_connected(z, 5000), "ZooKeeper %s not reachable",
                  zk_addr);
    return z;
}

/* A node made the way Java Leaf makes it (nonce NULL), or the way leafd
 * makes it. Returns the created path. */
static char *
make_node(struct zk *z, const char *name, const char *ip, int port,
          int64_t ts, const char *nonce)
{
    char *cause = NULL, *path, *data, *created = NULL, *p;
    int rc;

    p = xasprintf("/snowflake");
    zk_create(z, p, "", 0, 0, NULL, 4000, NULL);
    free(p);
    p = xasprintf("/snowflake/%s", name);
    zk_create(z, p, "", 0, 0, NULL, 4000, NULL);
    free(p);
    p = xasprintf("/snowflake/%s/forever", name);
    zk_create(z, p, "", 0, 0, NULL, 4000, NULL);
    free(p);
    path = xasprintf("/snowflake/%s/forever/%s:%d-", name, ip, port);
    if (nonce != NULL)
        data = xasprintf("{\"ip\":\"%s\",\"port\":\"%d\",\"timestamp\":%"
                         PRId64 ",\"leafd\":\"%s\"}", ip, port, ts, nonce);
    else
        data = xasprintf("{\"ip\":\"%s\",\"port\":\"%d\",\"timestamp\":%"
                         PRId64 "}", ip, port, ts);
    rc = zk_create(z, path, data, (int)strlen(data), ZOO_PERSISTENT_SEQUENTIAL,
                   &created, 4000, &cause);
    ck_assert_msg(rc == ZOK, "%s", cause);
    free(path);
    free(data);
    return created;
}

static char *
java_leaf_node(struct zk *z, const char *name, const char *ip, int port,
               int64_t ts)
{
    return make_node(z, name, ip, port, ts, NULL);
}

static json_t *
node_json(struct zk *z, const char *path)
{
    char *data = NULL, *cause = NULL;
    int len = 0;
    struct Stat st;
    json_error_t err;
    json_t *j;

    ck_assert_msg(zk_get(z, path, &data, &len, &st, 4000, &cause) == ZOK, "%s",
                  cause);
    j = json_loadb(data, (size_t)len, 0, &err);
    ck_assert_msg(j != NULL, "node data %s", data);
    free(data);
    return j;
}

static struct wlease *
open_ok(const struct zkt_params *p)
{
    char *cause = NULL;
    struct wlease *w = zkt_open(p, &cause);

    ck_assert_msg(w != NULL, "zkt_open: %s", cause);
    return w;
}

START_TEST(zk_three_registrations)
{
    char *name = fresh_name(), *cache[3], *node;
    struct wlease *w[3];
    int64_t worker[3], fence;
    struct zk *z = zk_test_open();
    json_t *j;

    for (int i = 0; i < 3; i++) {
        char fn[32];
        snprintf(fn, sizeof fn, "c%d.json", i);
        cache[i] = tmp_path(fn);
        struct zkt_params p = zk_params(name, "10.0.0.1", 7001 + i, cache[i]);
        w[i] = open_ok(&p);
        ck_assert_int_eq(wlease_get(w[i], &worker[i], &fence), 0);
        ck_assert_str_eq(zkt_source(w[i]), "zookeeper");
    }
    ck_assert_int_ne(worker[0], worker[1]);
    ck_assert_int_ne(worker[0], worker[2]);
    ck_assert_int_ne(worker[1], worker[2]);
    /* Leaf's node name and data */
    node = zkt_node(w[1]);
    {
        char want[200];
        snprintf(want, sizeof want, "/snowflake/%s/forever/10.0.0.1:7002-%010"
                 PRId64, name, worker[1]);
        ck_assert_str_eq(node, want);
    }
    ck_assert_int_eq(zkt_persist(w[1], 1900000000000LL, NULL), 0);
    j = node_json(z, node);
    ck_assert_str_eq(json_string_value(json_object_get(j, "ip")), "10.0.0.1");
    ck_assert_str_eq(json_string_value(json_object_get(j, "port")), "7002");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "timestamp")),
                     1900000000000LL);
    /* plus this process's nonce: the timestamp is a leafd fence */
    ck_assert_int_eq(json_object_size(j), 4);
    ck_assert_int_eq(strlen(json_string_value(json_object_get(j, "leafd"))),
                     16);
    json_decref(j);
    free(node);
    for (int i = 0; i < 3; i++) {
        wlease_close(w[i]);
        free(cache[i]);
    }
    zk_close(z);
    free(name);
}
END_TEST

START_TEST(zk_reuse_same_endpoint)
{
    char *name = fresh_name(), *cache = tmp_path("c.json");
    char *cache2 = tmp_path("other.json");
    struct zkt_params p = zk_params(name, "10.0.0.2", 7100, cache);
    struct wlease *w;
    int64_t worker, worker2, fence;

    w = open_ok(&p);
    wlease_get(w, &worker, &fence);
    ck_assert_int_eq(zkt_persist(w, util_wall_ms() + 3000, NULL), 0);
    wlease_close(w);
    /* same ip:port: same worker ID, and the node's fence comes back */
    w = open_ok(&p);
    wlease_get(w, &worker2, &fence);
    ck_assert_int_eq(worker2, worker);
    ck_assert_int_gt(fence, util_wall_ms());
    wlease_close(w);
    /* even without the cache file */
    p.cache_path = cache2;
    w = open_ok(&p);
    wlease_get(w, &worker2, &fence);
    ck_assert_int_eq(worker2, worker);
    ck_assert_int_gt(fence, util_wall_ms() - 1000);
    wlease_close(w);
    free(cache);
    free(cache2);
    free(name);
}
END_TEST

START_TEST(zk_java_leaf_node)
{
    char *name = fresh_name(), *cache = tmp_path("c.json"), *node, *mine;
    struct zk *z = zk_test_open();
    struct zkt_params p = zk_params(name, "10.1.2.3", 8080, cache);
    struct wlease *w;
    int64_t worker, fence, ts = util_wall_ms() - 5000;
    json_t *j;

    /* someone else first, so the worker ID is not 0 */
    free(java_leaf_node(z, name, "10.9.9.9", 1, ts));
    node = java_leaf_node(z, name, "10.1.2.3", 8080, ts);
    w = open_ok(&p);
    wlease_get(w, &worker, &fence);
    mine = zkt_node(w);
    ck_assert_str_eq(mine, node);
    ck_assert_int_eq(worker, 1);
    /* Java's timestamp is a heartbeat: one interval and a margin past it */
    ck_assert_int_eq(fence, ts + 3000 + 2000);
    ck_assert_int_eq(zkt_persist(w, ts + 10000, NULL), 0);
    j = node_json(z, node);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "timestamp")),
                     ts + 10000);
    ck_assert_str_eq(json_string_value(json_object_get(j, "port")), "8080");
    json_decref(j);
    wlease_close(w);
    free(node);
    free(mine);

    /* a Leaf node whose timestamp is ahead of our clock: reused, and that
     * timestamp is the fence to pass (Leaf would refuse to start) */
    free(name);
    name = fresh_name();
    p.leaf_name = name;
    unlink(cache);
    node = java_leaf_node(z, name, "10.1.2.3", 8080, util_wall_ms() + 60000);
    w = open_ok(&p);
    wlease_get(w, &worker, &fence);
    ck_assert_int_eq(worker, 0);
    ck_assert_int_gt(fence, util_wall_ms() + 50000);
    wlease_close(w);
    free(node);
    zk_close(z);
    free(cache);
    free(name);
}
END_TEST

struct contender {
    struct zkt_params p;
    pthread_barrier_t *barrier;
    struct wlease *w;
    char *cause;
};

static void *
contend(void *arg)
{
    struct contender *c = arg;

    pthread_barrier_wait(c->barrier);
    c->w = zkt_open(&c->p, &c->cause);
    return NULL;
}

START_TEST(zk_takeover_race)
{
    struct zk *z = zk_test_open();
    pthread_barrier_t barrier;

    for (int round = 0; round < 5; round++) {
        char *name = fresh_name(), *stale, *c0 = NULL, *c1 = NULL;
        struct contender c[2];
        pthread_t th[2];
        int won = 0, winner = -1;
        int64_t old = util_wall_ms() - 3600000;

        stale = make_node(z, name, "10.9.9.9", 1, old, "00000000deadbeef");
        pthread_barrier_init(&barrier, NULL, 2);
        for (int i = 0; i < 2; i++) {
            char fn[32];
            snprintf(fn, sizeof fn, "t%d_%d.json", round, i);
            char *cp = tmp_path(fn);
            if (i == 0)
                c0 = cp;
            else
                c1 = cp;
            c[i].p = zk_params(name, "10.0.0.3", 7200 + i, cp);
            c[i].p.takeover = 1;
            c[i].barrier = &barrier;
            c[i].w = NULL;
            c[i].cause = NULL;
            pthread_create(&th[i], NULL, contend, &c[i]);
        }
        for (int i = 0; i < 2; i++) {
            pthread_join(th[i], NULL);
            ck_assert_msg(c[i].w != NULL, "%s", c[i].cause);
        }
        for (int i = 0; i < 2; i++) {
            int64_t worker, fence;
            wlease_get(c[i].w, &worker, &fence);
            if (strcmp(zkt_source(c[i].w), "takeover") == 0) {
                won++;
                winner = i;
                ck_assert_int_eq(worker, 0);
                /* issue nothing until the old owner's fence has passed */
                ck_assert_int_eq(fence, old);
            } else {
                ck_assert_str_eq(zkt_source(c[i].w), "zookeeper");
                ck_assert_int_eq(worker, 1);
            }
        }
        ck_assert_int_eq(won, 1);
        {
            json_t *j = node_json(z, stale);
            ck_assert_int_eq(atoi(json_string_value(json_object_get(j, "port"))),
                             7200 + winner);
            json_decref(j);
        }
        /* the winner keeps writing; a write with the version read before the
         * takeover fails: that is what made the loser lose */
        ck_assert_int_eq(zkt_persist(c[winner].w, util_wall_ms() + 3000,
                                          NULL), 0);
        ck_assert_int_eq(zkt_tick(c[winner].w, util_wall_ms()),
                         SNOWFLAKE_TICK_NONE);
        ck_assert_int_eq(zk_set(z, stale, "x", 1, 0, NULL, 4000, NULL),
                         ZBADVERSION);
        for (int i = 0; i < 2; i++)
            wlease_close(c[i].w);
        pthread_barrier_destroy(&barrier);
        free(stale);
        free(c0);
        free(c1);
        free(name);
    }
    zk_close(z);
}
END_TEST

START_TEST(zk_taken_over_is_lost)
{
    char *name = fresh_name(), *cache = tmp_path("c.json"), *node;
    char *cache2 = tmp_path("c2.json");
    struct zk *z = zk_test_open();
    struct zkt_params p = zk_params(name, "10.0.0.4", 7300, cache);
    struct wlease *w, *w2;
    int64_t worker, fence;
    char *data;

    w = open_ok(&p);
    node = zkt_node(w);
    ck_assert_int_eq(zkt_persist(w, util_wall_ms() + 3000, NULL), 0);
    /* another node claims it */
    data = xasprintf("{\"ip\":\"10.7.7.7\",\"port\":\"1\",\"timestamp\":%"
                     PRId64 "}", util_wall_ms() + 3000);
    ck_assert_int_eq(zk_set(z, node, data, (int)strlen(data), -1, NULL, 4000,
                            NULL), ZOK);
    free(data);
    /* the fence write finds it taken: that fence does not count */
    ck_assert_int_eq(zkt_persist(w, util_wall_ms() + 4000, NULL), -1);
    ck_assert_int_eq(zkt_tick(w, util_wall_ms()), SNOWFLAKE_TICK_LOST);
    wlease_close(w);
    /* and a restart of the old owner does not take it back */
    p.cache_path = cache2;
    w2 = open_ok(&p);
    wlease_get(w2, &worker, &fence);
    ck_assert_int_eq(worker, 1);
    wlease_close(w2);
    free(node);
    free(cache);
    free(cache2);
    free(name);
    zk_close(z);
}
END_TEST

/* ZooKeeper went back in time, as an ensemble restored from an older copy
 * does: the going-back note of another epoch (an election: a standalone
 * server keeps epoch 0, so the note says 77) and A's node holding an
 * older fence, as the copy had it. B, with takeover, must neither take A's
 * node within a lease nor issue before the claim's moment + the new-node
 * gate; A, writing again, keeps its worker ID. Before the rule B took A's
 * node over, gated on the copy's fence. */
START_TEST(zk_went_back_in_time)
{
    char *name = fresh_name(), *ca = tmp_path("a.json"), *cb = tmp_path("b.json");
    char *node, *data = NULL, *note;
    struct zk *z = zk_test_open();
    struct zkt_params pa = zk_params(name, "10.0.2.1", 7911, ca), pb;
    struct wzk_node nd;
    struct wlease *wa, *wb;
    int64_t worker_a, worker_b, fence, t0;
    int len = 0;

    pa.takeover = 1;
    pa.takeover_age_ms = 2000;
    pa.fence_step_ms = 200;
    pa.heartbeat_ms = 100;
    pa.unknown_gate_ms = 1500;
    wa = open_ok(&pa);
    wlease_get(wa, &worker_a, &fence);
    node = zkt_node(wa);
    ck_assert_int_eq(zkt_persist(wa, util_wall_ms() + 200, NULL), 0);
    /* the restored copy: A's data with a fence older than the lease */
    ck_assert_int_eq(zk_get(z, node, &data, &len, NULL, 4000, NULL), ZOK);
    ck_assert_int_eq(wzk_node_parse(data, (size_t)len, &nd), 0);
    free(data);
    data = wzk_node_format(nd.ip, nd.port, util_wall_ms() - 10000, nd.nonce,
                           0, &len);
    ck_assert_int_eq(zk_set(z, node, data, len, -1, NULL, 4000, NULL), ZOK);
    free(data);
    wzk_node_free(&nd);
    note = xasprintf("/snowflake/%s/leafd_since", name);
    if (zk_create(z, note, "77 0", 4, 0, NULL, 4000, NULL) != ZOK)
        ck_assert_int_eq(zk_set(z, note, "77 0", 4, -1, NULL, 4000, NULL),
                         ZOK);
    usleep(20 * 1000);              /* A's node written before the claim */

    pb = pa;
    pb.ip = "10.0.2.2";
    pb.port = 7912;
    pb.cache_path = cb;
    t0 = util_wall_ms();
    wb = open_ok(&pb);
    wlease_get(wb, &worker_b, &fence);
    ck_assert_int_ne(worker_b, worker_a);
    ck_assert_str_eq(zkt_source(wb), "zookeeper");
    ck_assert_int_ge(fence, t0 + pb.unknown_gate_ms);
    /* A's next write lands (its own nonce): it keeps the ID */
    ck_assert_int_eq(zkt_persist(wa, util_wall_ms() + 200, NULL), 0);
    ck_assert_int_eq(zkt_tick(wa, util_wall_ms()), SNOWFLAKE_TICK_NONE);
    wlease_close(wb);
    wlease_close(wa);
    free(note);
    free(node);
    free(ca);
    free(cb);
    free(name);
    zk_close(z);
}
END_TEST

START_TEST(zk_exhausted)
{
    char *name = fresh_name(), *cause = NULL;
    struct wlease *w[2];

    for (int i = 0; i < 3; i++) {
        char fn[32];
        snprintf(fn, sizeof fn, "x%d.json", i);
        char *cache = tmp_path(fn);
        struct zkt_params p = zk_params(name, "10.0.0.5", 7400 + i, cache);
        p.max_worker = 1;          /* a 1-bit worker field */
        if (i < 2) {
            w[i] = open_ok(&p);
        } else {
            ck_assert_ptr_null(zkt_open(&p, &cause));
            ck_assert_ptr_nonnull(strstr(cause, "no free worker ID"));
            free(cause);
        }
        free(cache);
    }
    wlease_close(w[0]);
    wlease_close(w[1]);
    free(name);
}
END_TEST


/* The children of /snowflake/<name>/forever. */
static int
zk_nchildren(struct zk *z, const char *name)
{
    char *path = xasprintf("/snowflake/%s/forever", name), **names = NULL;
    char *cause = NULL;
    int n = 0;

    ck_assert_msg(zk_children(z, path, &names, &n, 4000, &cause) == ZOK,
                  "%s", cause);
    zk_strings_free(names, n);
    free(path);
    return n;
}

/* A range whose first ID is past ZooKeeper's sequence counter (a second
 * datacenter's, 40..42, on a path where Java Leaf registered sequence 0):
 * the counter is advanced with ephemeral probes that leave nothing behind,
 * the nodes get 40, 41, 42 (Leaf's layout: the sequence is the worker ID),
 * and a fourth is refused, naming the range, without a node of its own. */
START_TEST(zk_range_advances_counter)
{
    char *name = fresh_name(), *cause = NULL, *java, *node;
    struct zk *z = zk_test_open();
    struct wlease *w[3];
    int64_t worker, fence;

    java = java_leaf_node(z, name, "10.9.9.9", 8080, util_wall_ms());
    for (int i = 0; i < 4; i++) {
        char fn[32], *cache;
        struct zkt_params p;

        snprintf(fn, sizeof fn, "r%d.json", i);
        cache = tmp_path(fn);
        p = zk_params(name, "10.0.2.1", 7500 + i, cache);
        p.min_worker = 40;
        p.max_worker = 42;
        if (i < 3) {
            w[i] = open_ok(&p);
            wlease_get(w[i], &worker, &fence);
            ck_assert_int_eq(worker, 40 + i);
            node = zkt_node(w[i]);
            ck_assert_msg(strstr(node, ":7500-") == NULL || i != 0 ||
                          strstr(node, "-0000000040") != NULL, "%s", node);
            free(node);
        } else {
            ck_assert_ptr_null(zkt_open(&p, &cause));
            ck_assert_msg(strstr(cause, "no free worker ID") != NULL &&
                          strstr(cause, "past this node's range 40..42") !=
                          NULL, "%s", cause);
            free(cause);
            cause = NULL;
        }
        free(cache);
    }
    /* Java Leaf's node and the three: no probe, no refused node left */
    ck_assert_int_eq(zk_nchildren(z, name), 4);
    for (int i = 0; i < 3; i++)
        wlease_close(w[i]);
    free(java);
    zk_close(z);
    free(name);
}
END_TEST

/* A ZooKeeper path whose counter is past the range refuses at once and
 * creates no node; an identity whose own node is outside the range (the
 * range moved) is refused, naming the node, rather than issuing with it;
 * and the datacenter on range 0..1 of another path is unaffected. */
START_TEST(zk_range_refusals)
{
    char *name = fresh_name(), *other = fresh_name(), *cause = NULL;
    char *c1 = tmp_path("a.json"), *c2 = tmp_path("b.json"), *n[6];
    struct zk *z = zk_test_open();
    struct zkt_params p;
    struct wlease *w;
    int64_t worker, fence;

    for (int i = 0; i < 6; i++)     /* the counter at 6 */
        n[i] = java_leaf_node(z, name, "10.9.9.9", 9000 + i, util_wall_ms());
    p = zk_params(name, "10.0.3.1", 7600, c1);
    p.min_worker = 2;
    p.max_worker = 4;
    ck_assert_ptr_null(zkt_open(&p, &cause));
    ck_assert_msg(strstr(cause, "past this node's range 2..4") != NULL, "%s",
                  cause);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(zk_nchildren(z, name), 6);
    /* own node 0 (a leafd node of this ip:port), range 3..1023 now */
    free(make_node(z, other, "10.0.3.2", 7601, util_wall_ms() - 10000,
                   "0123456789abcdef"));
    p = zk_params(other, "10.0.3.2", 7601, c2);
    p.min_worker = 3;
    ck_assert_ptr_null(zkt_open(&p, &cause));
    ck_assert_msg(strstr(cause, "outside this node's range 3..1023") != NULL
                  && strstr(cause, "delete the node") != NULL, "%s", cause);
    free(cause);
    /* another identity on range 0..1 of that path takes 1 (0 is held) */
    p = zk_params(other, "10.0.3.3", 7602, c1);
    p.max_worker = 1;
    w = open_ok(&p);
    wlease_get(w, &worker, &fence);
    ck_assert_int_eq(worker, 1);
    wlease_close(w);
    for (int i = 0; i < 6; i++)
        free(n[i]);
    free(c1);
    free(c2);
    zk_close(z);
    free(name);
    free(other);
}
END_TEST

/* One node at a time advances the counter: while another holds
 * /snowflake/<name>/advance, a node whose range is past the counter has
 * no worker ID yet (no failure: it tries again), and takes the range's
 * first once the lock is gone; the probes took none of the range. */
START_TEST(zk_range_advance_lock)
{
    char *name = fresh_name(), *cache = tmp_path("l.json"), *lock, *cause = NULL;
    struct zk *z = zk_test_open();
    struct zkt_params p = zk_params(name, "10.0.4.1", 7700, cache);
    struct wlease *w;
    int64_t worker = -1, fence;

    free(java_leaf_node(z, name, "10.9.9.9", 8080, util_wall_ms()));
    lock = xasprintf("/snowflake/%s/advance", name);
    ck_assert_int_eq(zk_create(z, lock, "x", 1, ZOO_EPHEMERAL, NULL, 4000,
                               &cause), ZOK);
    p.min_worker = 20;
    p.max_worker = 29;
    w = open_ok(&p);
    ck_assert_int_eq(wlease_get(w, &worker, &fence), -1);
    ck_assert_int_eq(zk_delete(z, lock, -1, 4000, &cause), ZOK);
    for (int i = 0; i < 100 && worker < 0; i++) {
        usleep(50000);
        zkt_tick(w, util_wall_ms());
        wlease_get(w, &worker, &fence);
    }
    ck_assert_int_eq(worker, 20);
    wlease_close(w);
    free(lock);
    free(cache);
    zk_close(z);
    free(name);
}
END_TEST

START_TEST(zk_down_at_start_no_cache)
{
    char *name = fresh_name(), *cache = tmp_path("c.json");
    struct zkt_params p = zk_params(name, "10.0.0.6", 7500, cache);
    struct wlease *w;
    int64_t worker, worker2, fence;
    char *cause = NULL;

    w = open_ok(&p);
    wlease_get(w, &worker, &fence);
    ck_assert_int_eq(zkt_persist(w, 1900000000000LL, NULL),
                     SNOWFLAKE_PERSIST_OK);
    wlease_close(w);
    /* nothing listens there: the cache file's worker ID is not used, as no
     * fence could be confirmed (rule 1) */
    p.zk_address = "127.0.0.1:1";
    p.zk_timeout_ms = 1000;
    w = open_ok(&p);
    ck_assert_int_eq(wlease_get(w, &worker2, &fence), -1);
    ck_assert_str_eq(zkt_source(w), "none");
    /* a fence that only the file holds is reported as such */
    ck_assert_int_eq(zkt_persist(w, 1900000003000LL, &cause),
                     SNOWFLAKE_PERSIST_UNCONFIRMED);
    ck_assert_ptr_nonnull(strstr(cause, "cache file only"));
    free(cause);
    wlease_close(w);
    free(cache);
    free(name);
}
END_TEST

/* The first IDs of a generator on a new leaf_name: its forever node is
 * new, so they wait past its creation + fence step + borrow + clock limit
 * (workerid_zk.c); SNOWFLAKE_OK within 60 s, else the last result. */
static int
first_ids(struct snowflake *sf, uint64_t *ids, struct snowflake_refusal *why)
{
    int64_t until = util_mono_ms() + 60000;
    int rc;

    while ((rc = snowflake_next(sf, 10, ids, why)) != SNOWFLAKE_OK &&
           util_mono_ms() < until)
        usleep(50 * 1000);
    return rc;
}

/* Wait until sf's metrics hold want: the keeper writes every heartbeat_ms,
 * but a busy machine can hold it, or ZooKeeper, up for seconds. */
static void
wait_metrics(struct snowflake *sf, const char *want)
{
    struct sbuf b = {0};

    for (int i = 0;; i++) {
        snowflake_metrics(sf, &b);
        if (strstr(b.p, want) != NULL)
            break;
        ck_assert_msg(i < 300, "no '%s' in the metrics for 30 s:\n%s", want,
                      b.p);
        sbuf_free(&b);
        usleep(100000);
    }
    sbuf_free(&b);
}

START_TEST(zk_snowflake_start)
{
    char *name = fresh_name(), *cache = tmp_path("c.json"), *cause = NULL;
    struct config cfg;
    struct snowflake *sf;
    struct snowflake_refusal why;
    struct sbuf b = {0};
    uint64_t ids[10];
    json_t *j;
    json_error_t err;
    struct zk *z = zk_test_open();

    base_config(&cfg, cache);
    cfg.leaf_name = name;
    cfg.zk_address = (char *)zk_addr;
    cfg.worker_source = WORKER_ZOOKEEPER;
    cfg.sf_ip = "10.0.0.7";
    cfg.heartbeat_ms = 200;
    sf = sfconfig_start(&cfg, 7600, NULL, NULL, &cause);
    ck_assert_msg(sf != NULL, "%s", cause);
    ck_assert_int_eq(first_ids(sf, ids, &why), SNOWFLAKE_OK);
    snowflake_state_json(sf, &b);
    j = json_loads(b.p, 0, &err);
    ck_assert_msg(j != NULL, "%s", b.p);
    ck_assert_str_eq(json_string_value(json_object_get(j, "source")),
                     "zookeeper");
    ck_assert_str_eq(json_string_value(json_object_get(j, "zk_state")),
                     "connected");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(j, "zk_node")),
                                 "/forever/10.0.0.7:7600-0000000000"));
    {
        /* the node holds the persisted fence */
        json_t *n = node_json(z, json_string_value(json_object_get(j, "zk_node")));
        ck_assert_int_eq(json_integer_value(json_object_get(n, "timestamp")),
                         snowflake_fence(sf));
        json_decref(n);
    }
    json_decref(j);
    sbuf_free(&b);
    usleep(500000);
    /* heartbeats go on: an age under a second */
    wait_metrics(sf, "leafd_snowflake_heartbeat_age_seconds"
                     "{source=\"zookeeper\"} 0.");
    snowflake_metrics(sf, &b);
    ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_zk_session_state 2\n"));
    sbuf_free(&b);
    snowflake_stop(sf);
    zk_close(z);
    free(cache);
    free(name);
}
END_TEST

static void
noop_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

/* Expire z's session the standard way: a second handle with the same id
 * and password closes it. */
static void
expire_session(struct zk *z)
{
    clientid_t id;
    zhandle_t *zh;

    ck_assert_int_eq(zk_client_id(z, &id), 0);
    zh = zookeeper_init(zk_addr, noop_watcher, 4000, &id, NULL, 0);
    ck_assert_ptr_nonnull(zh);
    for (int i = 0; i < 300 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++)
        usleep(100000);
    ck_assert_int_eq(zoo_state(zh), ZOO_CONNECTED_STATE);
    zookeeper_close(zh);
}

START_TEST(zk_session_expiry)
{
    char *name = fresh_name(), *cache = tmp_path("c.json"), *node;
    struct zkt_params p = zk_params(name, "10.0.0.9", 7800, cache);
    struct wlease *w;
    struct snowflake_backend be;
    struct sbuf b = {0};
    struct zk *z = zk_test_open();
    struct zk *peek;
    int64_t want, got = 0;

    w = open_ok(&p);
    node = zkt_node(w);
    wlease_backend(w, &be);
    ck_assert_int_eq(zkt_persist(w, util_wall_ms() + 3000, NULL), 0);
    peek = zkt_client(w);
    /* The second handle's close expires the session on the server; the
     * client hears it when the server drops its connection. A busy make
     * test once saw the client still connected 30 s after one try: try
     * again, as an operator would. */
    for (int k = 0; k < 3 && strcmp(zk_state_name(peek), "expired") != 0; k++) {
        expire_session(peek);
        for (int i = 0; i < 100 && strcmp(zk_state_name(peek), "expired") != 0; i++)
            usleep(100000);
    }
    ck_assert_str_eq(zk_state_name(peek), "expired");
    /* the tick makes a new session; the fence writes go on */
    want = util_wall_ms() + 5000;
    /* not confirmed while the session is gone: the fence does not count */
    ck_assert_int_ne(zkt_persist(w, want, NULL), SNOWFLAKE_PERSIST_FAILED);
    for (int i = 0; i < 300 && got != want; i++) {
        ck_assert_int_ne(zkt_tick(w, util_wall_ms()), SNOWFLAKE_TICK_LOST);
        usleep(100000);
        json_t *j = node_json(z, node);
        got = json_integer_value(json_object_get(j, "timestamp"));
        json_decref(j);
    }
    ck_assert_int_eq(got, want);
    be.metrics(be.arg, &b);
    ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_zk_expirations_total 1\n"));
    ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_zk_session_state 2\n"));
    sbuf_free(&b);
    wlease_close(w);
    zk_close(z);
    free(node);
    free(cache);
    free(name);
}
END_TEST

static int
zk_ctl(const char *what)
{
    const char *dir = getenv("LEAFD_TEST_ZK_DIR");
    const char *script = getenv("LEAFD_TEST_ZK_SCRIPT");
    char *cmd;
    int rc;

    cmd = xasprintf("%s %s '%s' >/dev/null", script != NULL ? script :
                    "bash tests/lib/zookeeper.sh", what, dir);
    rc = system(cmd);
    free(cmd);
    return rc;
}

START_TEST(zk_outage)
{
    char *name = fresh_name(), *cache = tmp_path("c.json"), *node;
    struct zkt_params p = zk_params(name, "10.0.0.8", 7700, cache);
    struct wlease *w;
    int64_t worker, worker2, fence, f0;
    int r = SNOWFLAKE_TICK_NONE;

    p.zk_timeout_ms = 2000;
    w = open_ok(&p);
    wlease_get(w, &worker, &fence);
    node = zkt_node(w);
    f0 = util_wall_ms() + 3000;
    ck_assert_int_eq(zkt_persist(w, f0, NULL), SNOWFLAKE_PERSIST_OK);
    wlease_close(w);

    /* ZooKeeper down at start: no worker ID until it is back */
    ck_assert_int_eq(zk_ctl("stop"), 0);
    w = open_ok(&p);
    ck_assert_int_eq(wlease_get(w, &worker2, &fence), -1);
    ck_assert_int_eq(zkt_tick(w, util_wall_ms()), SNOWFLAKE_TICK_NONE);
    /* it comes back: registered, the node's fence is the gate */
    ck_assert_int_eq(zk_ctl("start"), 0);
    for (int i = 0; i < 300 && r != SNOWFLAKE_TICK_ACQUIRED; i++) {
        r = zkt_tick(w, util_wall_ms());
        ck_assert_int_ne(r, SNOWFLAKE_TICK_LOST);
        usleep(100000);
    }
    ck_assert_int_eq(r, SNOWFLAKE_TICK_ACQUIRED);
    ck_assert_int_eq(wlease_get(w, &worker2, &fence), 0);
    ck_assert_int_eq(worker2, worker);
    ck_assert_int_ge(fence, f0);
    ck_assert_str_eq(zkt_source(w), "zookeeper");

    /* an outage while running: a fence in the file only is not confirmed */
    ck_assert_int_eq(zk_ctl("stop"), 0);
    /* once the client has seen it go (polled for, up to 30 s) */
    for (int i = 0; i < 300 && zk_connected(zkt_client(w)); i++)
        usleep(100000);
    ck_assert(!zk_connected(zkt_client(w)));
    ck_assert_int_eq(zkt_persist(w, util_wall_ms() + 3000, NULL),
                     SNOWFLAKE_PERSIST_UNCONFIRMED);
    ck_assert_int_eq(zk_ctl("start"), 0);
    {
        struct zk *z = zk_test_open();
        int64_t want = util_wall_ms() + 3000, got = 0;
        int pr = SNOWFLAKE_PERSIST_UNCONFIRMED;
        for (int i = 0; i < 300 && (pr != SNOWFLAKE_PERSIST_OK || got != want);
             i++) {
            usleep(100000);
            ck_assert_int_ne(zkt_tick(w, util_wall_ms()), SNOWFLAKE_TICK_LOST);
            pr = zkt_persist(w, want, NULL);
            ck_assert_int_ne(pr, SNOWFLAKE_PERSIST_FAILED);
            json_t *j = node_json(z, node);
            got = json_integer_value(json_object_get(j, "timestamp"));
            json_decref(j);
        }
        ck_assert_int_eq(pr, SNOWFLAKE_PERSIST_OK);
        ck_assert_int_eq(got, want);
        zk_close(z);
    }
    wlease_close(w);
    free(node);
    free(cache);
    free(name);
}
END_TEST

static int64_t test_clock(void *arg);

/* ZooKeeper loses its data directory under a live holder: A holds a fence
 * ahead of its clock; ZooKeeper is stopped, its data wiped, started. B
 * (another identity, its clock where A's was: clocks differ) registers and
 * gets A's sequence number, so its gate must be past A's fence: the new
 * forever's creation + unknown_gate_ms. */
START_TEST(zk_data_dir_lost)
{
    char *name = fresh_name(), *ca = tmp_path("a.json"),
         *cb = tmp_path("b.json"), *cmd;
    struct zkt_params pa = zk_params(name, "10.0.0.9", 7800, ca),
                      pb = zk_params(name, "10.0.0.10", 7801, cb);
    struct wlease *a, *b;
    _Atomic int64_t clkb;
    int64_t wa, fa, wb, fb, a_fence, t;

    pa.unknown_gate_ms = pb.unknown_gate_ms = 3000 + 100;
    a = open_ok(&pa);
    wlease_get(a, &wa, &fa);
    t = util_wall_ms();
    a_fence = t + 3000;                 /* one fence step ahead */
    ck_assert_int_eq(zkt_persist(a, a_fence, NULL), SNOWFLAKE_PERSIST_OK);

    ck_assert_int_eq(zk_ctl("stop"), 0);
    cmd = xasprintf("rm -rf '%s'/data/*", getenv("LEAFD_TEST_ZK_DIR"));
    ck_assert_int_eq(system(cmd), 0);
    free(cmd);
    ck_assert_int_eq(zk_ctl("start"), 0);

    atomic_store(&clkb, t);
    pb.clock = test_clock;
    pb.clock_arg = &clkb;
    b = open_ok(&pb);
    ck_assert_int_eq(wlease_get(b, &wb, &fb), 0);
    ck_assert_msg(wb != wa || fb > a_fence, "B got A's worker ID %" PRId64
                  " with fence %" PRId64 ", at or below A's confirmed fence %"
                  PRId64 ": IDs up to it issued twice", wb, fb, a_fence);
    wlease_close(b);
    wlease_close(a);
    free(ca);
    free(cb);
    free(name);
}
END_TEST

/* --- generators on a worker ID, with injected clocks -------------------- */

static int64_t
test_clock(void *arg)
{
    return atomic_load((_Atomic int64_t *)arg);
}

/* The wall clock moved *arg ms ahead: a measurement against the store's
 * clock is then off by at most half its round trip, however long the write
 * (and, at a start, the connection and claim before it) took. */
static int64_t
ahead_clock(void *arg)
{
    return util_wall_ms() + atomic_load((_Atomic int64_t *)arg);
}

/* A generator on w's worker ID, no keeper thread, its clock *clk. It owns
 * w from here on (snowflake_stop closes it). */
static struct snowflake *
sf_on(struct wlease *w, _Atomic int64_t *clk, int64_t fence_step_ms)
{
    struct snowflake_options o;
    char *cause = NULL;
    int64_t worker = -1, fence = 0;
    struct snowflake *sf;

    memset(&o, 0, sizeof o);
    ck_assert_int_eq(sfcodec_layout_init(&o.layout, SFCODEC_LEAF_EPOCH_MS, 41, 0, 10,
                                    12, -1, 0, &cause), 0);
    wlease_get(w, &worker, &fence);
    o.worker_id = worker;
    o.start_fence_ms = fence;
    o.max_backward_ms = 1000;
    o.max_borrow_ms = 10;
    o.fence_step_ms = fence_step_ms;
    o.start_wait_ms = 600000;
    o.count_max = 4096;
    o.clock = test_clock;
    o.clock_arg = clk;
    o.no_thread = 1;
    wlease_backend(w, &o.backend);
    sf = snowflake_create(&o, &cause);
    ck_assert_msg(sf != NULL, "%s", cause);
    return sf;
}

/* The port of the ZooKeeper at zk_addr ("host:port"). */
static int
zk_port(void)
{
    const char *colon = strrchr(zk_addr, ':');

    ck_assert_ptr_nonnull(colon);
    return atoi(colon + 1);
}

/* Item 1 of issue 9: owner A is cut off from ZooKeeper, its clock jumps
 * ahead by more than a fence step; B takes the worker ID over and its clock
 * reaches A's new time. A fence A wrote only to its file must not let A
 * issue there: no ID may come from both. */
START_TEST(zk_partition_takeover_no_duplicates)
{
    char *name = fresh_name(), *ca = tmp_path("a.json"), *cb = tmp_path("b.json");
    struct tcpproxy *px = tcpproxy_start(zk_port(), 0);
    char addr[64];
    struct zkt_params pa, pb;
    struct wlease *wa, *wb;
    struct snowflake *sa, *sb;
    _Atomic int64_t clka, clkb;
    struct idset ia = {0}, ib = {0};
    int64_t worker_a, worker_b, fence, jump;

    snprintf(addr, sizeof addr, "127.0.0.1:%d", px->port);
    pa = zk_params(name, "10.0.1.1", 7901, ca);
    pa.zk_address = addr;
    pa.takeover = 1;
    pa.takeover_age_ms = 1500;
    pa.fence_step_ms = 200;
    pa.heartbeat_ms = 100;
    wa = open_ok(&pa);
    wlease_get(wa, &worker_a, &fence);
    atomic_store(&clka, util_wall_ms());
    sa = sf_on(wa, &clka, pa.fence_step_ms);
    issue_first(sa, &clka, 10, &ia);

    /* the partition, then A's clock steps 5 s ahead */
    atomic_store(&px->cut, 1);
    for (int i = 0; i < 600 && zk_connected(zkt_client(wa)); i++)
        usleep(50000);
    ck_assert(!zk_connected(zkt_client(wa)));
    jump = util_wall_ms() + 5000;
    atomic_store(&clka, jump);
    issue_range(sa, &clka, jump + 50, 100, &ia);

    /* B takes the worker ID over once A's node looks stale */
    usleep(2000 * 1000);
    pb = pa;
    pb.zk_address = zk_addr;
    pb.ip = "10.0.1.2";
    pb.port = 7902;
    pb.cache_path = cb;
    wb = open_ok(&pb);
    wlease_get(wb, &worker_b, &fence);
    ck_assert_str_eq(zkt_source(wb), "takeover");
    ck_assert_int_eq(worker_b, worker_a);
    atomic_store(&clkb, jump);
    sb = sf_on(wb, &clkb, pb.fence_step_ms);
    issue_range(sb, &clkb, jump + 50, 100, &ib);
    ck_assert_int_gt(ib.n, 0);

    ck_assert_msg(idset_common(&ia, &ib) == 0, "%zu IDs issued by both "
                  "owners", idset_common(&ia, &ib));
    /* A refused with its own code past what ZooKeeper holds; on a busy
     * machine, where more than takeover_age_ms / 2 can pass between A's last
     * heartbeat and its first ID past the jump, its lease has expired first
     * (a refusal too, by the first line of defence). */
    ck_assert_msg(strcmp(ia.last_code, "fence_unconfirmed") == 0 ||
                  strcmp(ia.last_code, "worker_lease_expired") == 0,
                  "A refused with %s", ia.last_code);

    snowflake_stop(sa);
    snowflake_stop(sb);
    tcpproxy_stop(px);
    free(ia.v);
    free(ib.v);
    free(ca);
    free(cb);
    free(name);
}
END_TEST

/* A thread that heartbeats w like the keeper does, until *stop. */
struct beater {
    struct wlease *w;
    _Atomic int      stop;
    pthread_t        th;
};

static void *
beat_main(void *arg)
{
    struct beater *b = arg;

    while (!atomic_load(&b->stop)) {
        zkt_tick(b->w, util_wall_ms());
        usleep(20000);
    }
    return NULL;
}

/* Item 2: two live processes with one ip:port never share the worker ID:
 * the second refuses to start while the first heartbeats, and when the
 * first is silent (partitioned) and the second claims it, the first loses
 * it at its next write. */
START_TEST(zk_twin_identity)
{
    char *name = fresh_name(), *c1 = tmp_path("1.json"), *c2 = tmp_path("2.json");
    char *cause = NULL;
    struct zkt_params p1 = zk_params(name, "10.0.2.1", 7950, c1), p2;
    struct wlease *w1, *w2;
    struct beater b;
    int64_t worker1, worker2, fence;

    p1.heartbeat_ms = 100;
    w1 = open_ok(&p1);
    wlease_get(w1, &worker1, &fence);
    ck_assert_int_eq(zkt_persist(w1, util_wall_ms() + 3000, NULL),
                     SNOWFLAKE_PERSIST_OK);
    memset(&b, 0, sizeof b);
    b.w = w1;
    pthread_create(&b.th, NULL, beat_main, &b);
    p2 = p1;
    p2.cache_path = c2;             /* another machine: its own file */
    w2 = zkt_open(&p2, &cause);
    ck_assert_msg(w2 == NULL, "a second live process got worker ID %s",
                  w2 != NULL ? "shared" : "");
    ck_assert_ptr_nonnull(strstr(cause, "in use"));
    free(cause);
    atomic_store(&b.stop, 1);
    pthread_join(b.th, NULL);

    /* the first falls silent: the second claims, the first loses at once */
    w2 = open_ok(&p2);
    wlease_get(w2, &worker2, &fence);
    ck_assert_int_eq(worker2, worker1);
    ck_assert_int_eq(zkt_persist(w1, util_wall_ms() + 3000, NULL),
                     SNOWFLAKE_PERSIST_FAILED);
    ck_assert_int_eq(zkt_tick(w1, util_wall_ms()), SNOWFLAKE_TICK_LOST);
    ck_assert_int_eq(zkt_persist(w2, util_wall_ms() + 3000, NULL),
                     SNOWFLAKE_PERSIST_OK);
    wlease_close(w1);
    wlease_close(w2);
    free(c1);
    free(c2);
    free(name);
}
END_TEST

/* --- a model of Java Leaf ---------------------------------------------------
 * What Meituan's leaf-core (SnowflakeZookeeperHolder, SnowflakeIDGenImpl)
 * does, as read from its source; none of its code.
 *   init: list /snowflake/<name>/forever; a child whose name up to '-' is
 *     ip:port is its own, and the number after '-' is the worker ID. It
 *     reads that node's data with a default Jackson ObjectMapper into
 *     Endpoint {ip, port, timestamp}: an unknown field throws, and so does
 *     a timestamp ahead of its clock; on any exception it falls back to the
 *     worker ID in its local file (workerID.properties) and schedules no
 *     heartbeat. No own child: it creates ip:port- PERSISTENT_SEQUENTIAL
 *     with {ip, port, timestamp: now}. Either way it writes the worker ID
 *     to the local file.
 *   heartbeat: every 3 s (fixed delay), an unversioned setData of
 *     {ip, port, timestamp: its current time}.
 *   IDs: (ts - 1288834974657) << 22 | worker << 12 | sequence, the
 *     sequence starting at a random 0..99 in each new ms. */

struct jleaf {
    struct zk *z;
    char       forever[200];
    char       ip[32];
    int        port;
    int64_t    worker;
    int64_t    file_worker;     /* the local file; -1 none */
    char      *node;
    int        fell_back;
};

static char *
jleaf_data(const struct jleaf *j, int64_t now)
{
    return xasprintf("{\"ip\":\"%s\",\"port\":\"%d\",\"timestamp\":%" PRId64
                     "}", j->ip, j->port, now);
}

/* Java Leaf's init at its clock now. */
static void
jleaf_init(struct jleaf *j, const char *name, int64_t now)
{
    char **names = NULL, me[64], *cause = NULL, *data = NULL, *p;
    int n = 0, len = 0;
    struct Stat st;

    snprintf(j->forever, sizeof j->forever, "/snowflake/%s/forever", name);
    snprintf(me, sizeof me, "%s:%d", j->ip, j->port);
    free(j->node);
    j->node = NULL;
    j->fell_back = 0;
    p = xasprintf("/snowflake/%s", name);
    zk_create(j->z, "/snowflake", "", 0, 0, NULL, 4000, NULL);
    zk_create(j->z, p, "", 0, 0, NULL, 4000, NULL);
    zk_create(j->z, j->forever, "", 0, 0, NULL, 4000, NULL);
    free(p);
    ck_assert_int_eq(zk_children(j->z, j->forever, &names, &n, 4000, &cause),
                     ZOK);
    for (int i = 0; i < n; i++) {
        const char *dash = strchr(names[i], '-');
        if (dash != NULL && (size_t)(dash - names[i]) == strlen(me) &&
            strncmp(names[i], me, strlen(me)) == 0) {
            j->worker = atoll(dash + 1);
            j->node = xasprintf("%s/%s", j->forever, names[i]);
        }
    }
    zk_strings_free(names, n);
    if (j->node != NULL) {
        json_t *root;
        json_error_t err;
        const char *k;
        json_t *v;
        int ok = 1;

        ck_assert_int_eq(zk_get(j->z, j->node, &data, &len, &st, 4000,
                                &cause), ZOK);
        root = json_loadb(data, (size_t)len, 0, &err);
        free(data);
        ok = root != NULL;
        json_object_foreach(root, k, v) {      /* FAIL_ON_UNKNOWN_PROPERTIES */
            if (strcmp(k, "ip") != 0 && strcmp(k, "port") != 0 &&
                strcmp(k, "timestamp") != 0)
                ok = 0;
        }
        if (ok && json_integer_value(json_object_get(root, "timestamp")) >
                  now)
            ok = 0;                            /* CheckLastTimeException */
        json_decref(root);
        if (!ok) {
            ck_assert_int_ge(j->file_worker, 0);
            j->worker = j->file_worker;
            j->fell_back = 1;
            return;
        }
    } else {
        char *path = xasprintf("%s/%s-", j->forever, me);
        data = jleaf_data(j, now);
        ck_assert_int_eq(zk_create(j->z, path, data, (int)strlen(data),
                                   ZOO_PERSISTENT_SEQUENTIAL, &j->node, 4000,
                                   &cause), ZOK);
        free(path);
        free(data);
        j->worker = atoll(strrchr(j->node, '-') + 1);
    }
    j->file_worker = j->worker;
}

static void
jleaf_heartbeat(struct jleaf *j, int64_t now)
{
    char *data;

    if (j->fell_back)
        return;
    data = jleaf_data(j, now);
    ck_assert_int_eq(zk_set(j->z, j->node, data, (int)strlen(data), -1, NULL,
                            4000, NULL), ZOK);
    free(data);
}

/* Every ID Java Leaf can have issued in [t0, t1]: any sequence start. */
static void
jleaf_ids(const struct jleaf *j, int64_t t0, int64_t t1, struct idset *s)
{
    struct sfcodec_layout l;
    char *cause = NULL;

    ck_assert_int_eq(sfcodec_layout_init(&l, SFCODEC_LEAF_EPOCH_MS, 41, 0, 10, 12, -1,
                                    0, &cause), 0);
    for (int64_t t = t0; t <= t1; t++)
        for (uint64_t q = 0; q < 100; q++)
            idset_add(s, sfcodec_pack(&l, t, 0, (uint64_t)j->worker, q));
}

/* Item 12: Java Leaf, its clock 4 s ahead, stops 2.5 s after a heartbeat;
 * leafd starts on the same ip:port. Its first ID must come after every ID
 * Java can have issued. */
START_TEST(zk_java_heartbeat_is_not_a_fence)
{
    char *name = fresh_name(), *cache = tmp_path("c.json");
    struct jleaf j;
    struct zkt_params p = zk_params(name, "10.0.3.1", 8001, cache);
    struct wlease *w;
    struct snowflake *sf;
    _Atomic int64_t clk;
    struct idset js = {0}, ls = {0};
    int64_t java = util_wall_ms() + 4000, hb, worker, fence;

    memset(&j, 0, sizeof j);
    j.z = zk_test_open();
    snprintf(j.ip, sizeof j.ip, "10.0.3.1");
    j.port = 8001;
    j.file_worker = -1;
    free(java_leaf_node(j.z, name, "10.9.9.9", 1, java));  /* worker 0 */
    jleaf_init(&j, name, java);
    ck_assert_int_eq(j.worker, 1);
    hb = java + 3000;
    jleaf_heartbeat(&j, hb);
    jleaf_ids(&j, java, hb + 2500, &js);      /* stops 2.5 s later */

    p.fence_step_ms = 3000;
    w = open_ok(&p);
    wlease_get(w, &worker, &fence);
    ck_assert_int_eq(worker, j.worker);
    atomic_store(&clk, hb - 100);             /* leafd's clock is behind */
    sf = sf_on(w, &clk, p.fence_step_ms);
    issue_range(sf, &clk, hb + 6000, 1, &ls);
    ck_assert_int_gt(ls.n, 0);
    ck_assert_msg(idset_common(&js, &ls) == 0, "%zu of leafd's IDs repeat "
                  "Java Leaf's", idset_common(&js, &ls));
    snowflake_stop(sf);
    zk_close(j.z);
    free(j.node);
    free(js.v);
    free(ls.v);
    free(cache);
    free(name);
}
END_TEST

/* Item 13: a stale node Java Leaf made is not taken over: Java finds it by
 * name and, coming back on its ip:port, uses its worker ID again. */
START_TEST(zk_java_node_not_taken_over)
{
    char *name = fresh_name(), *cache = tmp_path("c.json");
    struct jleaf j;
    struct zkt_params p = zk_params(name, "10.0.4.2", 8002, cache);
    struct wlease *w;
    struct snowflake *sf;
    _Atomic int64_t clk;
    struct idset js = {0}, ls = {0};
    int64_t t = util_wall_ms(), worker, fence;

    memset(&j, 0, sizeof j);
    j.z = zk_test_open();
    snprintf(j.ip, sizeof j.ip, "10.0.4.1");
    j.port = 8001;
    j.file_worker = -1;
    jleaf_init(&j, name, t - 3600000);        /* long stopped */
    ck_assert_int_eq(j.worker, 0);

    p.takeover = 1;
    p.takeover_age_ms = 1500;
    w = open_ok(&p);
    wlease_get(w, &worker, &fence);
    atomic_store(&clk, t + 1000);
    sf = sf_on(w, &clk, p.fence_step_ms);

    jleaf_init(&j, name, t + 1000);           /* Java Leaf comes back */
    jleaf_ids(&j, t + 1000, t + 1020, &js);
    /* leafd's first IDs wait for its lease's first fence write (its own
     * thread): on a busy machine it may land after a 20 ms window. */
    issue_first(sf, &clk, 100, &ls);
    issue_range(sf, &clk, t + 1020, 100, &ls);
    ck_assert_msg(idset_common(&js, &ls) == 0, "%zu IDs from both (leafd "
                  "worker %" PRId64 ", Java worker %" PRId64 ")",
                  idset_common(&js, &ls), worker, j.worker);
    ck_assert_str_ne(zkt_source(w), "takeover");
    snowflake_stop(sf);
    zk_close(j.z);
    free(j.node);
    free(js.v);
    free(ls.v);
    free(cache);
    free(name);
}
END_TEST

/* The clock against ZooKeeper's (the mtime of the node just written): a
 * node 10 s ahead refuses to start, saying by how much; one that steps 10 s
 * ahead while running gets clock_offset with the offset. */
START_TEST(zk_clock_offset)
{
    char *name = fresh_name(), *ca = tmp_path("a.json"), *at;
    struct zkt_params p = zk_params(name, "10.0.3.1", 7801, ca);
    struct wlease *w;
    struct snowflake *sf;
    struct snowflake_refusal why;
    _Atomic int64_t clk, ahead;
    char *cause = NULL;
    long long off = 0, rtt = 0;
    uint64_t id;
    struct sbuf b = {0};
    json_t *j;
    json_error_t err;

    /* The lease's clock 10 s ahead, moving on: the offset found is 10 s,
     * within half the write's round trip (+ 1 s). */
    atomic_store(&ahead, 10000);
    p.clock = ahead_clock;
    p.clock_arg = &ahead;
    p.max_clock_offset_ms = 2000;
    ck_assert_ptr_null(zkt_open(&p, &cause));
    at = strstr(cause, "clock is ");
    ck_assert_msg(at != NULL, "%s", cause);
    ck_assert_int_eq(sscanf(at, "clock is %lld ms off zookeeper's (round trip "
                            "%lld ms", &off, &rtt), 2);
    ck_assert_msg(llabs(off - 10000) <= rtt / 2 + 1000, "%s", cause);
    free(cause);

    atomic_store(&ahead, 0);
    atomic_store(&clk, util_wall_ms());
    w = open_ok(&p);
    sf = sf_on(w, &clk, 200);
    atomic_store(&ahead, 10000);
    for (int i = 0; i < 30; i++) {
        atomic_store(&clk, util_wall_ms() + 10000);
        snowflake_keeper_step(sf);
        usleep(20000);
    }
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "clock_offset");
    ck_assert_int_eq(sscanf(why.message, "this node's clock is %lld", &off),
                     1);
    snowflake_state_json(sf, &b);
    j = json_loads(b.p, 0, &err);
    ck_assert_msg(j != NULL, "%s", b.p);
    rtt = json_integer_value(json_object_get(j, "clock_rtt_ms"));
    ck_assert_msg(llabs(off - 10000) <= rtt / 2 + 1000, "%s (round trip "
                  "%lld ms)", why.message, rtt);
    json_decref(j);
    sbuf_free(&b);
    snowflake_stop(sf);
    free(ca);
    free(name);
}
END_TEST


/* release_on_stop: a clean stop marks the node released with its fence
 * (still Leaf's Endpoint for its fields); another identity claims it at
 * once when its clock is past that fence, and not before. */
START_TEST(zk_release_on_stop)
{
    char *name = fresh_name(), *ca = tmp_path("a.json"), *cb = tmp_path("b.json");
    char *cause = NULL, *node, *nodeb;
    struct zkt_params pa = zk_params(name, "10.0.6.1", 7001, ca), pb;
    struct zk *z = zk_test_open();
    struct wlease *la, *lb;
    struct snowflake *sa;
    _Atomic int64_t clka, clkb;
    struct idset ia = {0};
    int64_t worker, fence, released_fence;
    json_t *j;

    pa.max_worker = 0;              /* one worker ID: B gets it or none */
    pa.release_on_stop = 1;
    la = open_ok(&pa);
    node = zkt_node(la);
    atomic_store(&clka, util_wall_ms() + 3000);     /* A runs ahead */
    sa = sf_on(la, &clka, 200);
    issue_first(sa, &clka, 10, &ia);
    snowflake_stop(sa);

    j = node_json(z, node);
    ck_assert(json_is_true(json_object_get(j, "released")));
    ck_assert_str_eq(json_string_value(json_object_get(j, "ip")), "10.0.6.1");
    ck_assert_str_eq(json_string_value(json_object_get(j, "port")), "7001");
    ck_assert(json_is_integer(json_object_get(j, "timestamp")));
    released_fence = json_integer_value(json_object_get(j, "timestamp"));
    ck_assert_int_ge(released_fence, (int64_t)(ia.v[ia.n - 1] >> 22) +
                                     SFCODEC_LEAF_EPOCH_MS);
    json_decref(j);

    /* B's clock is behind the released fence: not claimable yet, and the
     * layout has no other ID */
    pb = pa;
    pb.ip = "10.0.6.2";
    pb.cache_path = cb;
    pb.release_on_stop = 0;
    pb.clock = test_clock;
    pb.clock_arg = &clkb;
    atomic_store(&clkb, released_fence - 1000);
    ck_assert_ptr_null(zkt_open(&pb, &cause));
    ck_assert_msg(strstr(cause, "no free worker ID") != NULL, "%s", cause);
    free(cause);
    cause = NULL;
    /* past it: claimed at once (no takeover, no lease to wait out) */
    atomic_store(&clkb, released_fence + 10);
    lb = open_ok(&pb);
    ck_assert_int_eq(wlease_get(lb, &worker, &fence), 0);
    ck_assert_int_eq(worker, 0);
    ck_assert_int_eq(fence, released_fence);
    ck_assert_str_eq(zkt_source(lb), "zookeeper");
    nodeb = zkt_node(lb);
    ck_assert_str_eq(nodeb, node);
    j = node_json(z, node);
    ck_assert_ptr_null(json_object_get(j, "released"));
    ck_assert_str_eq(json_string_value(json_object_get(j, "ip")), "10.0.6.2");
    json_decref(j);
    /* B holds it: A's identity, restarting, does not get it back */
    pa.release_on_stop = 0;
    ck_assert_ptr_null(zkt_open(&pa, &cause));
    ck_assert_msg(strstr(cause, "no free worker ID") != NULL, "%s", cause);
    free(cause);
    wlease_close(lb);
    free(nodeb);
    free(node);
    free(ia.v);
    free(ca);
    free(cb);
    free(name);
    zk_close(z);
}
END_TEST

/* A node marked released that leafd did not fence (no nonce: Java Leaf
 * never writes "released", so its data is not leafd's) is never claimed by
 * another identity. */
START_TEST(zk_released_without_nonce_not_claimed)
{
    char *name = fresh_name(), *cache = tmp_path("c.json"), *cause = NULL;
    char *node, *data;
    struct zk *z = zk_test_open();
    struct zkt_params p = zk_params(name, "10.0.6.3", 7003, cache);
    int64_t ts = util_wall_ms() - 3600000;

    node = java_leaf_node(z, name, "10.0.6.4", 7004, ts);
    data = xasprintf("{\"ip\":\"10.0.6.4\",\"port\":\"7004\",\"timestamp\":%"
                     PRId64 ",\"released\":true}", ts);
    ck_assert_int_eq(zk_set(z, node, data, (int)strlen(data), -1, NULL, 4000,
                            NULL), ZOK);
    free(data);
    p.max_worker = 0;
    ck_assert_ptr_null(zkt_open(&p, &cause));
    ck_assert_msg(strstr(cause, "no free worker ID") != NULL, "%s", cause);
    free(cause);
    free(node);
    free(cache);
    free(name);
    zk_close(z);
}
END_TEST

/* Through the config: /snowflake/state shows the source, the fence the
 * node holds and the lease (with takeover: takeover_age_ms; without: none),
 * /metrics the heartbeat age by source; a clean stop with
 * snowflake.release_on_stop releases the node for the next identity. */
START_TEST(zk_state_and_release_via_config)
{
    char *name = fresh_name(), *cache = tmp_path("c.json");
    char *cache2 = tmp_path("c2.json"), *cause = NULL;
    struct config cfg;
    struct snowflake *sf;
    struct snowflake_refusal why;
    struct sbuf b = {0};
    uint64_t ids[10];
    json_t *j, *n;
    json_error_t err;
    struct zk *z = zk_test_open();
    char node[300];
    int64_t worker, before, after, fence, t0;

    base_config(&cfg, cache);
    cfg.leaf_name = name;
    cfg.zk_address = (char *)zk_addr;
    cfg.worker_source = WORKER_ZOOKEEPER;
    cfg.sf_ip = "10.0.7.1";
    cfg.heartbeat_ms = 200;
    cfg.takeover = 1;
    cfg.takeover_age_ms = 20000;
    cfg.release_on_stop = 1;
    sf = sfconfig_start(&cfg, 7610, NULL, NULL, &cause);
    ck_assert_msg(sf != NULL, "%s", cause);
    ck_assert_int_eq(first_ids(sf, ids, &why), SNOWFLAKE_OK);
    usleep(500000);
    snowflake_state_json(sf, &b);
    j = json_loads(b.p, 0, &err);
    ck_assert_msg(j != NULL, "%s", b.p);
    snprintf(node, sizeof node, "%s",
             json_string_value(json_object_get(j, "zk_node")));
    json_decref(j);
    sbuf_free(&b);
    /* the fence the node holds, read before and after the state: the
     * keeper may write a new one in between. Read again until the last
     * heartbeat is under 5 s old and the lease (the node's mtime, ZooKeeper's
     * clock, at that write + 20 s) ends over 15 s after t0: a busy machine
     * can hold the keeper, or ZooKeeper, up for seconds. */
    for (int i = 0;; i++) {
        int64_t age, expires;

        n = node_json(z, node);
        before = json_integer_value(json_object_get(n, "timestamp"));
        json_decref(n);
        t0 = util_wall_ms();
        snowflake_state_json(sf, &b);
        j = json_loads(b.p, 0, &err);
        ck_assert_msg(j != NULL, "%s", b.p);
        n = node_json(z, node);
        after = json_integer_value(json_object_get(n, "timestamp"));
        json_decref(n);
        ck_assert(json_is_integer(json_object_get(j, "heartbeat_age_ms")));
        age = json_integer_value(json_object_get(j, "heartbeat_age_ms"));
        expires = json_integer_value(json_object_get(j, "lease_expires_ms"));
        if (age < 5000 && expires > t0 + 20000 - 5000)
            break;
        ck_assert_msg(i < 300, "no heartbeat under 5 s old with the lease "
                      "past t0 %" PRId64 " + 15 s for 30 s: %s", t0, b.p);
        json_decref(j);
        sbuf_free(&b);
        usleep(100000);
    }
    fence = json_integer_value(json_object_get(j, "store_fence_ms"));
    ck_assert_msg(fence == before || fence == after, "store_fence_ms %"
                  PRId64 ", the node %" PRId64 " / %" PRId64, fence, before,
                  after);
    ck_assert_str_eq(json_string_value(json_object_get(j, "source")),
                     "zookeeper");
    ck_assert_str_eq(json_string_value(json_object_get(j, "store")),
                     "zookeeper");
    ck_assert_str_eq(json_string_value(json_object_get(j, "identity")),
                     "10.0.7.1:7610");
    ck_assert(json_is_true(json_object_get(j, "takeover")));
    ck_assert_int_eq(json_integer_value(json_object_get(j, "lease_ms")),
                     20000);
    ck_assert_int_le(json_integer_value(json_object_get(j, "lease_expires_ms")),
                     util_wall_ms() + 20000 + 5000);
    json_decref(j);
    sbuf_free(&b);
    wait_metrics(sf, "leafd_snowflake_heartbeat_age_seconds"
                     "{source=\"zookeeper\"} 0.");
    snowflake_metrics(sf, &b);
    ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_store_writes_total"
                                      "{source=\"zookeeper\",result=\"ok\"}"));
    ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_zk_session_state 2\n"));
    sbuf_free(&b);
    worker = (int64_t)((ids[0] >> 12) & 1023);
    snowflake_stop(sf);
    n = node_json(z, node);
    ck_assert(json_is_true(json_object_get(n, "released")));
    json_decref(n);

    /* another identity, past the fence: the same worker ID at once */
    usleep(20000);
    cfg.sf_ip = "10.0.7.2";
    cfg.cache_file = cache2;
    cfg.takeover = 0;
    cfg.release_on_stop = 0;
    sf = sfconfig_start(&cfg, 7610, NULL, NULL, &cause);
    ck_assert_msg(sf != NULL, "%s", cause);
    snowflake_state_json(sf, &b);
    j = json_loads(b.p, 0, &err);
    ck_assert_msg(j != NULL, "%s", b.p);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "worker_id")),
                     worker);
    ck_assert_str_eq(json_string_value(json_object_get(j, "zk_node")), node);
    /* without takeover there is no lease */
    ck_assert(json_is_null(json_object_get(j, "lease_ms")));
    ck_assert(json_is_null(json_object_get(j, "lease_expires_ms")));
    ck_assert(json_is_false(json_object_get(j, "takeover")));
    json_decref(j);
    sbuf_free(&b);
    snowflake_stop(sf);
    zk_close(z);
    free(cache);
    free(cache2);
    free(name);
}
END_TEST

/* Under CI=1 (or true) a missing ZooKeeper is a failure, not a skip. */
static int ci_missing;

static int
in_ci(void)
{
    const char *ci = getenv("CI");
    return ci != NULL && (strcmp(ci, "1") == 0 || strcmp(ci, "true") == 0);
}

static Suite *
workerid_suite(void)
{
    Suite *s = suite_create("workerid");
    TCase *tc = tcase_create("cache");

    tcase_add_checked_fixture(tc, setup_tmp, teardown_tmp);
    tcase_add_test(tc, cache_roundtrip);
    tcase_add_test(tc, cache_atomic_write);
    tcase_add_test(tc, cache_corrupt);
    tcase_add_test(tc, static_source);
    tcase_add_test(tc, start_static_and_restart);
    tcase_add_test(tc, layout_change_checked);
    suite_add_tcase(s, tc);

    zk_addr = getenv("LEAFD_TEST_ZK");
    if (zk_addr == NULL || *zk_addr == '\0') {
        printf("check_workerid: LEAFD_TEST_ZK not set: %s the ZooKeeper "
               "tests (tests/lib/zookeeper.sh start DIR)\n",
               in_ci() ? "CI=1, so FAILING: cannot run" : "skipping");
        ci_missing |= in_ci();
        return s;
    }
    tc = tcase_create("zookeeper");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup_tmp, teardown_tmp);
    tcase_add_test(tc, zk_three_registrations);
    tcase_add_test(tc, zk_reuse_same_endpoint);
    tcase_add_test(tc, zk_java_leaf_node);
    tcase_add_test(tc, zk_takeover_race);
    tcase_add_test(tc, zk_taken_over_is_lost);
    tcase_add_test(tc, zk_went_back_in_time);
    tcase_add_test(tc, zk_exhausted);
    tcase_add_test(tc, zk_range_advances_counter);
    tcase_add_test(tc, zk_range_refusals);
    tcase_add_test(tc, zk_range_advance_lock);
    tcase_add_test(tc, zk_down_at_start_no_cache);
    tcase_add_test(tc, zk_snowflake_start);
    tcase_add_test(tc, zk_session_expiry);
    tcase_add_test(tc, zk_partition_takeover_no_duplicates);
    tcase_add_test(tc, zk_twin_identity);
    tcase_add_test(tc, zk_java_heartbeat_is_not_a_fence);
    tcase_add_test(tc, zk_java_node_not_taken_over);
    tcase_add_test(tc, zk_clock_offset);
    tcase_add_test(tc, zk_release_on_stop);
    tcase_add_test(tc, zk_released_without_nonce_not_claimed);
    tcase_add_test(tc, zk_state_and_release_via_config);
    if (getenv("LEAFD_TEST_ZK_DIR") != NULL) {
        tcase_add_test(tc, zk_outage);
        tcase_add_test(tc, zk_data_dir_lost);
    } else {
        printf("check_workerid: LEAFD_TEST_ZK_DIR not set: %s the "
               "ZooKeeper outage test\n",
               in_ci() ? "CI=1, so FAILING: cannot run" : "skipping");
        ci_missing |= in_ci();
    }
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(workerid_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 && !ci_missing ? 0 : 1;
}
