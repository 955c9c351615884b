/* workerid_lease.h: one lease rule for every shared store that hands out
 * snowflake worker IDs (ZooKeeper, Redis, MySQL, PostgreSQL: workerid_zk.h,
 * workerid_redis.h, workerid_mysql.h, workerid_pg.h). The store does
 * the claim, the fence write (which is the heartbeat), the release and the
 * clock reading behind struct wlease_store; the rule around it is here once.
 *
 * Ownership: wlease_open returns a struct wlease; once handed to
 * snowflake_create through wlease_backend the snowflake owns it and closes
 * it (which releases the worker ID when release_on_stop), else the caller
 * does with wlease_close (NULL is a no-op). The store is owned by the
 * lease from wlease_open on, also when it fails.
 * Failure values: wlease_open NULL with *cause (malloc'd).
 * Thread-safety: the backend's persist and tick run on the keeper thread
 * (or the opener before it starts); state_json, metrics and source may run
 * on any thread at the same time.
 */
#ifndef LEAFD_WORKERID_LEASE_H
#define LEAFD_WORKERID_LEASE_H

#include <stdint.h>

#include "snowflake.h"

/* What a store's claim is given. */
struct wlease_claim {
    const char *identity;   /* "<ip>:<port>", or "<namespace>/<pod>" */
    const char *alias;      /* "", or the identity's former name (k8s:
                               the bare pod name): a wanted ID it holds is
                               this identity's own */
    const char *nonce;      /* this process */
    const char *prev_nonce; /* the cache file's (our last run), or "" */
    int64_t     prev_worker;/* the cache file's worker ID, or -1 */
    int64_t     now_ms;     /* the taker's clock: fences must be below it */
    int64_t     lease_ms;   /* 0: no lease (a held ID is never taken) */
    uint64_t    min_worker; /* the range this node may hold (snowflake.
                               worker_id_min.._max; the whole field by
                               default): a claim takes only an ID inside
                               it, and "all in use" means all of it */
    uint64_t    max_worker;
    int64_t     want_worker;/* -1: any (the identity's own, else the lowest
                               free); else exactly this one, or refuse it
                               when another identity's lease on it is live
                               (DOWN, to try again, while its fence is not
                               yet below now_ms). The same
                               identity takes it back even from a live
                               lease (a k8s pod name runs once; the fence
                               gate keeps a stale run's IDs apart). */
    int64_t     unknown_gate_ms;/* Redis and MySQL: an ID the store has
                                   no record of (never used, or lost with
                                   the store's data), or whose record is
                                   older than the store's last going back
                                   in time, gates on the store's epoch
                                   (when its record began) or that time +
                                   this; ZooKeeper: a new node gates on its
                                   parent's creation + this */
};

enum {
    WLEASE_OK = 0,
    WLEASE_DOWN = -1,       /* store unreachable or slow: try again */
    WLEASE_REFUSED = -2,    /* claim: refused for good (twin, all in use) */
    WLEASE_LOST = -3        /* fence: another instance holds the ID now */
};

/* What a store's "all in use" refusal says to do: the range is the
 * node's (min_worker..max_worker), and never spills into another. */
#define WLEASE_FULL_HINT \
    ". The range is snowflake.worker_id_min..worker_id_max: stop a node " \
    "that holds one of them, wait for a stale one's lease to run out " \
    "(snowflake.release_on_stop frees one at a clean stop), or widen the " \
    "range, never into another datacenter's (docs/operations.md)"

/* A record the store keeps with each worker ID for a layer above this one
 * (the serial zones record, ids/serial_zones.h): opaque here, and carried
 * from holder to holder with the worker ID. The hook (in wlease_params;
 * zeroed: none) is told the record a claim found, before any ID of that
 * worker ID is issued, and gives the record each fence write carries. */
#define WLEASE_REC_MAX 16384
struct wlease_hook {
    /* rec: the store's record for the worker ID just claimed ("" none;
     * input from the store: any bytes up to a NUL), fence_ms: the fence
     * the claim gates on. */
    void  (*claimed)(void *arg, const char *rec, size_t len,
                     int64_t fence_ms);
    /* The record to write with fence_ms (malloc'd, at most WLEASE_REC_MAX
     * bytes), or NULL: keep the store's as it is. */
    char *(*record)(void *arg, int64_t fence_ms);
    void  *arg;
};

struct wlease_store {
    const char *name;                   /* "redis", "mysql", "postgresql",
                                           "zookeeper" */
    /* This identity's worker ID (reused, or the lowest free one, or
     * c->want_worker) and the fence it must pass. WLEASE_OK, _DOWN or
     * _REFUSED with *cause. */
    int  (*claim)(void *s, const struct wlease_claim *c, int64_t *worker,
                  int64_t *fence_ms, char **cause);
    /* Write fence_ms for worker if nonce still holds it; also renews the
     * lease. *store_ms: the store's clock at the write. starting: the
     * write that checks the clock at start, right after the claim, which
     * may take as long as a claim's call (a fence write in service must be
     * quick). WLEASE_OK, _DOWN, _LOST. */
    int  (*fence)(void *s, int64_t worker, const char *nonce,
                  int64_t fence_ms, int starting, int64_t *store_ms,
                  char **cause);
    /* Mark worker free for anyone past fence_ms (nonce must hold it). */
    int  (*release)(void *s, int64_t worker, const char *nonce,
                    int64_t fence_ms, char **cause);
    void (*close)(void *s);
    /* Optional (NULL: none). source: the name /snowflake/state gives while
     * an ID is held (NULL: name); node: where the ID is held, for the cache
     * file's "zk_node" (malloc'd, or NULL). state_json and metrics append
     * the store's own fields and series; any thread may call source,
     * state_json and metrics. */
    const char *(*source)(void *s);
    char *(*node)(void *s);
    void (*state_json)(void *s, struct sbuf *out);
    void (*metrics)(void *s, struct sbuf *out);
    /* Optional (NULL: none). After a claim that returned WLEASE_OK with
     * the epoch gate as the fence (the store had no record of the ID):
     * that gate, and what it is and how to skip it, for the operator
     * (malloc'd); else NULL. Called on the claiming thread. */
    char *(*epoch_note)(void *s, int64_t *gate);
    /* Optional (NULL: the store keeps no record; struct wlease_hook).
     * claimed_record: after a claim that returned WLEASE_OK, the record
     * the store held for that worker ID (malloc'd; NULL none). set_record:
     * the record later fence writes and the release carry (copied; NULL:
     * the one the claim found, unchanged). Called on the claiming and
     * keeper threads. */
    char *(*claimed_record)(void *s);
    void  (*set_record)(void *s, const char *rec);
    /* Optional (NULL: 0). The lowest timestamp a fence write puts in the
     * store (ZooKeeper: never below its claim's write): the record is
     * written relative to the fence the store holds. */
    int64_t (*fence_floor)(void *s);
    void *arg;
};

/* A store's epoch_note between its claim and the call (malloc'd text or
 * NULL, and the gate it is about). */
struct wlease_note {
    char    *text;
    int64_t  gate;
};

/* epoch_note's body: hand over n's text and gate, leaving n empty. */
char *wlease_note_take(struct wlease_note *n, int64_t *gate);

/* A store's copies of the record (struct wlease_hook): the one its last
 * claim found (NULL none), and set_record's (NULL: the claimed one). */
struct wlease_rec {
    char *claimed;
    char *next;
};

/* A claim's: claimed becomes len bytes of rec (at most WLEASE_REC_MAX + 1
 * kept, so that a longer one stays too long; rec NULL: none); next goes. */
void  wlease_rec_claim(struct wlease_rec *r, const char *rec, size_t len);
/* claimed_record's body: a copy of claimed, or NULL. */
char *wlease_rec_claimed(const struct wlease_rec *r);
/* set_record's body. */
void  wlease_rec_set(struct wlease_rec *r, const char *rec);
/* What the next write carries: next, else claimed (NULL: none). */
const char *wlease_rec_write(const struct wlease_rec *r);
void  wlease_rec_free(struct wlease_rec *r);

struct wlease_params {
    const char *identity;
    const char *alias;          /* wlease_claim's; NULL: none */
    const char *cache_path;
    const char *leaf_name;
    const char *ip;
    int         port;
    int64_t     datacenter_id;
    uint64_t    min_worker;     /* wlease_claim's range */
    uint64_t    max_worker;
    int         fixed_worker;   /* claim exactly worker_id (k8s: the pod's
                                   ordinal + offset), else any */
    int64_t     worker_id;
    int64_t     heartbeat_ms;
    int64_t     lease_ms;       /* others may take the ID this long after
                                   its last heartbeat (store's clock); 0:
                                   no lease, the store gives a held ID to
                                   nobody else (only a released one), so
                                   the holder never stops for it */
    int         release_on_stop;
    int64_t     max_clock_offset_ms; /* 0: no clock check */
    int64_t     unknown_gate_ms;/* fence_step + max_borrow +
                                   max_clock_offset: past anything a node
                                   issued under a record the store lost */
    const char *source;         /* /snowflake/state's source while an ID
                                   is held (NULL: the store's) */
    char        layout[64];     /* workerid_cache_layout's, recorded in
                                   and checked against the cache file;
                                   "": none */
    snowflake_clock_fn clock;   /* the taker's clock; NULL: wall clock */
    void       *clock_arg;
    struct wlease_hook hook;    /* the record kept with the worker ID;
                                   zeroed: none */
};

/* Claim a worker ID from the store, inside min_worker..max_worker. The
 * store unreachable at start is not a failure: no worker ID
 * (worker_id_unknown) until a claim succeeds in the background; the cache
 * file's worker ID is not used meanwhile, as no fence could be confirmed.
 * Fails on a corrupt cache file, a range that is empty, a fixed_worker
 * outside it, and on a refused claim (a live twin of this identity, every
 * worker ID of the range in use; with fixed_worker, that ID held by another
 * identity). */
struct wlease *wlease_open(const struct wlease_params *p,
                           const struct wlease_store *store, char **cause);
void wlease_close(struct wlease *l);
/* The worker ID (-1 unknown) and the fence it must pass. */
int  wlease_get(struct wlease *l, int64_t *worker, int64_t *fence_ms);
void wlease_backend(struct wlease *l, struct snowflake_backend *b);

/* --- for tests only: nothing in src/ calls these --------------------- */

/* The store's arg, for the store's own accessors (workerid_zk_node). Valid
 * until the lease is closed. */
void *wlease_store_arg(struct wlease *l);

#endif
