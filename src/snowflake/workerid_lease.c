/* workerid_lease.c: the lease rule shared by the stores that hand out
 * worker IDs (ZooKeeper, Redis, MySQL; see workerid_lease.h), on top of a
 * struct wlease_store.
 *
 * DESIGN: one lease rule.
 *   - A worker ID is held by a lease that the holder's fence writes renew:
 *     every persisted fence and every heartbeat (snowflake.heartbeat_ms) is
 *     one store write, a compare-and-set on the holder's instance nonce that
 *     also stamps the store's own clock as the heartbeat.
 *   - Another identity may claim it only when both hold: the lease has
 *     expired (lease_ms since that stamp on the store's clock; in
 *     ZooKeeper, whose nodes keep Leaf's layout, a fence older than
 *     lease_ms on the taker's clock; or released), and the fence the store
 *     holds is below the taker's clock. The taker then gates on that fence:
 *     it issues nothing at or below it. The stores enforce this in their
 *     claim (a Lua script, a locked transaction, a versioned ZooKeeper
 *     write). With lease_ms 0 (ZooKeeper without snowflake.takeover) a held
 *     ID goes to no other identity, only a released one.
 *   - The holder counts a fence (SNOWFLAKE_PERSIST_OK) only once the store's
 *     write succeeded; a fence in the cache file alone is
 *     SNOWFLAKE_PERSIST_UNCONFIRMED and nothing past the last confirmed one
 *     is issued (fence_unconfirmed). So whatever its clock does, a holder
 *     never issues past the fence a taker gates on: no ID twice.
 *   - A holder whose writes have not landed for lease_ms / 2, counted on its
 *     monotonic clock from the moment it sent the last write that landed
 *     (the store stamped it no earlier), stops issuing well before the
 *     store could see its lease expire (ZooKeeper: before a taker could, as
 *     every write carries a fence ahead of the holder's clock, if the clocks
 *     agree within half the lease): the deadline goes to the generator
 *     (lease_until), whose request path checks it on every call, so a
 *     keeper thread stuck in a slow store call does not delay the stop;
 *     the keeper's tick also says SNOWFLAKE_TICK_LEASE_EXPIRED. Without a
 *     lease (lease_ms 0) it never stops for this; the fence rule above
 *     still bounds what it issues.
 *   - A fence write that finds another nonce means the ID was taken:
 *     SNOWFLAKE_TICK_LOST, for good.
 *   - An ID the store has no record of (never used, or lost with the
 *     data) gates, in Redis and MySQL, on the store's epoch (its clock when
 *     a claim first found no epoch: Redis's <prefix>epoch key, MySQL's
 *     sentinel row in leaf_worker, lost with the other rows) +
 *     unknown_gate_ms: the fences of any node that held it were written
 *     before the epoch. ZooKeeper's new nodes gate on their parent's
 *     creation + unknown_gate_ms, which a lost data directory renews.
 *   - A store that went back in time (Redis restarted from an older RDB or
 *     a lagging replica promoted; leaf_worker restored from a dump) keeps
 *     records older than what their holders wrote since. The store notes
 *     when (`since`: Redis's P server, when a claim or write sees another
 *     run_id/replid; MySQL, when a claim sees the table's CREATE_TIME or
 *     @@server_id differ from the ones the epoch row notes, or a live
 *     holder's lock on an ID the table calls free; both, when a holder
 *     finds its own record older than its last write, which it then
 *     writes again). A record older than since is free only a lease after
 *     it (a live holder writes within that, or has stopped issuing), and
 *     is taken gated on since + unknown_gate_ms, as a lost one is.
 *   - A fixed worker ID (k8s: the pod's ordinal + offset) is the same rule
 *     with the claim limited to that one ID: held live by another identity,
 *     the claim is refused (the start fails, naming the holder); free but
 *     its fence not yet below the taker's clock, the claim is retried as
 *     with the store down. The same identity (the pod name) takes it back
 *     even from a live lease and gates on its fence: a process of that name
 *     still running confirms no further fence (its writes find another
 *     nonce), so it issues nothing past what the taker gates on. The pod's
 *     identity is "<namespace>/<pod>" (pods of one name in two namespaces
 *     are two identities); the bare pod name, a run's identity before
 *     namespaces, is its alias and counts as the same.
 *   - Every fence write also reads the store's clock; the offset from ours
 *     (the middle of the round trip) past max_clock_offset_ms, less half
 *     the round trip, refuses the start, and while running refuses IDs
 *     (SNOWFLAKE_TICK_CLOCK_BAD: clock_offset) until it is back within.
 *     Uniqueness does not rest on it (the fences do); it keeps a node
 *     whose clock is far off from taking IDs whose fence it passes early.
 *   - The range (min_worker..max_worker, snowflake.worker_id_min/_max):
 *     every store claims only inside it (Redis's script and MySQL's scan
 *     take the lowest free in it; ZooKeeper advances its sequence counter
 *     to it, workerid_zk.h), a fixed worker ID outside it is refused at
 *     open, and "all in use" is all of the range: a full range refuses the
 *     claim (WLEASE_REFUSED), it never takes an ID of another range. An
 *     identity's record outside the range (the range moved) is freed, its
 *     fence kept, when it takes one inside. wl_claim asserts the result.
 */
#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "workerid_cache.h"
#include "workerid_lease.h"

enum { WL_HELD_OK, WL_HELD_LEASE, WL_HELD_CLOCK };

struct wlease {
    struct wlease_params p;         /* strings below are our own copies */
    struct wlease_store  st;
    char            *identity;
    char            *alias;         /* "" none */
    char            *cache_path;
    char            *leaf_name;
    char            *ip;
    char            *source;        /* p.source's copy, or NULL */
    char             nonce[17];
    char            *prev_nonce;    /* the cache file's, or "" */
    int64_t          prev_worker;   /* the cache file's, or -1 */

    _Atomic int64_t  worker;        /* -1 unknown */
    int64_t          start_fence;
    int              lost;
    int              held;          /* WL_HELD_*: what the generator was
                                       last told */
    int64_t          last_fence;    /* last fence written to the file */
    _Atomic int64_t  store_fence;   /* last fence the store confirmed */
    int64_t          last_ok_send_mono; /* send time of the last write that
                                           landed */
    int64_t          last_write_mono;
    _Atomic int64_t  last_hb_wall;  /* wall ms of that write, 0 never */
    _Atomic int64_t  store_ms;      /* store's clock at that write */
    _Atomic int64_t  offset_ms;     /* store's clock - ours, RTT-corrected */
    _Atomic int64_t  rtt_ms;
    _Atomic int      measured;      /* offset_ms holds a measurement */
    int64_t          last_try_mono;
    int64_t          last_log_mono;
    _Atomic uint64_t writes_ok;
    _Atomic uint64_t writes_fail;
    char            *last_error;    /* guarded by mu */
    char            *gate_note;     /* the store's epoch_note, guarded by
                                       mu; for the gate gate_note_at */
    int64_t          gate_note_at;
    pthread_mutex_t  mu;
};

static int64_t
wl_now(struct wlease *l)
{
    return l->p.clock != NULL ? l->p.clock(l->p.clock_arg) : util_wall_ms();
}

static void
wl_set_error(struct wlease *l, const char *msg)
{
    pthread_mutex_lock(&l->mu);
    free(l->last_error);
    l->last_error = msg != NULL ? xstrdup(msg) : NULL;
    pthread_mutex_unlock(&l->mu);
}

static int
wl_log_due(struct wlease *l)
{
    int64_t m = util_mono_ms();

    if (l->last_log_mono != 0 && m - l->last_log_mono < 10000)
        return 0;
    l->last_log_mono = m;
    return 1;
}

static int wl_write(struct wlease *l, int64_t fence_ms, int starting,
                    char **cause);
static void wl_set_record(struct wlease *l, int64_t fence_ms);
static const char *wl_source(void *arg);

/* The last measured offset is over the limit (0: no limit). */
static int
wl_clock_bad(struct wlease *l)
{
    int64_t off = atomic_load(&l->offset_ms);

    if (l->p.max_clock_offset_ms <= 0 || !atomic_load(&l->measured))
        return 0;
    if (off < 0)
        off = -off;
    /* half the round trip is the measurement's own uncertainty */
    return off - atomic_load(&l->rtt_ms) / 2 > l->p.max_clock_offset_ms;
}

/* One claim; WLEASE_*. On OK the worker ID and gate are installed. */
static int
wl_claim(struct wlease *l, char **cause)
{
    struct wlease_claim c;
    int64_t worker = -1, fence = 0, sent = util_mono_ms();
    int rc;

    c.identity = l->identity;
    c.alias = l->alias;
    c.nonce = l->nonce;
    c.prev_nonce = l->prev_nonce;
    c.prev_worker = l->prev_worker;
    c.now_ms = wl_now(l);
    c.lease_ms = l->p.lease_ms;
    c.min_worker = l->p.min_worker;
    c.max_worker = l->p.max_worker;
    c.want_worker = l->p.fixed_worker ? l->p.worker_id : -1;
    c.unknown_gate_ms = l->p.unknown_gate_ms;
    rc = l->st.claim(l->st.arg, &c, &worker, &fence, cause);
    if (rc != WLEASE_OK)
        return rc;
    if (l->p.hook.claimed != NULL) {
        /* before the worker ID is published: nothing of it issued yet */
        char *rec = l->st.claimed_record != NULL ?
                    l->st.claimed_record(l->st.arg) : NULL;
        l->p.hook.claimed(l->p.hook.arg, rec != NULL ? rec : "",
                          rec != NULL ? strlen(rec) : 0, fence);
        free(rec);
    }
    if (l->st.epoch_note != NULL) {
        int64_t at = -1;
        char *note = l->st.epoch_note(l->st.arg, &at);
        pthread_mutex_lock(&l->mu);
        free(l->gate_note);
        l->gate_note = note;
        l->gate_note_at = at;
        pthread_mutex_unlock(&l->mu);
    }
    /* every store claims inside the range; a full range is REFUSED */
    assert(worker >= 0 && (uint64_t)worker >= l->p.min_worker &&
           (uint64_t)worker <= l->p.max_worker);
    assert(!l->p.fixed_worker || worker == l->p.worker_id);
    if (fence > l->start_fence)
        l->start_fence = fence;
    atomic_store(&l->store_fence, fence);
    l->last_ok_send_mono = sent;
    l->last_write_mono = sent;
    atomic_store(&l->last_hb_wall, util_wall_ms());
    atomic_store(&l->worker, worker);
    return WLEASE_OK;
}

static void
wl_make_nonce(char *buf, size_t size)
{
    uint64_t v;

    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
        v = ((uint64_t)util_wall_ms() << 20) ^ (uint64_t)util_mono_us() ^
            ((uint64_t)getpid() << 40);
    snprintf(buf, size, "%016" PRIx64, v);
}

struct wlease *
wlease_open(const struct wlease_params *p, const struct wlease_store *store,
            char **cause)
{
    struct wlease *l = xcalloc(1, sizeof *l);
    struct workerid_cache c;
    int crc, rc;

    l->p = *p;
    l->st = *store;
    l->identity = xstrdup(p->identity != NULL ? p->identity : "");
    l->alias = xstrdup(p->alias != NULL ? p->alias : "");
    l->cache_path = xstrdup(p->cache_path != NULL ? p->cache_path : "");
    l->leaf_name = xstrdup(p->leaf_name != NULL ? p->leaf_name : "");
    l->ip = xstrdup(p->ip != NULL ? p->ip : "");
    l->p.identity = l->identity;
    l->p.alias = l->alias;
    l->p.cache_path = l->cache_path;
    l->p.leaf_name = l->leaf_name;
    l->p.ip = l->ip;
    l->source = p->source != NULL ? xstrdup(p->source) : NULL;
    l->p.source = l->source;
    wl_make_nonce(l->nonce, sizeof l->nonce);
    atomic_store(&l->worker, -1);
    pthread_mutex_init(&l->mu, NULL);
    memset(&c, 0, sizeof c);

    if (*l->cache_path == '\0') {
        *cause = xstrdup("snowflake: no cache file path");
        goto error;
    }
    if (p->lease_ms < 0 ||
        (p->lease_ms > 0 && p->lease_ms < 2 * p->heartbeat_ms + 1)) {
        *cause = xasprintf("snowflake lease %" PRId64 " ms must be over 2 x "
                           "snowflake.heartbeat_ms (%" PRId64 ")",
                           p->lease_ms, p->heartbeat_ms);
        goto error;
    }
    if (p->min_worker > p->max_worker) {
        *cause = xasprintf("snowflake.worker_id_min %" PRIu64 " is above "
                           "snowflake.worker_id_max %" PRIu64, p->min_worker,
                           p->max_worker);
        goto error;
    }
    if (p->fixed_worker && (p->worker_id < 0 ||
                            (uint64_t)p->worker_id < p->min_worker ||
                            (uint64_t)p->worker_id > p->max_worker)) {
        *cause = xasprintf("snowflake worker ID %" PRId64 " is outside "
                           "%" PRIu64 "..%" PRIu64 " (snowflake."
                           "worker_id_min, worker_id_max)", p->worker_id,
                           p->min_worker, p->max_worker);
        goto error;
    }
    crc = workerid_cache_read(l->cache_path, &c, cause);
    if (crc == -1 || (crc == 0 && workerid_cache_layout_check(
                          l->cache_path, &c, l->p.layout, cause) == -1))
        goto error;
    l->prev_nonce = xstrdup(crc == 0 && c.nonce != NULL ? c.nonce : "");
    l->prev_worker = crc == 0 ? c.worker_id : -1;
    /* The file's fence belongs to the file's worker ID; it is only a gate
     * when the store gives the same one back, checked after the claim. */
    rc = wl_claim(l, cause);
    if (rc == WLEASE_REFUSED)
        goto error;
    if (rc == WLEASE_OK) {
        if (crc == 0 && c.worker_id == atomic_load(&l->worker) &&
            c.fence_ms > l->start_fence)
            l->start_fence = c.fence_ms;
        /* the clock against the store's, before anything is issued */
        if (wl_write(l, atomic_load(&l->store_fence), 1, cause) != WLEASE_OK)
            goto error;
        if (wl_clock_bad(l)) {
            *cause = xasprintf("this node's clock is %" PRId64 " ms off "
                               "%s's (round trip %" PRId64 " ms; "
                               "snowflake.max_clock_offset_ms %" PRId64
                               "): not starting", -atomic_load(&l->offset_ms),
                               l->st.name, atomic_load(&l->rtt_ms),
                               l->p.max_clock_offset_ms);
            /* not ours to keep: free it for a node with a good clock */
            l->p.release_on_stop = 1;
            goto error;
        }
    } else {
        log_warn("snowflake: no worker ID from %s at start (%s); none until "
                 "a claim in the background succeeds", l->st.name, *cause);
        wl_set_error(l, *cause);
        free(*cause);
        *cause = NULL;
        l->last_try_mono = util_mono_ms();
    }
    workerid_cache_free(&c);
    return l;

error:
    workerid_cache_free(&c);
    wlease_close(l);
    return NULL;
}

void
wlease_close(struct wlease *l)
{
    if (l == NULL)
        return;
    if (l->p.release_on_stop && !l->lost && atomic_load(&l->worker) >= 0) {
        char *cause = NULL;
        int64_t f = atomic_load(&l->store_fence);

        wl_set_record(l, f);
        if (l->st.release(l->st.arg, atomic_load(&l->worker), l->nonce, f,
                          &cause) == WLEASE_OK)
            log_info("snowflake worker ID %" PRId64 " released in %s "
                     "(fence %" PRId64 ")", atomic_load(&l->worker),
                     l->st.name, f);
        else
            log_warn("snowflake: release in %s failed: %s", l->st.name,
                     cause != NULL ? cause : "?");
        free(cause);
    }
    if (l->st.close != NULL)
        l->st.close(l->st.arg);
    free(l->identity);
    free(l->alias);
    free(l->cache_path);
    free(l->leaf_name);
    free(l->ip);
    free(l->source);
    free(l->prev_nonce);
    free(l->last_error);
    free(l->gate_note);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int
wlease_get(struct wlease *l, int64_t *worker, int64_t *fence_ms)
{
    *worker = atomic_load(&l->worker);
    *fence_ms = l->start_fence;
    return *worker >= 0 ? 0 : -1;
}

/* The record the next write carries: the hook's for the fence the store
 * will hold (each write carries the record of its own fence, in the same
 * store write). */
static void
wl_set_record(struct wlease *l, int64_t fence_ms)
{
    int64_t floor;
    char *rec;

    if (l->p.hook.record == NULL || l->st.set_record == NULL)
        return;
    floor = l->st.fence_floor != NULL ? l->st.fence_floor(l->st.arg) : 0;
    rec = l->p.hook.record(l->p.hook.arg, fence_ms > floor ? fence_ms : floor);
    assert(rec == NULL || strlen(rec) <= WLEASE_REC_MAX);
    l->st.set_record(l->st.arg, rec);
    free(rec);
}

/* A fence write (the heartbeat too): WLEASE_*. */
static int
wl_write(struct wlease *l, int64_t fence_ms, int starting, char **cause)
{
    int64_t sent = util_mono_ms(), store_ms = 0, t0, t1;
    int rc;

    if (l->lost)
        return WLEASE_LOST;
    wl_set_record(l, fence_ms);
    t0 = wl_now(l);
    rc = l->st.fence(l->st.arg, atomic_load(&l->worker), l->nonce, fence_ms,
                     starting, &store_ms, cause);
    t1 = wl_now(l);
    l->last_write_mono = sent;
    if (rc == WLEASE_OK) {
        /* the store read its clock between t0 and t1: compare with the
         * middle, off by at most half the round trip */
        atomic_store(&l->offset_ms, store_ms - (t0 + (t1 - t0) / 2));
        atomic_store(&l->rtt_ms, t1 - t0);
        atomic_store(&l->measured, 1);
        atomic_fetch_add(&l->writes_ok, 1);
        l->last_ok_send_mono = sent;
        atomic_store(&l->last_hb_wall, util_wall_ms());
        atomic_store(&l->store_ms, store_ms);
        atomic_store(&l->store_fence, fence_ms);
        wl_set_error(l, NULL);
        return rc;
    }
    atomic_fetch_add(&l->writes_fail, 1);
    if (rc == WLEASE_LOST) {
        l->lost = 1;
        log_error("snowflake worker ID %" PRId64 " lost in %s: %s",
                  atomic_load(&l->worker), l->st.name,
                  *cause != NULL ? *cause : "?");
    } else if (wl_log_due(l)) {
        log_warn("snowflake: fence %" PRId64 " not confirmed by %s: %s",
                 fence_ms, l->st.name, *cause != NULL ? *cause : "?");
    }
    wl_set_error(l, *cause);
    return rc;
}

static int
wl_persist(void *arg, int64_t fence_ms, char **cause)
{
    struct wlease *l = arg;
    struct workerid_cache c;
    char *scause = NULL, *node;
    int rc;

    memset(&c, 0, sizeof c);
    c.leaf_name = l->leaf_name;
    c.source = (char *)wl_source(l);
    c.ip = l->ip;
    c.port = l->p.port;
    c.worker_id = atomic_load(&l->worker);
    c.datacenter_id = l->p.datacenter_id;
    c.fence_ms = fence_ms;
    c.nonce = l->nonce;
    c.layout = l->p.layout;
    node = l->st.node != NULL ? l->st.node(l->st.arg) : NULL;
    c.zk_node = node != NULL ? node : (char *)"";
    rc = workerid_cache_write(l->cache_path, &c, cause);
    free(node);
    if (rc == -1)
        return SNOWFLAKE_PERSIST_FAILED;
    l->last_fence = fence_ms;
    rc = wl_write(l, fence_ms, 0, &scause);
    if (rc == WLEASE_OK) {
        free(scause);
        return SNOWFLAKE_PERSIST_OK;
    }
    if (cause != NULL)
        *cause = xasprintf("fence %" PRId64 " not confirmed by %s: %s",
                           fence_ms, l->st.name, scause ? scause : "?");
    free(scause);
    return rc == WLEASE_LOST ? SNOWFLAKE_PERSIST_FAILED
                             : SNOWFLAKE_PERSIST_UNCONFIRMED;
}

/* From when on we must not issue: half the lease after the send time of the
 * last write that landed (the store stamped it no earlier); 0 without a
 * lease. */
static int64_t
wl_lease_until(void *arg)
{
    struct wlease *l = arg;

    if (l->p.lease_ms <= 0)
        return 0;
    return l->last_ok_send_mono + l->p.lease_ms / 2;
}

static int
wl_tick(void *arg, int64_t now_ms)
{
    struct wlease *l = arg;
    int64_t m = util_mono_ms();
    char *cause = NULL;
    int64_t until;
    int rc, expired, want;

    (void)now_ms;
    if (l->lost)
        return SNOWFLAKE_TICK_LOST;
    if (atomic_load(&l->worker) < 0) {
        if (m - l->last_try_mono < 1000)
            return SNOWFLAKE_TICK_NONE;
        l->last_try_mono = m;
        rc = wl_claim(l, &cause);
        if (rc != WLEASE_OK) {
            if (wl_log_due(l) || rc == WLEASE_REFUSED)
                log_error("snowflake: %s claim failed: %s", l->st.name,
                          cause != NULL ? cause : "?");
            wl_set_error(l, cause);
            free(cause);
            return SNOWFLAKE_TICK_NONE;
        }
        wl_set_error(l, NULL);
        return SNOWFLAKE_TICK_ACQUIRED;
    }
    if (l->last_fence > 0 && m - l->last_write_mono >= l->p.heartbeat_ms) {
        rc = wl_write(l, l->last_fence, 0, &cause);
        free(cause);
        if (rc == WLEASE_LOST)
            return SNOWFLAKE_TICK_LOST;
    }
    until = wl_lease_until(l);
    expired = until != 0 && m >= until;
    want = expired ? WL_HELD_LEASE : wl_clock_bad(l) ? WL_HELD_CLOCK
                                                     : WL_HELD_OK;
    if (want == l->held)
        return SNOWFLAKE_TICK_NONE;
    if (want == WL_HELD_CLOCK || l->held == WL_HELD_CLOCK)
        log_warn("snowflake: clock offset from %s %" PRId64 " ms (round "
                 "trip %" PRId64 " ms, limit %" PRId64 " ms)%s", l->st.name,
                 atomic_load(&l->offset_ms), atomic_load(&l->rtt_ms),
                 l->p.max_clock_offset_ms,
                 want == WL_HELD_CLOCK ? ": refusing" : ": within again");
    l->held = want;
    return want == WL_HELD_LEASE ? SNOWFLAKE_TICK_LEASE_EXPIRED :
           want == WL_HELD_CLOCK ? SNOWFLAKE_TICK_CLOCK_BAD :
                                   SNOWFLAKE_TICK_LEASE_OK;
}

static int
wl_worker(void *arg, int64_t *worker, int64_t *fence)
{
    return wlease_get(arg, worker, fence);
}

static const char *
wl_source(void *arg)
{
    struct wlease *l = arg;

    if (atomic_load(&l->worker) < 0)
        return "none";
    if (l->source != NULL)
        return l->source;
    return l->st.source != NULL ? l->st.source(l->st.arg) : l->st.name;
}

static int
wl_clock_offset(void *arg, int64_t *offset_ms)
{
    struct wlease *l = arg;

    /* ours relative to the store's: positive = we are ahead */
    *offset_ms = -atomic_load(&l->offset_ms);
    return atomic_load(&l->measured) ? 0 : -1;
}

/* The store's note on the epoch gate, while gate is that one (a cache
 * file's later fence, a later claim's, is not). */
static int
wl_gate_note(void *arg, int64_t gate, char *buf, size_t size)
{
    struct wlease *l = arg;
    int have;

    pthread_mutex_lock(&l->mu);
    have = l->gate_note != NULL && l->gate_note_at == gate;
    if (have)
        snprintf(buf, size, "%s", l->gate_note);
    pthread_mutex_unlock(&l->mu);
    return have;
}

static void
wl_close(void *arg)
{
    wlease_close(arg);
}

static void
wl_state_json(void *arg, struct sbuf *out)
{
    struct wlease *l = arg;
    int64_t hb = atomic_load(&l->last_hb_wall);
    int64_t sms = atomic_load(&l->store_ms);

    sbuf_puts(out, ",\"ip\":");
    sbuf_json_str(out, l->ip);
    sbuf_printf(out, ",\"port\":%d,\"identity\":", l->p.port);
    sbuf_json_str(out, l->identity);
    sbuf_puts(out, ",\"cache_file\":");
    sbuf_json_str(out, l->cache_path);
    sbuf_puts(out, ",\"store\":");
    sbuf_json_str(out, l->st.name);
    sbuf_printf(out, ",\"store_fence_ms\":%" PRId64,
                atomic_load(&l->store_fence));
    if (l->p.lease_ms > 0)
        sbuf_printf(out, ",\"lease_ms\":%" PRId64 ",\"lease_expires_ms\":",
                    l->p.lease_ms);
    else
        sbuf_puts(out, ",\"lease_ms\":null,\"lease_expires_ms\":");
    if (sms > 0 && l->p.lease_ms > 0)
        sbuf_printf(out, "%" PRId64, sms + l->p.lease_ms);
    else
        sbuf_puts(out, "null");
    sbuf_printf(out, ",\"release_on_stop\":%s",
                l->p.release_on_stop ? "true" : "false");
    sbuf_puts(out, ",\"clock_offset_ms\":");
    if (atomic_load(&l->measured))
        sbuf_printf(out, "%" PRId64 ",\"clock_rtt_ms\":%" PRId64,
                    -atomic_load(&l->offset_ms), atomic_load(&l->rtt_ms));
    else
        sbuf_puts(out, "null,\"clock_rtt_ms\":null");
    sbuf_puts(out, ",\"heartbeat_age_ms\":");
    if (hb > 0)
        sbuf_printf(out, "%" PRId64, util_wall_ms() - hb);
    else
        sbuf_puts(out, "null");
    pthread_mutex_lock(&l->mu);
    sbuf_puts(out, ",\"last_error\":");
    if (l->last_error != NULL)
        sbuf_json_str(out, l->last_error);
    else
        sbuf_puts(out, "null");
    pthread_mutex_unlock(&l->mu);
    if (l->st.state_json != NULL)
        l->st.state_json(l->st.arg, out);
}

static void
wl_metrics(void *arg, struct sbuf *out)
{
    struct wlease *l = arg;
    int64_t hb = atomic_load(&l->last_hb_wall);

    sbuf_metric_head(out, "leafd_snowflake_heartbeat_age_seconds", "gauge",
                     "Time since the last write reached the worker ID store "
                     "(-1 never).");
    if (hb > 0)
        sbuf_printf(out, "leafd_snowflake_heartbeat_age_seconds{source=\"%s\"}"
                    " %.3f\n", l->st.name,
                    (double)(util_wall_ms() - hb) / 1000.0);
    else
        sbuf_printf(out, "leafd_snowflake_heartbeat_age_seconds{source=\"%s\"}"
                    " -1\n", l->st.name);
    sbuf_metric_head(out, "leafd_snowflake_clock_offset_ms", "gauge",
                     "This node's clock minus the worker ID store's, "
                     "round-trip corrected (at the last heartbeat).");
    if (atomic_load(&l->measured))
        sbuf_printf(out, "leafd_snowflake_clock_offset_ms{source=\"%s\"} %"
                    PRId64 "\n", l->st.name, -atomic_load(&l->offset_ms));
    sbuf_metric_head(out, "leafd_snowflake_lease_seconds", "gauge",
                     "The lease (snowflake.takeover_age_ms): others may take "
                     "the worker ID this long after its last heartbeat (0: no "
                     "lease).");
    sbuf_printf(out, "leafd_snowflake_lease_seconds{source=\"%s\"} %.3f\n",
                l->st.name, (double)l->p.lease_ms / 1000.0);
    sbuf_metric_head(out, "leafd_snowflake_max_clock_offset_ms", "gauge",
                     "snowflake.max_clock_offset_ms: past this offset from "
                     "the store, no IDs (0: no check).");
    sbuf_printf(out, "leafd_snowflake_max_clock_offset_ms{source=\"%s\"} %"
                PRId64 "\n", l->st.name, l->p.max_clock_offset_ms);
    sbuf_metric_head(out, "leafd_snowflake_store_writes_total", "counter",
                     "Fence writes (heartbeats) to the worker ID store, by "
                     "result.");
    sbuf_printf(out, "leafd_snowflake_store_writes_total{source=\"%s\","
                "result=\"ok\"} %" PRIu64 "\n", l->st.name,
                atomic_load(&l->writes_ok));
    sbuf_printf(out, "leafd_snowflake_store_writes_total{source=\"%s\","
                "result=\"error\"} %" PRIu64 "\n", l->st.name,
                atomic_load(&l->writes_fail));
    if (l->st.metrics != NULL)
        l->st.metrics(l->st.arg, out);
}

char *
wlease_note_take(struct wlease_note *n, int64_t *gate)
{
    char *text = n->text;

    *gate = n->gate;
    n->text = NULL;
    return text;
}

void
wlease_rec_claim(struct wlease_rec *r, const char *rec, size_t len)
{
    wlease_rec_free(r);
    if (rec != NULL)
        r->claimed = xstrndup(rec, len < WLEASE_REC_MAX + 1 ? len
                                                            : WLEASE_REC_MAX + 1);
}

char *
wlease_rec_claimed(const struct wlease_rec *r)
{
    return r->claimed != NULL ? xstrdup(r->claimed) : NULL;
}

void
wlease_rec_set(struct wlease_rec *r, const char *rec)
{
    free(r->next);
    r->next = rec != NULL ? xstrdup(rec) : NULL;
}

const char *
wlease_rec_write(const struct wlease_rec *r)
{
    return r->next != NULL ? r->next : r->claimed;
}

void
wlease_rec_free(struct wlease_rec *r)
{
    free(r->claimed);
    free(r->next);
    r->claimed = r->next = NULL;
}

void *
wlease_store_arg(struct wlease *l)
{
    return l->st.arg;
}

void
wlease_backend(struct wlease *l, struct snowflake_backend *b)
{
    memset(b, 0, sizeof *b);
    b->persist = wl_persist;
    b->tick = wl_tick;
    b->worker = wl_worker;
    b->state_json = wl_state_json;
    b->metrics = wl_metrics;
    b->source = wl_source;
    b->clock_offset = wl_clock_offset;
    b->lease_until = wl_lease_until;
    b->gate_note = wl_gate_note;
    b->close = wl_close;
    b->arg = l;
}
