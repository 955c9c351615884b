/* workerid.c: snowflake worker IDs from the config or ZooKeeper (Leaf's
 * scheme), the fence writes, heartbeat and takeover (see workerid.h).
 *
 * Registration (ZooKeeper reachable):
 *   1. ensure /snowflake/<name>/forever exists;
 *   2. read every child; ours is the one whose data names our ip:port (a node
 *      whose name has our ip:port but whose data names another node was
 *      taken over and is not ours any more);
 *   3. none of ours and takeover on: claim the oldest-numbered stale node
 *      (timestamp older than takeover_age_ms) that carries a leafd nonce;
 *   4. else create a PERSISTENT_SEQUENTIAL node; a sequence number past the
 *      layout's highest worker ID stops the start (the node is removed).
 * Claiming (2 and 3) is a versioned write of our nonce and the gate: a
 * racing claimer gets ZBADVERSION, and whoever wrote the node before loses
 * it at its next write. A node of ours last written by another leafd
 * instance (not the one in our cache file) is watched for two heartbeats
 * first; if it keeps changing, a twin with our identity is alive and the
 * start fails.
 *
 * DESIGN: which timestamp is a fence.
 *   - Every leafd write puts its instance nonce ("leafd") in the node data,
 *     and leafd only issues IDs up to a fence the node holds (rule 1 below),
 *     so a node with a nonce holds a fence: the gate is its timestamp.
 *   - A node without one was written last by Java Leaf (or a leafd before
 *     the nonce): its timestamp is its writer's clock at a heartbeat, and the
 *     writer may have issued IDs up to one heartbeat interval past it. The
 *     gate is timestamp + WID_FOREIGN_HEARTBEAT_MS (Java Leaf's 3 s) +
 *     WID_FOREIGN_MARGIN_MS, on the own-node path; such a node is never
 *     taken over (Java Leaf finds its node by name and can come back).
 *   - Rule 1: another process can always inherit the worker ID (takeover,
 *     or the same ip:port on another machine with no cache file), and it
 *     gates on the node. So a fence counts (workerid_persist returns
 *     SNOWFLAKE_PERSIST_OK) only once the node's versioned write has
 *     succeeded; a fence in the cache file alone is
 *     SNOWFLAKE_PERSIST_UNCONFIRMED and the
 *     generator issues nothing past the last confirmed one. For the same
 *     reason the cache file's worker ID is not used while ZooKeeper is down
 *     at start. The static source (no ZooKeeper) keeps the file fence.
 *
 * Clock: every successful node write compares the node's mtime
 * (ZooKeeper's clock) with the middle of the round trip; past
 * max_clock_offset_ms (less half the round trip) the start fails and, while
 * running, tick says SNOWFLAKE_TICK_CLOCK_BAD until it is back within.
 *
 * Lease (takeover on only): a node may be taken over once its timestamp is
 * takeover_age_ms old, so an owner whose writes have not reached ZooKeeper
 * for half of that stops issuing (SNOWFLAKE_TICK_LEASE_EXPIRED) until one
 * lands.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "workerid.h"
#include "workerid_cache.h"
#include "zk.h"

enum { WID_NONE, WID_STATIC, WID_ZOOKEEPER, WID_TAKEOVER, WID_K8S };
enum { WID_HELD_OK, WID_HELD_LEASE, WID_HELD_CLOCK };

static const char *wid_source_names[] = {
    "none", "static", "zookeeper", "takeover", "k8s",
};

struct workerid {
    struct workerid_params p;            /* strings below are our own copies */
    char            *leaf_name;
    char            *zk_address;
    char            *cache_path;
    char            *ip;
    char            *forever;       /* /snowflake/<name>/forever */
    int              op_timeout_ms; /* one ZooKeeper call, registration */
    int              write_timeout_ms; /* one fence write */
    struct zk       *zk;

    _Atomic int64_t  worker;        /* -1 unknown */
    _Atomic int      source;        /* WID_* */
    int64_t          start_fence;
    char            *node;          /* guarded by mu (readers elsewhere) */
    int              version;       /* node data version, -1 unknown */
    int              verified;      /* registration confirmed this run */
    int              lost;
    int              held;          /* WID_HELD_*: what the generator was
                                       last told */
    _Atomic int64_t  offset_ms;     /* node mtime - our clock, RTT-corrected */
    _Atomic int64_t  rtt_ms;
    _Atomic int      measured;
    int64_t          last_fence;    /* last fence persisted */
    int64_t          last_zk_write_mono;
    int64_t          last_hb_mono;  /* last successful node write */
    _Atomic int64_t  last_hb_wall;  /* same, wall ms, 0 never */
    int64_t          last_try_mono; /* background registration */
    int64_t          last_log_mono;
    _Atomic uint64_t hb_ok;
    _Atomic uint64_t hb_fail;
    char             nonce[17];     /* this process, in every node write */
    char            *prev_nonce;    /* the cache file's: our last run's */
    char            *last_error;    /* guarded by mu */
    pthread_mutex_t  mu;            /* guards node and last_error */
};

struct wid_reg {
    char    *node;
    int64_t  worker;
    int      version;
    int64_t  node_ts;       /* the gate: no ID at or below it */
    int      took_over;
};

/* A node leafd did not fence (no "leafd" nonce: Java Leaf's heartbeat, or
 * an older leafd) holds its writer's clock, not a fence: the writer may have
 * issued up to one heartbeat interval past it. */
#define WID_FOREIGN_HEARTBEAT_MS 3000   /* Java Leaf's scheduleWithFixedDelay */
#define WID_FOREIGN_MARGIN_MS    2000

/* --- small helpers -------------------------------------------------------- */

static void
wid_set_error(struct workerid *w, const char *msg)
{
    pthread_mutex_lock(&w->mu);
    free(w->last_error);
    w->last_error = msg != NULL ? xstrdup(msg) : NULL;
    pthread_mutex_unlock(&w->mu);
}

static int64_t
wid_now(struct workerid *w)
{
    return w->p.clock != NULL ? w->p.clock(w->p.clock_arg) : util_wall_ms();
}

/* The last measured offset from ZooKeeper's clock is over the limit (0: no
 * limit), less half the round trip (the measurement's own uncertainty). */
static int
wid_clock_bad(struct workerid *w)
{
    int64_t off = atomic_load(&w->offset_ms);

    if (w->p.max_clock_offset_ms <= 0 || !atomic_load(&w->measured))
        return 0;
    if (off < 0)
        off = -off;
    return off - atomic_load(&w->rtt_ms) / 2 > w->p.max_clock_offset_ms;
}

/* Log at most every 10 s for repeated trouble. */
static int
wid_log_due(struct workerid *w)
{
    int64_t m = util_mono_ms();

    if (w->last_log_mono != 0 && m - w->last_log_mono < 10000)
        return 0;
    w->last_log_mono = m;
    return 1;
}

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

/* {"ip":"..","port":"..","timestamp":ms,"leafd":"<nonce>"}: Leaf's Endpoint
 * plus the writer's instance nonce, which marks the timestamp as a fence
 * held in ZooKeeper (see the DESIGN rule in the file header). */
static char *
wid_node_data(const struct workerid *w, int64_t ts, int *len)
{
    struct sbuf b = {0};
    char port[24];

    snprintf(port, sizeof port, "%d", w->p.port);
    sbuf_puts(&b, "{\"ip\":");
    sbuf_json_str(&b, w->ip);
    sbuf_puts(&b, ",\"port\":");
    sbuf_json_str(&b, port);
    sbuf_printf(&b, ",\"timestamp\":%" PRId64 ",\"leafd\":", ts);
    sbuf_json_str(&b, w->nonce);
    sbuf_puts(&b, "}");
    *len = (int)b.len;
    return b.p;
}

/* Parse a node's data. Port may be a string (Leaf) or a number. *nonce
 * (may be NULL) gets the "leafd" nonce, NULL when there is none. */
static int
wid_parse_node(const char *data, int len, char **ip, int64_t *port,
               int64_t *ts, char **nonce)
{
    json_error_t err;
    json_t *root, *v;
    int rc = -1;

    *ip = NULL;
    if (nonce != NULL)
        *nonce = NULL;
    root = json_loadb(data, (size_t)len, 0, &err);
    if (root == NULL || !json_is_object(root))
        goto out;
    v = json_object_get(root, "ip");
    if (!json_is_string(v))
        goto out;
    *ip = xstrdup(json_string_value(v));
    v = json_object_get(root, "port");
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (util_parse_i64(s, strlen(s), 0, port) == -1)
            goto out;
    } else if (json_is_integer(v)) {
        *port = json_integer_value(v);
    } else {
        goto out;
    }
    v = json_object_get(root, "timestamp");
    if (!json_is_integer(v))
        goto out;
    *ts = json_integer_value(v);
    v = json_object_get(root, "leafd");
    if (nonce != NULL && json_is_string(v) && *json_string_value(v) != '\0')
        *nonce = xstrdup(json_string_value(v));
    rc = 0;
out:
    if (rc == -1) {
        free(*ip);
        *ip = NULL;
    }
    json_decref(root);
    return rc;
}

/* "<ip>:<port>-<seq>": the sequence number, or -1. */
static int64_t
wid_name_seq(const char *name, size_t *prefix_len)
{
    const char *dash = strrchr(name, '-');
    int64_t seq;

    if (dash == NULL || dash == name ||
        util_parse_i64(dash + 1, strlen(dash + 1), 0, &seq) == -1)
        return -1;
    if (prefix_len != NULL)
        *prefix_len = (size_t)(dash - name);
    return seq;
}

/* --- ZooKeeper registration --------------------------------------------- */

static int
wid_ensure_path(struct workerid *w, const char *path, char **cause)
{
    int rc = zk_create(w->zk, path, "", 0, 0, NULL, w->op_timeout_ms, cause);

    if (rc == ZNODEEXISTS) {
        free(*cause);
        *cause = NULL;
        return ZOK;
    }
    return rc;
}

struct wid_child {
    char    *name;
    char    *path;
    int64_t  seq;
    int      version;
    int      parsed;
    char    *ip;
    int64_t  port;
    int64_t  ts;
    char    *nonce;         /* "leafd" in the data: a leafd fence */
    int      mine;
};

static int
wid_child_cmp(const void *a, const void *b)
{
    const struct wid_child *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void
wid_children_free(struct wid_child *c, int n)
{
    for (int i = 0; i < n; i++) {
        free(c[i].name);
        free(c[i].path);
        free(c[i].ip);
        free(c[i].nonce);
    }
    free(c);
}

/* Read forever's children and their data. ZOK or a ZooKeeper error. */
static int
wid_read_children(struct workerid *w, struct wid_child **out, int *nout,
                  char **cause)
{
    char **names = NULL, myname[300];
    struct wid_child *c;
    int n = 0, rc, k = 0;

    rc = zk_children(w->zk, w->forever, &names, &n, w->op_timeout_ms, cause);
    if (rc != ZOK)
        return rc;
    snprintf(myname, sizeof myname, "%s:%d", w->ip, w->p.port);
    c = xcalloc((size_t)(n > 0 ? n : 1), sizeof *c);
    for (int i = 0; i < n; i++) {
        struct Stat st;
        char *data = NULL;
        int len = 0;
        size_t plen = 0;
        int64_t seq = wid_name_seq(names[i], &plen);

        if (seq < 0) {
            log_warn("ignoring %s/%s: not <ip>:<port>-<sequence>", w->forever,
                     names[i]);
            continue;
        }
        c[k].name = xstrdup(names[i]);
        c[k].path = xasprintf("%s/%s", w->forever, names[i]);
        c[k].seq = seq;
        rc = zk_get(w->zk, c[k].path, &data, &len, &st, w->op_timeout_ms,
                    cause);
        if (rc == ZNONODE) {        /* removed meanwhile */
            free(*cause);
            *cause = NULL;
            free(c[k].name);
            free(c[k].path);
            c[k].name = c[k].path = NULL;
            continue;
        }
        if (rc != ZOK) {
            wid_children_free(c, k + 1);
            zk_strings_free(names, n);
            return rc;
        }
        c[k].version = st.version;
        c[k].parsed = wid_parse_node(data, len, &c[k].ip, &c[k].port,
                                     &c[k].ts, &c[k].nonce) == 0;
        free(data);
        if (c[k].parsed)
            c[k].mine = strcmp(c[k].ip, w->ip) == 0 &&
                        c[k].port == w->p.port;
        else
            c[k].mine = plen == strlen(myname) &&
                        strncmp(names[i], myname, plen) == 0;
        if (!c[k].parsed)
            log_warn("%s: data is not Leaf's {\"ip\",\"port\",\"timestamp\"}",
                     c[k].path);
        k++;
    }
    zk_strings_free(names, n);
    qsort(c, (size_t)k, sizeof *c, wid_child_cmp);
    *out = c;
    *nout = k;
    return ZOK;
}

/* The timestamp no ID of this worker may carry at or below: a leafd fence
 * as it is; anything else is a heartbeat (see WID_FOREIGN_*). */
static int64_t
wid_gate(const struct wid_child *c)
{
    if (!c->parsed)
        return 0;
    if (c->nonce == NULL)
        return c->ts + WID_FOREIGN_HEARTBEAT_MS + WID_FOREIGN_MARGIN_MS;
    return c->ts;
}

/* Does the node at path still carry (version, nonce) after about two
 * heartbeats? 1 it changed (a live writer), 0 it did not, -1 ZooKeeper
 * trouble. */
static int
wid_node_changes(struct workerid *w, const char *path, int version,
                 char **cause)
{
    struct Stat st;
    char *data = NULL;
    int len = 0, rc;

    usleep((useconds_t)(2 * w->p.heartbeat_ms + 200) * 1000);
    rc = zk_get(w->zk, path, &data, &len, &st, w->op_timeout_ms, cause);
    free(data);
    if (rc == ZNONODE)
        return 1;
    if (rc != ZOK)
        return -1;
    return st.version != version;
}

/* Make c ours: a versioned write of our nonce and the gate as the fence, so
 * that whoever wrote it before loses it at its next write (ZBADVERSION with
 * a nonce not its own) and never issued past the gate. A node another leafd
 * instance wrote, which is not our own last run (the cache file's nonce), is
 * watched for two heartbeats first: a live twin with our identity makes
 * this start fail instead. 0 ours, 1 lost a race (takeover: try another),
 * -1 try later, -2 refused for good. */
static int
wid_claim(struct workerid *w, const struct wid_child *c, int takeover,
          struct wid_reg *r, char **cause)
{
    struct Stat st;
    char *data;
    int len, rc;
    int64_t now = util_wall_ms(), gate = wid_gate(c);

    if (!takeover && c->nonce != NULL &&
        (w->prev_nonce == NULL || strcmp(c->nonce, w->prev_nonce) != 0)) {
        log_info("%s was last written by another leafd instance (%s); "
                 "checking that it is not running", c->path, c->nonce);
        rc = wid_node_changes(w, c->path, c->version, cause);
        if (rc == -1)
            return -1;
        if (rc == 1) {
            *cause = xasprintf("snowflake identity %s:%d is in use: another "
                               "live leafd (instance %s) keeps writing %s; "
                               "give each process its own snowflake.ip / "
                               "port", w->ip, w->p.port, c->nonce, c->path);
            return -2;
        }
    }
    data = wid_node_data(w, gate > now ? gate : now, &len);
    rc = zk_set(w->zk, c->path, data, len, c->version, &st, w->op_timeout_ms,
                cause);
    free(data);
    if (rc == ZBADVERSION || rc == ZNONODE) {
        log_info("claim of %s lost to another writer (%s)", c->path,
                 zerror(rc));
        if (takeover) {
            free(*cause);
            *cause = NULL;
            return 1;
        }
        return -1;
    }
    if (rc != ZOK)
        return -1;
    if (takeover)
        log_warn("took over worker ID %" PRId64 " (%s, last fence %" PRId64
                 ", %" PRId64 " ms ago, from %s:%" PRId64 ")", c->seq,
                 c->path, c->ts, now - c->ts, c->ip, c->port);
    if (gate > now)
        log_warn("%s: %s %" PRId64 " is %" PRId64 " ms ahead of the clock; "
                 "no IDs until the clock passes it", c->path,
                 c->nonce != NULL ? "fence" : "heartbeat + interval", gate,
                 gate - now);
    assert(gate >= c->ts);              /* never below what the node held */
    r->node = xstrdup(c->path);
    r->worker = c->seq;
    r->version = st.version;
    r->node_ts = gate;
    r->took_over = takeover;
    return 0;
}

/* 0 registered; -1 ZooKeeper trouble (try later); -2 refused for good.
 * prefer: of several nodes of ours, the one with this sequence. */
static int
wid_register(struct workerid *w, int64_t prefer, struct wid_reg *r,
             char **cause)
{
    struct wid_child *c = NULL;
    char *path, *data, *created = NULL;
    int n = 0, rc, len, pick = -1;
    int64_t now = util_wall_ms(), seq;

    memset(r, 0, sizeof *r);
    path = xasprintf("/snowflake/%s", w->leaf_name);
    if (wid_ensure_path(w, "/snowflake", cause) != ZOK ||
        wid_ensure_path(w, path, cause) != ZOK ||
        wid_ensure_path(w, w->forever, cause) != ZOK) {
        free(path);
        return -1;
    }
    free(path);
    if (wid_read_children(w, &c, &n, cause) != ZOK)
        return -1;

    /* 2. our own node */
    for (int i = 0; i < n; i++) {
        if (!c[i].mine)
            continue;
        if (pick == -1 || c[i].seq == prefer)
            pick = i;
    }
    if (pick != -1) {
        int mine = 0;
        for (int i = 0; i < n; i++)
            mine += c[i].mine;
        if (mine > 1)
            log_warn("%d nodes under %s name %s:%d; using %s", mine,
                     w->forever, w->ip, w->p.port, c[pick].name);
        if ((uint64_t)c[pick].seq > w->p.max_worker) {
            *cause = xasprintf("this node's registration %s has sequence %"
                               PRId64 ", beyond the layout's highest worker "
                               "ID %" PRIu64, c[pick].path, c[pick].seq,
                               w->p.max_worker);
            wid_children_free(c, n);
            return -2;
        }
        rc = wid_claim(w, &c[pick], 0, r, cause);
        wid_children_free(c, n);
        return rc;
    }

    /* 3. takeover of a stale node that only leafd can claim */
    if (w->p.takeover) {
        for (int i = 0; i < n; i++) {
            if (!c[i].parsed || (uint64_t)c[i].seq > w->p.max_worker ||
                c[i].ts >= now - w->p.takeover_age_ms)
                continue;
            if (c[i].nonce == NULL) {
                if (wid_log_due(w))
                    log_info("not taking over %s: leafd did not write it "
                             "last (Java Leaf claims a node by its name, "
                             "so it could come back and use it)", c[i].path);
                continue;
            }
            rc = wid_claim(w, &c[i], 1, r, cause);
            if (rc == 1)            /* lost the race: try the next */
                continue;
            wid_children_free(c, n);
            return rc;
        }
    }
    wid_children_free(c, n);

    /* 4. a new node */
    path = xasprintf("%s/%s:%d-", w->forever, w->ip, w->p.port);
    data = wid_node_data(w, now, &len);
    rc = zk_create(w->zk, path, data, len, ZOO_PERSISTENT_SEQUENTIAL,
                   &created, w->op_timeout_ms, cause);
    free(data);
    free(path);
    if (rc != ZOK)
        return -1;
    seq = wid_name_seq(created, NULL);
    if (seq < 0 || (uint64_t)seq > w->p.max_worker) {
        char *dcause = NULL;
        if (zk_delete(w->zk, created, -1, w->op_timeout_ms, &dcause) != ZOK) {
            log_warn("%s", dcause);
            free(dcause);
        }
        *cause = xasprintf("no free worker ID: ZooKeeper gave %s, but the "
                           "layout's highest worker ID is %" PRIu64 "; remove "
                           "stale nodes under %s, use more worker bits, or "
                           "set snowflake.takeover=true", created,
                           w->p.max_worker, w->forever);
        free(created);
        return -2;
    }
    log_info("registered %s: worker ID %" PRId64, created, seq);
    r->node = created;
    r->worker = seq;
    r->version = 0;
    r->node_ts = now;
    return 0;
}

/* Write ts into our node. 0 done, -1 failed (transient), -2 lost. */
static int
wid_write_node(struct workerid *w, int64_t ts, char **cause)
{
    struct Stat st;
    char *data, *node;
    int len, rc, tries = 0;
    int64_t t0, t1;

    pthread_mutex_lock(&w->mu);
    node = xstrdup(w->node);
    pthread_mutex_unlock(&w->mu);
    data = wid_node_data(w, ts, &len);
    w->last_zk_write_mono = util_mono_ms();
again:
    t0 = wid_now(w);
    rc = zk_set(w->zk, node, data, len, w->version, &st, w->write_timeout_ms,
                cause);
    t1 = wid_now(w);
    if (rc == ZBADVERSION && tries++ == 0) {
        /* our own earlier write may have landed after we gave up on it */
        char *cur = NULL, *ip = NULL, *nonce = NULL;
        int clen = 0;
        int64_t port = 0, nts = 0;
        free(*cause);
        *cause = NULL;
        rc = zk_get(w->zk, node, &cur, &clen, &st, w->write_timeout_ms, cause);
        if (rc == ZOK) {
            /* ours only with our nonce: a twin with the same ip:port
             * writes the same ip and port, never the same nonce */
            int ours = wid_parse_node(cur, clen, &ip, &port, &nts,
                                      &nonce) == 0 &&
                       nonce != NULL && strcmp(nonce, w->nonce) == 0;
            free(cur);
            free(ip);
            free(nonce);
            if (ours) {
                w->version = st.version;
                goto again;
            }
            *cause = xasprintf("%s now belongs to another process (taken "
                               "over, or a second process with this "
                               "ip:port)", node);
            rc = ZBADVERSION;
        }
    }
    free(data);
    if (rc == ZOK) {
        /* the node's mtime is ZooKeeper's clock at the write, between t0
         * and t1: compare with the middle */
        atomic_store(&w->offset_ms, st.mtime - (t0 + (t1 - t0) / 2));
        atomic_store(&w->rtt_ms, t1 - t0);
        atomic_store(&w->measured, 1);
        w->version = st.version;
        w->last_hb_mono = util_mono_ms();
        atomic_store(&w->last_hb_wall, util_wall_ms());
        atomic_fetch_add(&w->hb_ok, 1);
        free(node);
        return 0;
    }
    atomic_fetch_add(&w->hb_fail, 1);
    if (rc == ZBADVERSION || rc == ZNONODE) {
        if (rc == ZNONODE) {
            free(*cause);
            *cause = xasprintf("%s was removed from ZooKeeper", node);
        }
        free(node);
        return -2;
    }
    free(node);
    return -1;
}

static void
wid_mark_lost(struct workerid *w, const char *why)
{
    if (w->lost)
        return;
    w->lost = 1;
    log_error("worker ID %" PRId64 " lost: %s", atomic_load(&w->worker), why);
    wid_set_error(w, why);
}

/* --- opening ------------------------------------------------------------ */

/* 16 hex digits from getrandom (the clock and pid when it fails). */
static void
wid_make_nonce(char *buf, size_t size)
{
    uint64_t v;

    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
        v = ((uint64_t)util_wall_ms() << 20) ^ (uint64_t)util_mono_us() ^
            ((uint64_t)getpid() << 40);
    snprintf(buf, size, "%016" PRIx64, v);
}

static struct workerid *
wid_new(const struct workerid_params *p)
{
    struct workerid *w = xcalloc(1, sizeof *w);
    int64_t t;

    w->p = *p;
    w->leaf_name = xstrdup(p->leaf_name != NULL ? p->leaf_name : "");
    w->zk_address = xstrdup(p->zk_address != NULL ? p->zk_address : "");
    w->cache_path = xstrdup(p->cache_path);
    w->ip = xstrdup(p->ip != NULL ? p->ip : "");
    w->p.leaf_name = w->leaf_name;
    w->p.zk_address = w->zk_address;
    w->p.cache_path = w->cache_path;
    w->p.ip = w->ip;
    w->forever = xasprintf("/snowflake/%s/forever", w->leaf_name);
    t = p->zk_timeout_ms / 2;
    w->op_timeout_ms = (int)(t < 500 ? 500 : t > 5000 ? 5000 : t);
    t = p->fence_step_ms / 4;
    w->write_timeout_ms = (int)(t < 100 ? 100 : t > 1000 ? 1000 : t);
    if (w->write_timeout_ms > w->op_timeout_ms)
        w->write_timeout_ms = w->op_timeout_ms;
    w->version = -1;
    wid_make_nonce(w->nonce, sizeof w->nonce);
    atomic_store(&w->worker, -1);
    pthread_mutex_init(&w->mu, NULL);
    return w;
}

struct workerid *
workerid_open_params(const struct workerid_params *p, char **cause)
{
    struct workerid *w;
    struct workerid_cache c;
    int crc, usable;

    if (p->cache_path == NULL || *p->cache_path == '\0') {
        *cause = xstrdup("snowflake: no cache file path");
        return NULL;
    }
    w = wid_new(p);
    crc = workerid_cache_read(p->cache_path, &c, cause);
    if (crc == -1)
        goto error;
    if (crc == 0)
        log_info("snowflake cache file %s: worker ID %" PRId64 ", fence %"
                 PRId64, p->cache_path, c.worker_id, c.fence_ms);

    if (!p->use_zk) {
        if (p->worker_id < 0 || (uint64_t)p->worker_id > p->max_worker) {
            *cause = xasprintf("snowflake.worker_id %" PRId64 " is outside "
                               "0..%" PRIu64, p->worker_id, p->max_worker);
            goto error;
        }
        if (crc == 0 && c.worker_id >= 0 && c.worker_id != p->worker_id)
            log_info("the cache file was written for worker ID %" PRId64
                     "; its fence still applies", c.worker_id);
        atomic_store(&w->worker, p->worker_id);
        atomic_store(&w->source, p->k8s ? WID_K8S : WID_STATIC);
        w->start_fence = crc == 0 ? c.fence_ms : 0;
        workerid_cache_free(&c);
        return w;
    }

    if (*w->leaf_name == '\0' || strchr(w->leaf_name, '/') != NULL) {
        *cause = xasprintf("leaf.name \"%s\" cannot name a ZooKeeper node",
                           w->leaf_name);
        goto error;
    }
    if (*w->zk_address == '\0') {
        *cause = xstrdup("snowflake.worker_source is zookeeper but "
                         "leaf.snowflake.zk.address is empty");
        goto error;
    }
    usable = crc == 0 && c.worker_id >= 0 &&
             (uint64_t)c.worker_id <= p->max_worker &&
             strcmp(c.leaf_name, w->leaf_name) == 0 &&
             strcmp(c.ip, w->ip) == 0 && c.port == p->port &&
             *c.zk_node != '\0';
    w->start_fence = crc == 0 ? c.fence_ms : 0;
    if (crc == 0 && *c.nonce != '\0')
        w->prev_nonce = xstrdup(c.nonce);

    w->zk = zk_open(w->zk_address, (int)p->zk_timeout_ms, cause);
    if (w->zk == NULL)
        goto error;
    if (zk_wait_connected(w->zk, (int)p->zk_timeout_ms)) {
        struct wid_reg r;
        int rc = wid_register(w, usable ? c.worker_id : -1, &r, cause);
        if (rc == -2)
            goto error;
        if (rc == 0) {
            atomic_store(&w->worker, r.worker);
            atomic_store(&w->source, r.took_over ? WID_TAKEOVER :
                                                   WID_ZOOKEEPER);
            w->node = r.node;
            w->version = r.version;
            w->verified = 1;
            w->last_hb_mono = util_mono_ms();
            if (r.node_ts > w->start_fence)
                w->start_fence = r.node_ts;
            if (crc == 0 && c.worker_id >= 0 && c.worker_id != r.worker)
                log_warn("the cache file had worker ID %" PRId64 ", "
                         "ZooKeeper gives %" PRId64, c.worker_id, r.worker);
            /* the clock against ZooKeeper's: the mtime of a write of the
             * gate (already in the node or above it) */
            if (p->max_clock_offset_ms > 0 &&
                wid_write_node(w, w->start_fence, cause) == 0 &&
                wid_clock_bad(w)) {
                *cause = xasprintf("this node's clock is %" PRId64 " ms off "
                                   "ZooKeeper's (round trip %" PRId64 " ms; "
                                   "snowflake.max_clock_offset_ms %" PRId64
                                   "): not starting",
                                   -atomic_load(&w->offset_ms),
                                   atomic_load(&w->rtt_ms),
                                   p->max_clock_offset_ms);
                goto error;
            }
            free(*cause);
            *cause = NULL;
            workerid_cache_free(&c);
            return w;
        }
        log_warn("snowflake: ZooKeeper registration failed: %s", *cause);
        wid_set_error(w, *cause);
        free(*cause);
        *cause = NULL;
    } else {
        log_warn("snowflake: ZooKeeper %s not reachable in %" PRId64 " ms",
                 w->zk_address, p->zk_timeout_ms);
    }

    /* Not the cache file's worker ID: without ZooKeeper no fence can be
     * confirmed, so it could issue nothing (rule 1); registered later. */
    w->last_try_mono = util_mono_ms();
    workerid_cache_free(&c);
    return w;

error:
    workerid_cache_free(&c);
    workerid_close(w);
    return NULL;
}

void
workerid_close(struct workerid *w)
{
    if (w == NULL)
        return;
    zk_close(w->zk);
    free(w->leaf_name);
    free(w->zk_address);
    free(w->cache_path);
    free(w->ip);
    free(w->forever);
    free(w->node);
    free(w->last_error);
    free(w->prev_nonce);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

int
workerid_get(struct workerid *w, int64_t *worker, int64_t *fence_ms)
{
    *worker = atomic_load(&w->worker);
    *fence_ms = w->start_fence;
    return *worker >= 0 ? 0 : -1;
}

const char *
workerid_source(struct workerid *w)
{
    return wid_source_names[atomic_load(&w->source)];
}

struct zk *
workerid_zk(struct workerid *w)
{
    return w->zk;
}

char *
workerid_node(struct workerid *w)
{
    char *n;

    pthread_mutex_lock(&w->mu);
    n = w->node != NULL ? xstrdup(w->node) : NULL;
    pthread_mutex_unlock(&w->mu);
    return n;
}

/* --- keeper side ---------------------------------------------------------- */

int
workerid_persist(struct workerid *w, int64_t fence_ms, char **cause)
{
    struct workerid_cache c;
    int64_t worker = atomic_load(&w->worker);
    char *zcause = NULL;
    int rc;

    memset(&c, 0, sizeof c);
    c.leaf_name = w->leaf_name;
    c.source = (char *)workerid_source(w);
    c.ip = w->ip;
    c.port = w->p.port;
    c.worker_id = worker;
    c.datacenter_id = w->p.datacenter_id;
    c.fence_ms = fence_ms;
    c.nonce = w->nonce;
    pthread_mutex_lock(&w->mu);
    c.zk_node = w->node != NULL ? xstrdup(w->node) : NULL;
    pthread_mutex_unlock(&w->mu);
    rc = workerid_cache_write(w->cache_path, &c, cause);
    free(c.zk_node);
    if (rc == -1)
        return -1;
    w->last_fence = fence_ms;

    if (!w->p.use_zk)
        return SNOWFLAKE_PERSIST_OK;
    /* Rule 1: another process can inherit this worker ID (takeover, or the
     * same ip:port elsewhere), and it gates on the node: only a fence the
     * node holds counts. */
    if (w->lost) {
        if (cause != NULL)
            *cause = xstrdup("worker ID lost");
        return SNOWFLAKE_PERSIST_FAILED;
    }
    if (!w->verified || !zk_connected(w->zk)) {
        if (cause != NULL)
            *cause = xasprintf("ZooKeeper %s not connected: fence %" PRId64
                               " is in the cache file only",
                               w->zk_address, fence_ms);
        return SNOWFLAKE_PERSIST_UNCONFIRMED;
    }
    rc = wid_write_node(w, fence_ms, &zcause);
    if (rc == -2) {
        /* Someone else owns the worker ID now: this fence must not count. */
        wid_mark_lost(w, zcause);
        if (cause != NULL)
            *cause = xasprintf("worker ID lost: %s", zcause ? zcause : "?");
        free(zcause);
        return SNOWFLAKE_PERSIST_FAILED;
    } else if (rc == -1) {
        if (wid_log_due(w))
            log_warn("fence %" PRId64 " not confirmed by ZooKeeper: %s",
                     fence_ms, zcause);
        wid_set_error(w, zcause);
        if (cause != NULL)
            *cause = xasprintf("fence %" PRId64 " not confirmed by "
                               "ZooKeeper: %s", fence_ms,
                               zcause != NULL ? zcause : "?");
        free(zcause);
        return SNOWFLAKE_PERSIST_UNCONFIRMED;
    }
    free(zcause);
    assert(w->verified && !w->lost);    /* rule 1: the node holds it */
    return SNOWFLAKE_PERSIST_OK;
}

int
workerid_tick(struct workerid *w, int64_t now_ms)
{
    int64_t m = util_mono_ms();
    char *cause = NULL;
    int rc;

    (void)now_ms;
    if (!w->p.use_zk)
        return SNOWFLAKE_TICK_NONE;
    zk_maintain(w->zk);
    if (w->lost)
        return SNOWFLAKE_TICK_LOST;

    if (atomic_load(&w->worker) < 0) {
        struct wid_reg r;
        if (!zk_connected(w->zk) || m - w->last_try_mono < 1000)
            return SNOWFLAKE_TICK_NONE;
        w->last_try_mono = m;
        rc = wid_register(w, -1, &r, &cause);
        if (rc != 0) {
            if (wid_log_due(w) || rc == -2)
                log_error("snowflake: ZooKeeper registration failed: %s",
                          cause);
            wid_set_error(w, cause);
            free(cause);
            return SNOWFLAKE_TICK_NONE;
        }
        pthread_mutex_lock(&w->mu);
        w->node = r.node;
        pthread_mutex_unlock(&w->mu);
        w->version = r.version;
        w->verified = 1;
        w->last_hb_mono = m;
        if (r.node_ts > w->start_fence)
            w->start_fence = r.node_ts;
        atomic_store(&w->source, r.took_over ? WID_TAKEOVER : WID_ZOOKEEPER);
        atomic_store(&w->worker, r.worker);
        wid_set_error(w, NULL);
        return SNOWFLAKE_TICK_ACQUIRED;
    }

    if (zk_connected(w->zk) && w->last_fence > 0 &&
        m - w->last_zk_write_mono >= w->p.heartbeat_ms) {
        rc = wid_write_node(w, w->last_fence, &cause);
        if (rc == -2) {
            wid_mark_lost(w, cause);
            free(cause);
            return SNOWFLAKE_TICK_LOST;
        }
        if (rc == -1) {
            if (wid_log_due(w))
                log_warn("snowflake heartbeat: %s", cause);
            wid_set_error(w, cause);
        } else {
            wid_set_error(w, NULL);
        }
        free(cause);
        cause = NULL;
    }

    {
        int expired = w->p.takeover &&
                      m - w->last_hb_mono > w->p.takeover_age_ms / 2;
        int want = expired ? WID_HELD_LEASE : wid_clock_bad(w) ?
                   WID_HELD_CLOCK : WID_HELD_OK;
        if (want == w->held)
            return SNOWFLAKE_TICK_NONE;
        if (want == WID_HELD_CLOCK || w->held == WID_HELD_CLOCK)
            log_warn("snowflake: clock offset from ZooKeeper %" PRId64
                     " ms (round trip %" PRId64 " ms, limit %" PRId64
                     " ms)%s", -atomic_load(&w->offset_ms),
                     atomic_load(&w->rtt_ms), w->p.max_clock_offset_ms,
                     want == WID_HELD_CLOCK ? ": refusing" : ": within again");
        w->held = want;
        return want == WID_HELD_LEASE ? SNOWFLAKE_TICK_LEASE_EXPIRED :
               want == WID_HELD_CLOCK ? SNOWFLAKE_TICK_CLOCK_BAD :
                                        SNOWFLAKE_TICK_LEASE_OK;
    }
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

static int
wid_zk_state_num(struct workerid *w)
{
    const char *s;

    if (w->zk == NULL)
        return 0;
    s = zk_state_name(w->zk);
    return strcmp(s, "connected") == 0 ? 2 : strcmp(s, "expired") == 0 ? 3 : 1;
}

static void
wid_be_state_json(void *arg, struct sbuf *out)
{
    struct workerid *w = arg;
    int64_t hb = atomic_load(&w->last_hb_wall);

    sbuf_puts(out, ",\"ip\":");
    sbuf_json_str(out, w->ip);
    sbuf_printf(out, ",\"port\":%d,\"cache_file\":", w->p.port);
    sbuf_json_str(out, w->cache_path);
    if (!w->p.use_zk) {
        sbuf_puts(out, ",\"zk_node\":null,\"zk_state\":\"none\"");
        return;
    }
    pthread_mutex_lock(&w->mu);
    sbuf_puts(out, ",\"zk_node\":");
    if (w->node != NULL)
        sbuf_json_str(out, w->node);
    else
        sbuf_puts(out, "null");
    sbuf_puts(out, ",\"last_error\":");
    if (w->last_error != NULL)
        sbuf_json_str(out, w->last_error);
    else
        sbuf_puts(out, "null");
    pthread_mutex_unlock(&w->mu);
    sbuf_puts(out, ",\"zk_address\":");
    sbuf_json_str(out, w->zk_address);
    sbuf_printf(out, ",\"zk_state\":\"%s\",\"heartbeat_age_ms\":",
                zk_state_name(w->zk));
    if (hb > 0)
        sbuf_printf(out, "%" PRId64, util_wall_ms() - hb);
    else
        sbuf_puts(out, "null");
    sbuf_printf(out, ",\"takeover\":%s", w->p.takeover ? "true" : "false");
    sbuf_puts(out, ",\"clock_offset_ms\":");
    if (atomic_load(&w->measured))
        sbuf_printf(out, "%" PRId64, -atomic_load(&w->offset_ms));
    else
        sbuf_puts(out, "null");
}

static void
wid_be_metrics(void *arg, struct sbuf *out)
{
    struct workerid *w = arg;
    int64_t hb = atomic_load(&w->last_hb_wall);

    sbuf_puts(out, "# HELP leafd_snowflake_zk_session_state ZooKeeper "
                   "session: 0 not used, 1 connecting, 2 connected, 3 "
                   "expired.\n"
                   "# TYPE leafd_snowflake_zk_session_state gauge\n");
    sbuf_printf(out, "leafd_snowflake_zk_session_state %d\n",
                wid_zk_state_num(w));
    if (!w->p.use_zk)
        return;
    sbuf_puts(out, "# HELP leafd_snowflake_heartbeat_age_seconds Time since "
                   "the last write reached the ZooKeeper node (-1 never).\n"
                   "# TYPE leafd_snowflake_heartbeat_age_seconds gauge\n");
    if (hb > 0)
        sbuf_printf(out, "leafd_snowflake_heartbeat_age_seconds %.3f\n",
                    (double)(util_wall_ms() - hb) / 1000.0);
    else
        sbuf_puts(out, "leafd_snowflake_heartbeat_age_seconds -1\n");
    if (atomic_load(&w->measured)) {
        sbuf_puts(out, "# HELP leafd_snowflake_clock_offset_ms This node's "
                       "clock minus the worker ID store's, round-trip "
                       "corrected (at the last heartbeat).\n"
                       "# TYPE leafd_snowflake_clock_offset_ms gauge\n");
        sbuf_printf(out, "leafd_snowflake_clock_offset_ms{source="
                    "\"zookeeper\"} %" PRId64 "\n",
                    -atomic_load(&w->offset_ms));
    }
    sbuf_puts(out, "# HELP leafd_snowflake_zk_writes_total Writes of the "
                   "ZooKeeper node, by result.\n"
                   "# TYPE leafd_snowflake_zk_writes_total counter\n");
    sbuf_printf(out, "leafd_snowflake_zk_writes_total{result=\"ok\"} %"
                PRIu64 "\n", atomic_load(&w->hb_ok));
    sbuf_printf(out, "leafd_snowflake_zk_writes_total{result=\"error\"} %"
                PRIu64 "\n", atomic_load(&w->hb_fail));
    sbuf_puts(out, "# HELP leafd_snowflake_zk_connects_total ZooKeeper "
                   "(re)connections.\n"
                   "# TYPE leafd_snowflake_zk_connects_total counter\n");
    sbuf_printf(out, "leafd_snowflake_zk_connects_total %" PRIu64 "\n",
                zk_connects(w->zk));
    sbuf_puts(out, "# HELP leafd_snowflake_zk_expirations_total ZooKeeper "
                   "sessions that expired.\n"
                   "# TYPE leafd_snowflake_zk_expirations_total counter\n");
    sbuf_printf(out, "leafd_snowflake_zk_expirations_total %" PRIu64 "\n",
                zk_expirations(w->zk));
}

static int
wid_be_clock_offset(void *arg, int64_t *offset_ms)
{
    struct workerid *w = arg;

    *offset_ms = -atomic_load(&w->offset_ms);
    return atomic_load(&w->measured) ? 0 : -1;
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
    b->clock_offset = wid_be_clock_offset;
    b->close = wid_be_close;
    b->arg = w;
}
