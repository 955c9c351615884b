/* workerid_zk.c: the ZooKeeper store of worker IDs (see workerid_zk.h):
 * Leaf's nodes, claimed and fenced with versioned writes.
 *
 * DESIGN: which timestamp is a fence, and who may claim a node.
 *   - Every leafd write puts its instance nonce ("leafd") in the node data,
 *     and the lease (workerid_lease.c) issues IDs only up to a fence the
 *     node holds, so a node with a nonce holds a fence: the gate for the
 *     next holder is its timestamp.
 *   - A node without one was written last by Java Leaf (or a leafd before
 *     the nonce): its timestamp is its writer's clock at a heartbeat, and the
 *     writer may have issued IDs up to one heartbeat interval past it. The
 *     gate is timestamp + WID_FOREIGN_HEARTBEAT_MS (Java Leaf's 3 s) +
 *     WID_FOREIGN_MARGIN_MS, on the own-node path only; such a node is never
 *     claimed by another identity (Java Leaf finds its node by name and can
 *     come back), released or not (Java Leaf never writes "released").
 *   - Another identity claims a leafd node only when it was released and
 *     its fence is below the claimer's clock, or, with snowflake.takeover
 *     and a lease, when its fence is older than the lease on the claimer's
 *     clock. The claim is a versioned write of the version read: of two
 *     racing claimers exactly one succeeds (ZBADVERSION for the other).
 *   - A fence write is a versioned write of the version this process last
 *     wrote. ZBADVERSION with our nonce in the node is our own earlier
 *     write that landed late (we retry once); with any other data, or
 *     ZNONODE, the ID is lost (WLEASE_LOST). So a holder never counts a
 *     fence once another process has written the node.
 *   - A claim writes the gate, or the claimer's clock if later; no later
 *     write of the holder puts a lower timestamp in the node (a fence
 *     below it is written as that value), so a freshly claimed node never
 *     looks stale to a taker, and the node's fence is never below one the
 *     holder counted.
 *   - A node of this identity last written by another leafd instance (not
 *     the cache file's nonce) and not released is watched for two
 *     heartbeats first; if it changes, a twin with our identity is alive
 *     and the claim is refused for good.
 *   - A new node gates on forever's ctime + unknown_gate_ms: a ZooKeeper
 *     that lost its data directory creates forever again after the last
 *     write of any node it lost, and gives their sequence numbers (worker
 *     IDs) out again. A ZooKeeper restored from an older snapshot keeps an
 *     old forever, so this does not cover it; the next rule does.
 *   - Going back in time (issue 20's rule): /snowflake/<name>/leafd_since
 *     notes "<epoch> <since>", since the store time ZooKeeper last went
 *     back as far as leafd can tell (0 never). Every claim first writes
 *     /snowflake/<name>/leafd_clock, whose zxid's high 32 bits are the
 *     ensemble's epoch and whose mtime is the store's clock; a note of
 *     another epoch (every election raises it: a leader lost, a restart,
 *     a restore, which always restarts the ensemble) sets since to that
 *     mtime (a versioned write of the note: of two claimers one notes it,
 *     the other reads it). No note yet (a new store, or one from before
 *     this rule) is noted with since 0: a restore to before the first
 *     note is not seen. A standalone server keeps epoch 0 across
 *     restarts: only its holders' writes see a restore there. A holder
 *     whose write finds its own node at a version below the one it wrote
 *     last, or gone, sets since too. Since is when a claim noticed, not
 *     when the election was: later, which only costs waiting. A node last
 *     written (mtime) before since gates on since +
 *     unknown_gate_ms (every fence its holder counted was written before
 *     since), and another identity takes it, released or stale, only a
 *     lease (without takeover: a session timeout) after since, when a live
 *     holder has written it again or stopped issuing. A new node gates on
 *     since + unknown_gate_ms too: its sequence may be one the restore
 *     gave out again.
 * The store's clock is the node's mtime, read from every fence write's
 * Stat.
 */
#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "workerid_zk.h"
#include "workerid_zk_node.h"
#include "zk.h"

/* A node leafd did not fence (no "leafd" nonce: Java Leaf's heartbeat, or
 * an older leafd) holds its writer's clock, not a fence: the writer may have
 * issued up to one heartbeat interval past it. */
#define WID_FOREIGN_HEARTBEAT_MS 3000   /* Java Leaf's scheduleWithFixedDelay */
#define WID_FOREIGN_MARGIN_MS    2000

struct wzk {
    struct workerid_zk_params p;    /* strings below are our own copies */
    char            *address;
    char            *leaf_name;
    char            *ip;
    char            *forever;       /* /snowflake/<name>/forever */
    char            *lock;          /* /snowflake/<name>/advance: held
                                       (ephemeral) while wz_advance probes
                                       and until the node is created */
    int              locked;
    char            *since_path;    /* /snowflake/<name>/leafd_since */
    char            *clock_path;    /* /snowflake/<name>/leafd_clock */
    int              op_timeout_ms; /* one call of a claim */
    int              write_timeout_ms; /* one fence write */
    struct zk       *zk;
    int              waited;        /* the first claim waited to connect */

    char            *node;          /* guarded by mu (readers elsewhere) */
    int64_t          worker;        /* the node's sequence, -1 none */
    int              version;       /* what our last write left, -1 none */
    int64_t          floor_ts;      /* what the claim wrote: no write of
                                       ours puts less in the node */
    char             nonce[17];     /* the claimer's: in every write */
    _Atomic int      took_over;
    _Atomic uint64_t writes_ok;
    _Atomic uint64_t writes_fail;
    int64_t          last_log_mono;
    struct wlease_rec rec;          /* serial_zones: the claimed node's,
                                       to write */
    pthread_mutex_t  mu;            /* guards node */
};

/* A child of forever, read. */
struct wz_child {
    char    *name;
    char    *path;
    int64_t  seq;
    int      version;
    int      parsed;
    char    *ip;
    int64_t  port;
    int64_t  ts;
    int64_t  mtime;         /* the store's clock at its last write */
    int64_t  back_gate;     /* written before since: since + the new-node
                               gate; else 0 */
    char    *nonce;         /* "leafd" in the data: a leafd fence */
    char    *zones;         /* "serial_zones", or NULL */
    int      released;
    int      mine;
};

enum { WZ_OWN, WZ_RELEASED, WZ_TAKEOVER };

/* The ip of wz_advance's probe nodes: no address, so no identity's. */
#define WZ_PROBE_IP "leafd.advance"

static int
wz_log_due(struct wzk *z)
{
    int64_t m = util_mono_ms();

    if (z->last_log_mono != 0 && m - z->last_log_mono < 10000)
        return 0;
    z->last_log_mono = m;
    return 1;
}

/* Our node data: Leaf's Endpoint plus our nonce, which marks the timestamp
 * as a fence held in ZooKeeper (workerid_zk_node.h). */
static char *
wz_node_data(const struct wzk *z, int64_t ts, int released, int *len)
{
    /* the record: set_record's, else the one the claim found */
    return wzk_node_format_zones(z->ip, z->p.port, ts, z->nonce, released,
                                 wlease_rec_write(&z->rec), len);
}

/* "<ip>:<port>-<seq>": the sequence number, or -1. */
static int64_t
wz_name_seq(const char *name, size_t *prefix_len)
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

static int
wz_ensure_path(struct wzk *z, const char *path, char **cause)
{
    int rc = zk_create(z->zk, path, "", 0, 0, NULL, z->op_timeout_ms, cause);

    if (rc == ZNODEEXISTS) {
        free(*cause);
        *cause = NULL;
        return ZOK;
    }
    return rc;
}

static int
wz_child_cmp(const void *a, const void *b)
{
    const struct wz_child *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void
wz_children_free(struct wz_child *c, int n)
{
    for (int i = 0; i < n; i++) {
        free(c[i].name);
        free(c[i].path);
        free(c[i].ip);
        free(c[i].nonce);
        free(c[i].zones);
    }
    free(c);
}

/* Read forever's children and their data, by sequence. ZOK or a ZooKeeper
 * error. */
static int
wz_read_children(struct wzk *z, struct wz_child **out, int *nout,
                 char **cause)
{
    char **names = NULL, myname[300];
    struct wz_child *c;
    int n = 0, rc, k = 0;

    rc = zk_children(z->zk, z->forever, &names, &n, z->op_timeout_ms, cause);
    if (rc != ZOK)
        return rc;
    snprintf(myname, sizeof myname, "%s:%d", z->ip, z->p.port);
    c = xcalloc((size_t)(n > 0 ? n : 1), sizeof *c);
    for (int i = 0; i < n; i++) {
        struct Stat st;
        struct wzk_node nd;
        char *data = NULL;
        int len = 0;
        size_t plen = 0;
        int64_t seq = wz_name_seq(names[i], &plen);

        if (seq < 0) {
            log_warn("ignoring %s/%s: not <ip>:<port>-<sequence>", z->forever,
                     names[i]);
            continue;
        }
        c[k].name = xstrdup(names[i]);
        c[k].path = xasprintf("%s/%s", z->forever, names[i]);
        c[k].seq = seq;
        rc = zk_get(z->zk, c[k].path, &data, &len, &st, z->op_timeout_ms,
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
            wz_children_free(c, k + 1);
            zk_strings_free(names, n);
            return rc;
        }
        c[k].version = st.version;
        c[k].mtime = st.mtime;
        c[k].parsed = wzk_node_parse(data, (size_t)len, &nd) == 0;
        free(data);
        if (c[k].parsed) {      /* the strings move into the child */
            c[k].ip = nd.ip;
            c[k].port = nd.port;
            c[k].ts = nd.ts;
            c[k].nonce = nd.nonce;
            c[k].zones = nd.zones;
            c[k].released = nd.released;
        }
        if (c[k].parsed)
            c[k].mine = strcmp(c[k].ip, z->ip) == 0 &&
                        c[k].port == z->p.port;
        else
            c[k].mine = plen == strlen(myname) &&
                        strncmp(names[i], myname, plen) == 0;
        if (!c[k].parsed)
            log_warn("%s: data is not Leaf's {\"ip\",\"port\",\"timestamp\"}",
                     c[k].path);
        k++;
    }
    zk_strings_free(names, n);
    qsort(c, (size_t)k, sizeof *c, wz_child_cmp);
    *out = c;
    *nout = k;
    return ZOK;
}

/* The timestamp no ID of this worker may carry at or below: a leafd fence
 * as it is; anything else is a heartbeat (see WID_FOREIGN_*). */
static int64_t
wz_gate(const struct wz_child *c)
{
    int64_t g = 0;

    if (c->parsed)
        g = c->nonce == NULL ? c->ts + WID_FOREIGN_HEARTBEAT_MS +
                               WID_FOREIGN_MARGIN_MS : c->ts;
    return g > c->back_gate ? g : c->back_gate;
}

/* ZooKeeper's epoch (the zxid's high 32 bits) and clock now: an
 * unconditional write of /snowflake/<name>/leafd_clock. ZOK or the error. */
static int
wz_stamp(struct wzk *z, int64_t *epoch, int64_t *store_now, char **cause)
{
    struct Stat st;
    int rc = zk_set(z->zk, z->clock_path, "", 0, -1, &st, z->op_timeout_ms,
                    cause);

    if (rc == ZNONODE) {
        free(*cause);
        *cause = NULL;
        rc = zk_create(z->zk, z->clock_path, "", 0, 0, NULL,
                       z->op_timeout_ms, cause);
        if (rc != ZOK && rc != ZNODEEXISTS)
            return rc;
        free(*cause);
        *cause = NULL;
        rc = zk_set(z->zk, z->clock_path, "", 0, -1, &st, z->op_timeout_ms,
                    cause);
    }
    if (rc == ZOK) {
        *epoch = st.mzxid >> 32;
        *store_now = st.mtime;
    }
    return rc;
}

/* The going-back note (see the DESIGN): *since, the store time ZooKeeper
 * last went back as far as leafd can tell (0: never), and *store_now,
 * ZooKeeper's clock now. back: we saw it go back (since is now). No note
 * yet (a store before this rule, or a new one) is written with since 0.
 * ZOK or the error with *cause. */
static int
wz_since(struct wzk *z, int back, int64_t *since, int64_t *store_now,
         char **cause)
{
    for (int tries = 0; tries < 5; tries++) {
        struct Stat st;
        char *d = NULL, buf[64] = "";
        int len = 0, rc;
        int64_t epoch = -1, noted = 0, now_epoch = 0;

        rc = wz_stamp(z, &now_epoch, store_now, cause);
        if (rc != ZOK)
            return rc;
        rc = zk_get(z->zk, z->since_path, &d, &len, &st, z->op_timeout_ms,
                    cause);
        if (rc == ZNONODE) {
            free(*cause);
            *cause = NULL;
            snprintf(buf, sizeof buf, "%" PRId64 " %" PRId64, now_epoch,
                     back ? *store_now : 0);
            rc = zk_create(z->zk, z->since_path, buf, (int)strlen(buf), 0,
                           NULL, z->op_timeout_ms, cause);
            if (rc == ZNODEEXISTS) {
                free(*cause);
                *cause = NULL;
                continue;
            }
            if (rc == ZOK)
                *since = back ? *store_now : 0;
            return rc;
        }
        if (rc != ZOK)
            return rc;
        if (d != NULL && len > 0 && (size_t)len < sizeof buf) {
            memcpy(buf, d, (size_t)len);
            buf[len] = '\0';
            if (sscanf(buf, "%" SCNd64 " %" SCNd64, &epoch, &noted) != 2)
                epoch = -1;
        }
        free(d);
        if (!back && now_epoch == epoch) {
            *since = noted;
            return ZOK;
        }
        snprintf(buf, sizeof buf, "%" PRId64 " %" PRId64, now_epoch,
                 *store_now);
        rc = zk_set(z->zk, z->since_path, buf, (int)strlen(buf), st.version,
                    &st, z->op_timeout_ms, cause);
        if (rc == ZBADVERSION) {    /* another one noted it: read it */
            free(*cause);
            *cause = NULL;
            continue;
        }
        if (rc != ZOK)
            return rc;
        if (back)
            log_warn("ZooKeeper %s went back in time: noted at store time %"
                     PRId64 " in %s", z->address, *store_now, z->since_path);
        else
            log_warn("ZooKeeper %s: epoch %" PRId64 ", the note %s says %"
                     PRId64 " (a new leader, a restart, or data restored from "
                     "an older snapshot: the store may have gone back in "
                     "time): nodes last written before store time %" PRId64
                     " gate on it + the new-node gate, and go to no other "
                     "identity for a lease", z->address, now_epoch,
                     z->since_path, epoch, *store_now);
        *since = *store_now;
        return ZOK;
    }
    *cause = xasprintf("%s changed under every one of five tries",
                       z->since_path);
    return ZBADVERSION;
}

/* Does the node at path still carry version after about two heartbeats?
 * 1 it changed (a live writer), 0 it did not, -1 ZooKeeper trouble. */
static int
wz_node_changes(struct wzk *z, const char *path, int version, char **cause)
{
    struct Stat st;
    char *data = NULL;
    int len = 0, rc;

    usleep((useconds_t)(2 * z->p.heartbeat_ms + 200) * 1000);
    rc = zk_get(z->zk, path, &data, &len, &st, z->op_timeout_ms, cause);
    free(data);
    if (rc == ZNONODE)
        return 1;
    if (rc != ZOK)
        return -1;
    return st.version != version;
}

/* Install node as the one holding worker. */
static void
wz_hold(struct wzk *z, char *node, int64_t worker, int version, int kind,
        int64_t written_ts)
{
    pthread_mutex_lock(&z->mu);
    free(z->node);
    z->node = node;
    pthread_mutex_unlock(&z->mu);
    z->worker = worker;
    z->version = version;
    z->floor_ts = written_ts;
    atomic_store(&z->took_over, kind == WZ_TAKEOVER);
}

/* Make c ours (see the DESIGN rules): a versioned write of our nonce and
 * the gate (or our clock, if later). WLEASE_OK with *fence_ms the gate;
 * 1 lost a race (released/takeover: try another); WLEASE_DOWN or
 * WLEASE_REFUSED with *cause. */
static int
wz_claim_node(struct wzk *z, const struct wlease_claim *cl,
              const struct wz_child *c, int kind, int64_t *fence_ms,
              char **cause)
{
    struct Stat st;
    char *data;
    int len, rc;
    int64_t now = cl->now_ms, gate = wz_gate(c);

    if (kind == WZ_OWN && c->nonce != NULL && !c->released &&
        strcmp(c->nonce, cl->prev_nonce) != 0) {
        log_info("%s was last written by another leafd instance (%s); "
                 "checking that it is not running", c->path, c->nonce);
        rc = wz_node_changes(z, c->path, c->version, cause);
        if (rc == -1)
            return WLEASE_DOWN;
        if (rc == 1) {
            *cause = xasprintf("snowflake identity %s:%d is in use: another "
                               "live leafd (instance %s) keeps writing %s; "
                               "give each process its own snowflake.ip / "
                               "port", z->ip, z->p.port, c->nonce, c->path);
            return WLEASE_REFUSED;
        }
    }
    /* the node's record goes on with it (relative to a timestamp at or
     * above its own until the lease's first write: only more cautious) */
    wlease_rec_claim(&z->rec, c->zones, c->zones != NULL ? strlen(c->zones)
                                                         : 0);
    data = wz_node_data(z, gate > now ? gate : now, 0, &len);
    rc = zk_set(z->zk, c->path, data, len, c->version, &st, z->op_timeout_ms,
                cause);
    free(data);
    if (rc == ZBADVERSION || rc == ZNONODE) {
        log_info("claim of %s lost to another writer (%s)", c->path,
                 zerror(rc));
        if (kind != WZ_OWN) {
            free(*cause);
            *cause = NULL;
            return 1;
        }
        return WLEASE_DOWN;
    }
    if (rc != ZOK)
        return WLEASE_DOWN;
    if (kind == WZ_TAKEOVER)
        log_warn("took over worker ID %" PRId64 " (%s, last fence %" PRId64
                 ", %" PRId64 " ms ago, from %s:%" PRId64 ")", c->seq,
                 c->path, c->ts, now - c->ts, c->ip, c->port);
    else if (kind == WZ_RELEASED)
        log_info("claimed released worker ID %" PRId64 " (%s, fence %" PRId64
                 ", from %s:%" PRId64 ")", c->seq, c->path, c->ts, c->ip,
                 c->port);
    if (gate > now)
        log_warn("%s: %s %" PRId64 " is %" PRId64 " ms ahead of the clock; "
                 "no IDs until the clock passes it", c->path,
                 c->nonce != NULL ? "fence" : "heartbeat + interval", gate,
                 gate - now);
    assert(gate >= c->ts);              /* never below what the node held */
    wz_hold(z, xstrdup(c->path), c->seq, st.version, kind,
            gate > now ? gate : now);
    *fence_ms = gate;
    return WLEASE_OK;
}

/* The gate of a new node: forever's ctime (the server's clock when it was
 * created) + unknown_gate_ms. A ZooKeeper that lost its data (the data
 * directory gone) hands out sequence numbers from 0 again, the worker IDs
 * of nodes still running; forever is created anew then, after every write
 * of theirs, so the gate is past every fence they held. ZOK or the error
 * with *cause. */
static int
wz_forever_gate(struct wzk *z, const struct wlease_claim *cl, int64_t *gate,
                char **cause)
{
    struct Stat st;
    char *d = NULL;
    int len = 0, rc;

    rc = zk_get(z->zk, z->forever, &d, &len, &st, z->op_timeout_ms, cause);
    free(d);
    if (rc == ZOK)
        *gate = st.ctime + cl->unknown_gate_ms;
    return rc;
}

/* Is seq (a node's sequence, its worker ID) inside the claim's range? */
static int
wz_in_range(const struct wlease_claim *cl, int64_t seq)
{
    return seq >= 0 && (uint64_t)seq >= cl->min_worker &&
           (uint64_t)seq <= cl->max_worker;
}

/* The refusal when ZooKeeper's counter under forever has passed the range
 * (next: the lowest sequence a new node could get). */
static char *
wz_full(struct wzk *z, const struct wlease_claim *cl, int64_t next)
{
    return xasprintf("no free worker ID: a new node under %s would get "
                     "sequence %" PRId64 " or more, past this node's range %"
                     PRIu64 "..%" PRIu64 " (ZooKeeper's sequence counter "
                     "only goes up; every node of the range is held by "
                     "its own identity). Reuse a "
                     "registration: start the node on an ip:port that "
                     "has one, set snowflake.release_on_stop (a released "
                     "node is taken again) or snowflake.takeover; or widen "
                     "the range, never into another datacenter's "
                     "(docs/operations.md)", z->forever, next,
                     cl->min_worker, cl->max_worker);
}

/* Nodes Java Leaf (no leafd nonce) registered outside the range: Java Leaf
 * takes its sequence as its worker ID, whatever this node's range is. */
static void
wz_warn_foreign_outside(struct wzk *z, const struct wlease_claim *cl,
                        const struct wz_child *c, int n)
{
    for (int i = 0; i < n; i++)
        if (c[i].parsed && c[i].nonce == NULL && !wz_in_range(cl, c[i].seq) &&
            strcmp(c[i].ip, WZ_PROBE_IP) != 0)
            log_warn("%s (not leafd's: Java Leaf's, or an older leafd) has "
                     "worker ID %" PRId64 ", outside this node's range %"
                     PRIu64 "..%" PRIu64 ": if it runs, it may collide with "
                     "the range that ID belongs to", c[i].path, c[i].seq,
                     cl->min_worker, cl->max_worker);
}

/* Drop the advance lock, if held. */
static void
wz_unlock(struct wzk *z)
{
    char *cause = NULL;

    if (!z->locked)
        return;
    z->locked = 0;
    if (zk_delete(z->zk, z->lock, -1, z->op_timeout_ms, &cause) != ZOK) {
        log_warn("%s (ephemeral: it goes with the session)", cause);
        free(cause);
    }
}

/* Take the advance lock and read forever's counter again under it: 0 with
 * *lower; WLEASE_DOWN when another node holds it (or ZooKeeper fails). */
static int
wz_lock(struct wzk *z, int64_t *lower, char **cause)
{
    char *data, **names = NULL;
    int len, n = 0, rc;

    data = wzk_node_format(z->ip, z->p.port, util_wall_ms(), z->nonce, 0,
                           &len);
    rc = zk_create(z->zk, z->lock, data, len, ZOO_EPHEMERAL, NULL,
                   z->op_timeout_ms, cause);
    free(data);
    if (rc == ZNODEEXISTS) {
        free(*cause);
        *cause = xasprintf("another leafd is advancing ZooKeeper's sequence "
                           "counter under %s to its range (%s held); "
                           "trying again", z->forever, z->lock);
        return WLEASE_DOWN;
    }
    if (rc != ZOK)
        return WLEASE_DOWN;
    z->locked = 1;
    if (zk_children(z->zk, z->forever, &names, &n, z->op_timeout_ms,
                    cause) != ZOK) {
        wz_unlock(z);
        return WLEASE_DOWN;
    }
    for (int i = 0; i < n; i++) {
        int64_t seq = wz_name_seq(names[i], NULL);
        if (seq + 1 > *lower)
            *lower = seq + 1;
    }
    zk_strings_free(names, n);
    return 0;
}

/* Bring forever's sequence counter up to the range, so that the next
 * node created gets a sequence of at least min_worker. The counter is at
 * least `lower` (the highest child's sequence + 1: each create takes one
 * number, a delete gives none back); from there, ephemeral probe nodes
 * WZ_PROBE_IP:0-<seq>, each deleted at once, until one is min_worker - 1
 * or more. Ephemeral, so a crash leaves none behind; Leaf's name form, so
 * Java Leaf's start on the same path reads them as another endpoint.
 * Nothing to do once a child is inside the range or past min_worker. One
 * node at a time probes, under the advance lock (held on WLEASE_OK until
 * the caller's create: wz_unlock), so that no probe takes a number of the
 * range that another node's probe brought the counter to.
 * WLEASE_OK; WLEASE_REFUSED (wz_full) when the counter is past the range;
 * WLEASE_DOWN. */
static int
wz_advance(struct wzk *z, const struct wlease_claim *cl, int64_t lower,
           char **cause)
{
    char *path, *data;
    int len, rc = WLEASE_OK, logged = 0;
    int64_t seq = -1;

    if ((uint64_t)lower < cl->min_worker &&
        wz_lock(z, &lower, cause) == WLEASE_DOWN)
        return WLEASE_DOWN;
    if (lower > 0 && (uint64_t)lower > cl->max_worker) {
        wz_unlock(z);
        *cause = wz_full(z, cl, lower);
        return WLEASE_REFUSED;
    }
    if ((uint64_t)lower >= cl->min_worker)
        return WLEASE_OK;
    path = xasprintf("%s/%s:0-", z->forever, WZ_PROBE_IP);
    data = wzk_node_format(WZ_PROBE_IP, 0, 0, NULL, 0, &len);
    for (;;) {
        char *created = NULL, *dcause = NULL;

        if (zk_create(z->zk, path, data, len, ZOO_EPHEMERAL_SEQUENTIAL,
                      &created, z->op_timeout_ms, cause) != ZOK) {
            rc = WLEASE_DOWN;
            break;
        }
        seq = wz_name_seq(created, NULL);
        if (zk_delete(z->zk, created, -1, z->op_timeout_ms, &dcause) != ZOK) {
            log_warn("%s (an ephemeral probe: it goes with the session)",
                     dcause);
            free(dcause);
        }
        if (seq < 0) {
            *cause = xasprintf("ZooKeeper created %s: no sequence", created);
            free(created);
            rc = WLEASE_DOWN;
            break;
        }
        if ((uint64_t)seq >= cl->max_worker) {
            /* the next create gets seq + 1 or more: past the range */
            *cause = wz_full(z, cl, seq + 1);
            free(created);
            rc = WLEASE_REFUSED;
            break;
        }
        free(created);
        if ((uint64_t)seq + 1 >= cl->min_worker)
            break;
        if (!logged++)
            log_info("%s: ZooKeeper's sequence counter is at %" PRId64
                     ", below this node's range %" PRIu64 "..%" PRIu64
                     ": advancing it (%" PRIu64 " creates, once per path)",
                     z->forever, seq, cl->min_worker, cl->max_worker,
                     cl->min_worker - (uint64_t)seq - 1);
    }
    free(data);
    free(path);
    if (rc != WLEASE_OK)
        wz_unlock(z);
    if (logged && rc == WLEASE_OK)
        log_info("%s: sequence counter advanced to %" PRId64, z->forever,
                 seq + 1);
    return rc;
}

/* The claim (see workerid_zk.h for the order). */
static int
wz_register(struct wzk *z, const struct wlease_claim *cl, int64_t *worker,
            int64_t *fence_ms, char **cause)
{
    struct wz_child *c = NULL;
    char *path, *data, *created = NULL;
    int n = 0, rc, len, pick = -1;
    int takeover = z->p.takeover && cl->lease_ms > 0;
    int64_t now = cl->now_ms, seq, gate = 0, lower = 0, since = 0;
    int64_t store_now = 0, back_gate, free_at;

    path = xasprintf("/snowflake/%s", z->leaf_name);
    if (wz_ensure_path(z, "/snowflake", cause) != ZOK ||
        wz_ensure_path(z, path, cause) != ZOK ||
        wz_ensure_path(z, z->forever, cause) != ZOK) {
        free(path);
        return WLEASE_DOWN;
    }
    free(path);
    if (wz_since(z, 0, &since, &store_now, cause) != ZOK)
        return WLEASE_DOWN;
    if (wz_read_children(z, &c, &n, cause) != ZOK)
        return WLEASE_DOWN;
    back_gate = since > 0 ? since + cl->unknown_gate_ms : 0;
    free_at = since + (cl->lease_ms > 0 ? cl->lease_ms :
                       z->p.session_timeout_ms);
    for (int i = 0; i < n; i++)
        if (c[i].mtime < since)
            c[i].back_gate = back_gate;

    wz_warn_foreign_outside(z, cl, c, n);
    /* 1. our own node (of several, one inside the range; the cache
     * file's) */
    for (int i = 0; i < n; i++) {
        int in = wz_in_range(cl, c[i].seq);
        if (!c[i].mine)
            continue;
        if (pick == -1 || (in && !wz_in_range(cl, c[pick].seq)) ||
            (in && c[i].seq == cl->prev_worker))
            pick = i;
    }
    if (pick != -1) {
        int mine = 0;
        for (int i = 0; i < n; i++)
            mine += c[i].mine;
        if (mine > 1)
            log_warn("%d nodes under %s name %s:%d; using %s", mine,
                     z->forever, z->ip, z->p.port, c[pick].name);
        if (!wz_in_range(cl, c[pick].seq)) {
            *cause = xasprintf("this node's registration %s has sequence %"
                               PRId64 " (its worker ID), outside this "
                               "node's range %" PRIu64 "..%" PRIu64
                               " (snowflake.worker_id_min, worker_id_max, "
                               "within the layout's worker bits): stop the "
                               "process that used it, then delete the node "
                               "so this identity registers anew inside the "
                               "range (docs/operations.md)", c[pick].path,
                               c[pick].seq, cl->min_worker, cl->max_worker);
            wz_children_free(c, n);
            return WLEASE_REFUSED;
        }
        rc = wz_claim_node(z, cl, &c[pick], WZ_OWN, fence_ms, cause);
        if (rc == WLEASE_OK)
            *worker = c[pick].seq;
        wz_children_free(c, n);
        return rc;
    }

    for (int i = 0; i < n; i++)
        if (c[i].seq + 1 > lower)
            lower = c[i].seq + 1;
    /* 2. a released leafd node whose fence our clock has passed; 3. with
     * takeover, a stale one that only leafd can claim */
    for (int kind = WZ_RELEASED; kind <= WZ_TAKEOVER; kind++) {
        if (kind == WZ_TAKEOVER && !takeover)
            break;
        for (int i = 0; i < n; i++) {
            if (!c[i].parsed || !wz_in_range(cl, c[i].seq))
                continue;
            if (kind == WZ_RELEASED ? !c[i].released || c[i].ts >= now :
                c[i].ts >= now - cl->lease_ms)
                continue;
            if (c[i].back_gate > 0 && store_now < free_at) {
                if (wz_log_due(z))
                    log_info("not taking %s: last written before ZooKeeper "
                             "went back in time (store time %" PRId64 "); "
                             "its holder may live: not before store time %"
                             PRId64, c[i].path, since, free_at);
                continue;
            }
            if (c[i].nonce == NULL) {
                if (kind == WZ_TAKEOVER && wz_log_due(z))
                    log_info("not taking over %s: leafd did not write it "
                             "last (Java Leaf claims a node by its name, "
                             "so it could come back and use it)", c[i].path);
                continue;
            }
            rc = wz_claim_node(z, cl, &c[i], kind, fence_ms, cause);
            if (rc == 1)            /* lost the race: try the next */
                continue;
            if (rc == WLEASE_OK)
                *worker = c[i].seq;
            wz_children_free(c, n);
            return rc;
        }
    }
    wz_children_free(c, n);

    /* 4. a new node, past what a lost one held (wz_forever_gate), its
     * sequence inside the range (wz_advance) */
    if (wz_forever_gate(z, cl, &gate, cause) != ZOK)
        return WLEASE_DOWN;
    if (back_gate > gate)
        gate = back_gate;
    rc = wz_advance(z, cl, lower, cause);
    if (rc != WLEASE_OK)
        return rc;
    path = xasprintf("%s/%s:%d-", z->forever, z->ip, z->p.port);
    wlease_rec_claim(&z->rec, NULL, 0);
    data = wz_node_data(z, gate > now ? gate : now, 0, &len);
    rc = zk_create(z->zk, path, data, len, ZOO_PERSISTENT_SEQUENTIAL,
                   &created, z->op_timeout_ms, cause);
    wz_unlock(z);
    free(data);
    free(path);
    if (rc != ZOK)
        return WLEASE_DOWN;
    seq = wz_name_seq(created, NULL);
    if (seq < 0 || !wz_in_range(cl, seq)) {
        char *dcause = NULL;
        if (zk_delete(z->zk, created, -1, z->op_timeout_ms, &dcause) != ZOK) {
            log_warn("%s", dcause);
            free(dcause);
        }
        /* below the range only if the counter went back (a ZooKeeper
         * restored): try again, which advances it */
        if (seq >= 0 && (uint64_t)seq < cl->min_worker) {
            *cause = xasprintf("ZooKeeper gave %s, below this node's range "
                               "%" PRIu64 "..%" PRIu64 " after the counter "
                               "was past it; trying again", created,
                               cl->min_worker, cl->max_worker);
            free(created);
            return WLEASE_DOWN;
        }
        log_info("ZooKeeper gave %s: past the range, removed", created);
        *cause = wz_full(z, cl, seq);
        free(created);
        return WLEASE_REFUSED;
    }
    log_info("registered %s: worker ID %" PRId64, created, seq);
    if (gate > now)
        log_warn("%s was created at ZooKeeper time %" PRId64 " (a new or "
                 "wiped ZooKeeper), or ZooKeeper went back in time then: no "
                 "IDs from %s until %" PRId64 " (%" PRId64 " ms), past "
                 "anything a node could have issued under a node ZooKeeper "
                 "lost", z->forever, gate - cl->unknown_gate_ms, created,
                 gate, gate - now);
    wz_hold(z, created, seq, 0, WZ_OWN, gate > now ? gate : now);
    *worker = seq;
    *fence_ms = gate > now ? gate : now;
    return WLEASE_OK;
}

static int
wz_claim(void *arg, const struct wlease_claim *cl, int64_t *worker,
         int64_t *fence_ms, char **cause)
{
    struct wzk *z = arg;

    assert(!z->p.takeover || cl->lease_ms > 0);
    if (cl->want_worker >= 0) {
        /* Leaf's sequential nodes pick the ID; none is asked for */
        *cause = xstrdup("ZooKeeper cannot hold a fixed worker ID (k8s "
                         "fences go to redis or mysql)");
        return WLEASE_REFUSED;
    }
    snprintf(z->nonce, sizeof z->nonce, "%s", cl->nonce);
    zk_maintain(z->zk);
    if (!z->waited) {
        z->waited = 1;
        if (!zk_wait_connected(z->zk, (int)z->p.session_timeout_ms)) {
            *cause = xasprintf("ZooKeeper %s not reachable in %" PRId64
                               " ms", z->address, z->p.session_timeout_ms);
            return WLEASE_DOWN;
        }
    }
    if (!zk_connected(z->zk)) {
        *cause = xasprintf("ZooKeeper %s not connected", z->address);
        return WLEASE_DOWN;
    }
    return wz_register(z, cl, worker, fence_ms, cause);
}

/* A holder saw ZooKeeper go back in time: note it for the claimers. */
static void
wz_note_back(struct wzk *z)
{
    int64_t since = 0, now = 0;
    char *cause = NULL;

    if (wz_since(z, 1, &since, &now, &cause) != ZOK) {
        log_warn("%s", cause != NULL ? cause : "?");
        free(cause);
    }
}

/* Write ts (and released) into our node. WLEASE_OK with *mtime,
 * WLEASE_DOWN, WLEASE_LOST. */
static int
wz_write(struct wzk *z, int64_t ts, int released, int starting,
         int64_t *mtime, char **cause)
{
    struct Stat st;
    char *data, *node;
    int len, rc, tmo, tries = 0;

    zk_maintain(z->zk);
    if (z->worker < 0 || !zk_connected(z->zk)) {
        *cause = xasprintf("ZooKeeper %s not connected: fence %" PRId64
                           " is in the cache file only", z->address, ts);
        return WLEASE_DOWN;
    }
    pthread_mutex_lock(&z->mu);
    node = xstrdup(z->node);
    pthread_mutex_unlock(&z->mu);
    /* never below the claim's own write (the gate, or the claimer's clock
     * then): a taker reads the timestamp as the last sign of life, so the
     * node must not look older than its claim (the lease's first write is
     * the gate, which may be an hour old after a takeover). Higher than
     * asked only raises the fence a taker gates on. */
    if (ts < z->floor_ts)
        ts = z->floor_ts;
    data = wz_node_data(z, ts, released, &len);
    /* A fence write in service must be quick (fence_step / 4: an answer
     * later than that is as good as none to a waiting request); the start's
     * clock check is part of starting, where a busy ZooKeeper or machine
     * may take longer without harm. */
    tmo = starting ? z->op_timeout_ms : z->write_timeout_ms;
again:
    rc = zk_set(z->zk, node, data, len, z->version, &st, tmo, cause);
    if (rc == ZBADVERSION && tries++ == 0) {
        /* our own earlier write may have landed after we gave up on it */
        struct wzk_node nd;
        char *cur = NULL;
        int clen = 0;
        free(*cause);
        *cause = NULL;
        rc = zk_get(z->zk, node, &cur, &clen, &st, tmo, cause);
        if (rc == ZOK) {
            /* ours only with our nonce: a twin with the same ip:port
             * writes the same ip and port, never the same nonce */
            int ours = wzk_node_parse(cur, (size_t)clen, &nd) == 0 &&
                       nd.nonce != NULL && strcmp(nd.nonce, z->nonce) == 0;
            free(cur);
            wzk_node_free(&nd);
            if (ours) {
                if (st.version < z->version) {
                    log_warn("%s is at version %d, below the %d this "
                             "process wrote last: ZooKeeper went back in "
                             "time (restored from an older snapshot?); "
                             "writing it again", node, st.version,
                             z->version);
                    wz_note_back(z);
                }
                z->version = st.version;
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
        z->version = st.version;
        *mtime = st.mtime;
        atomic_fetch_add(&z->writes_ok, 1);
        free(node);
        return WLEASE_OK;
    }
    atomic_fetch_add(&z->writes_fail, 1);
    if (rc == ZNONODE) {
        free(*cause);
        *cause = xasprintf("%s was removed from ZooKeeper (or ZooKeeper "
                           "went back to before it was created)", node);
        wz_note_back(z);
    }
    free(node);
    return rc == ZBADVERSION || rc == ZNONODE ? WLEASE_LOST : WLEASE_DOWN;
}

static int
wz_fence(void *arg, int64_t worker, const char *nonce, int64_t fence_ms,
         int starting, int64_t *store_ms, char **cause)
{
    struct wzk *z = arg;

    assert(z->worker < 0 || (worker == z->worker &&
                             strcmp(nonce, z->nonce) == 0));
    return wz_write(z, fence_ms, 0, starting, store_ms, cause);
}

static int
wz_release(void *arg, int64_t worker, const char *nonce, int64_t fence_ms,
           char **cause)
{
    struct wzk *z = arg;
    int64_t mtime = 0;

    assert(worker == z->worker && strcmp(nonce, z->nonce) == 0);
    return wz_write(z, fence_ms, 1, 0, &mtime, cause);
}

static char *
wz_claimed_record(void *arg)
{
    return wlease_rec_claimed(&((struct wzk *)arg)->rec);
}

static void
wz_set_record(void *arg, const char *rec)
{
    wlease_rec_set(&((struct wzk *)arg)->rec, rec);
}

/* A fence write puts no less than this in the node (wz_write). */
static int64_t
wz_fence_floor(void *arg)
{
    return ((struct wzk *)arg)->floor_ts;
}

static void
wz_close(void *arg)
{
    struct wzk *z = arg;

    if (z == NULL)
        return;
    zk_close(z->zk);
    free(z->address);
    free(z->leaf_name);
    free(z->ip);
    free(z->forever);
    free(z->lock);
    free(z->since_path);
    free(z->clock_path);
    free(z->node);
    wlease_rec_free(&z->rec);
    pthread_mutex_destroy(&z->mu);
    free(z);
}

static const char *
wz_source(void *arg)
{
    struct wzk *z = arg;
    return atomic_load(&z->took_over) ? "takeover" : "zookeeper";
}

static char *
wz_node(void *arg)
{
    return workerid_zk_node(arg);
}

static int
wz_state_num(struct wzk *z)
{
    const char *s = zk_state_name(z->zk);

    return strcmp(s, "connected") == 0 ? 2 : strcmp(s, "expired") == 0 ? 3 : 1;
}

static void
wz_state_json(void *arg, struct sbuf *out)
{
    struct wzk *z = arg;
    char server[ZK_SERVER_MAX];

    pthread_mutex_lock(&z->mu);
    sbuf_puts(out, ",\"zk_node\":");
    if (z->node != NULL)
        sbuf_json_str(out, z->node);
    else
        sbuf_puts(out, "null");
    pthread_mutex_unlock(&z->mu);
    sbuf_puts(out, ",\"zk_address\":");
    sbuf_json_str(out, z->address);
    sbuf_printf(out, ",\"zk_state\":\"%s\",\"takeover\":%s",
                zk_state_name(z->zk), z->p.takeover ? "true" : "false");
    zk_current_server(z->zk, server, sizeof server);
    sbuf_puts(out, ",\"zk_server\":");
    if (server[0] != '\0')
        sbuf_json_str(out, server);
    else
        sbuf_puts(out, "null");
    sbuf_printf(out, ",\"store_failovers\":%" PRIu64,
                zk_server_changes(z->zk));
}

static void
wz_metrics(void *arg, struct sbuf *out)
{
    struct wzk *z = arg;

    sbuf_metric_i64(out, "leafd_snowflake_zk_session_state", "gauge",
                    WORKERID_ZK_STATE_HELP, wz_state_num(z));
    sbuf_metric_head(out, "leafd_snowflake_zk_writes_total", "counter",
                     "Fence writes of the ZooKeeper node, by result.");
    sbuf_printf(out, "leafd_snowflake_zk_writes_total{result=\"ok\"} %"
                PRIu64 "\n", atomic_load(&z->writes_ok));
    sbuf_printf(out, "leafd_snowflake_zk_writes_total{result=\"error\"} %"
                PRIu64 "\n", atomic_load(&z->writes_fail));
    sbuf_metric_u64(out, "leafd_snowflake_zk_connects_total", "counter",
                    "ZooKeeper (re)connections.", zk_connects(z->zk));
    sbuf_metric_u64(out, "leafd_snowflake_zk_expirations_total", "counter",
                    "ZooKeeper sessions that expired.", zk_expirations(z->zk));
    sbuf_metric_head(out, "leafd_snowflake_store_failovers_total", "counter",
                     "Failovers the worker ID store's client saw: ZooKeeper, "
                     "a connection to another ensemble member.");
    sbuf_printf(out, "leafd_snowflake_store_failovers_total{source=\"zookeeper\"} %"
                PRIu64 "\n", zk_server_changes(z->zk));
}

int
workerid_zk_store(const struct workerid_zk_params *p,
                  struct wlease_store *out, char **cause)
{
    struct wzk *z;
    int64_t t;

    if (p->leaf_name == NULL || *p->leaf_name == '\0' ||
        strchr(p->leaf_name, '/') != NULL) {
        *cause = xasprintf("leaf.name \"%s\" cannot name a ZooKeeper node",
                           p->leaf_name != NULL ? p->leaf_name : "");
        return -1;
    }
    if (p->address == NULL || *p->address == '\0') {
        *cause = xstrdup("snowflake.worker_source is zookeeper but "
                         "leaf.snowflake.zk.address is empty");
        return -1;
    }
    z = xcalloc(1, sizeof *z);
    z->p = *p;
    z->address = xstrdup(p->address);
    z->leaf_name = xstrdup(p->leaf_name);
    z->ip = xstrdup(p->ip != NULL ? p->ip : "");
    z->p.address = z->address;
    z->p.leaf_name = z->leaf_name;
    z->p.ip = z->ip;
    z->forever = xasprintf("/snowflake/%s/forever", z->leaf_name);
    z->lock = xasprintf("/snowflake/%s/advance", z->leaf_name);
    z->since_path = xasprintf("/snowflake/%s/leafd_since", z->leaf_name);
    z->clock_path = xasprintf("/snowflake/%s/leafd_clock", z->leaf_name);
    t = p->session_timeout_ms / 2;
    z->op_timeout_ms = (int)(t < 500 ? 500 : t > 5000 ? 5000 : t);
    t = p->fence_step_ms / 4;
    z->write_timeout_ms = (int)(t < 100 ? 100 : t > 1000 ? 1000 : t);
    if (z->write_timeout_ms > z->op_timeout_ms)
        z->write_timeout_ms = z->op_timeout_ms;
    z->worker = -1;
    z->version = -1;
    pthread_mutex_init(&z->mu, NULL);
    z->zk = zk_open(z->address, (int)p->session_timeout_ms, cause);
    if (z->zk == NULL) {
        wz_close(z);
        return -1;
    }
    memset(out, 0, sizeof *out);
    out->name = "zookeeper";
    out->claim = wz_claim;
    out->fence = wz_fence;
    out->release = wz_release;
    out->claimed_record = wz_claimed_record;
    out->set_record = wz_set_record;
    out->fence_floor = wz_fence_floor;
    out->close = wz_close;
    out->source = wz_source;
    out->node = wz_node;
    out->state_json = wz_state_json;
    out->metrics = wz_metrics;
    out->arg = z;
    return 0;
}

char *
workerid_zk_node(struct wzk *z)
{
    char *n;

    pthread_mutex_lock(&z->mu);
    n = z->node != NULL ? xstrdup(z->node) : NULL;
    pthread_mutex_unlock(&z->mu);
    return n;
}

struct zk *
workerid_zk_client(struct wzk *z)
{
    return z->zk;
}
