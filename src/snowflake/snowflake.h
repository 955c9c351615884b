/* snowflake.h: snowflake mode's generator, which keeps one worker ID from
 * ever issuing the same ID twice (the clock rule, see the DESIGN comment in
 * snowflake.c). The ID layout is sfcodec.h; starting from the config (the
 * worker ID source) is sfconfig.h.
 *
 * Ownership: sfconfig_start/snowflake_create return a struct snowflake the
 * caller ends with snowflake_stop (NULL is a no-op). *cause strings are
 * malloc'd; the caller frees them.
 *
 * Failure values: constructors return NULL with *cause; actions return 0 or
 * -1 with *cause; snowflake_next returns SNOWFLAKE_OK, SNOWFLAKE_WAIT or
 * SNOWFLAKE_REFUSE.
 *
 * Thread-safety: snowflake_next, snowflake_decode_json, snowflake_state_json,
 * snowflake_health and snowflake_metrics may be called from any thread at
 * once. snowflake_next is lock-free and makes no system call besides reading
 * the clock (vDSO). Start (sfconfig_start, snowflake_create) and
 * snowflake_stop are called once each, from the main
 * thread. The wake callback runs on the keeper thread.
 */
#ifndef LEAFD_SNOWFLAKE_H
#define LEAFD_SNOWFLAKE_H

#include <stddef.h>
#include <stdint.h>

#include "sfcodec.h"
#include "util.h"

struct snowflake;

/* --- the generator ----------------------------------------------------- */

enum { SNOWFLAKE_OK = 0, SNOWFLAKE_WAIT = 1, SNOWFLAKE_REFUSE = 2 };

/* Why snowflake_next did not answer SNOWFLAKE_OK. code is a stable static
 * string:
 *   SNOWFLAKE_WAIT:
 *              "borrow_limit"     sequence used up this far ahead of the clock
 *              "fence_pending"    the keeper has not yet persisted a fence
 *                                 far enough (it has been poked)
 *              "fence_not_passed" just started: the clock has not yet passed
 *                                 the persisted fence (within start_wait_ms)
 *   SNOWFLAKE_REFUSE:
 *              "clock_behind"     the clock went back more than
 *                                 max_backward_ms; wait_ms = until it is
 *                                 back within the limit
 *              "fence_not_passed" the clock is too far behind the persisted
 *                                 fence to wait for
 *              "fence_pending"    the fence cannot be persisted (disk error)
 *              "fence_unconfirmed" ZooKeeper does not hold a fence this far
 *                                 (unreachable or slow): another process
 *                                 could inherit the worker ID and gate on
 *                                 the node, so nothing past it is issued
 *              "worker_id_unknown" no worker ID yet (ZooKeeper down at
 *                                 start); retried in the background
 *              "worker_id_lost"   ZooKeeper says another node owns this
 *                                 worker ID now (or the registration is gone)
 *              "worker_lease_expired" takeover is on and no heartbeat reached
 *                                 ZooKeeper for takeover_age_ms / 2 (Redis,
 *                                 MySQL: the lease, always on)
 *              "clock_offset"     the clock is further from the worker ID
 *                                 store's than snowflake.max_clock_offset_ms
 *              "layout_expired"   the timestamp field has run out
 *              "bad_count"        n is 0 or over snowflake.count_max
 * wait_ms: SNOWFLAKE_WAIT: retry after this many ms (>= 1);
 * SNOWFLAKE_REFUSE: ms until it may succeed, 0 when unknown. retry_after_s:
 * for a Retry-After header (>= 1). message: human text with the numbers. */
struct snowflake_refusal {
    const char *code;
    int64_t     wait_ms;
    int         retry_after_s;
    char        message[512];
};

typedef int64_t (*snowflake_clock_fn)(void *arg);          /* ms since 1970 */
typedef void    (*snowflake_wake_fn)(void *arg);

/* Stop the keeper thread, persist the last timestamp issued as the fence
 * (call only once nothing can call snowflake_next any more), and close
 * ZooKeeper. NULL is a no-op. */
void snowflake_stop(struct snowflake *sf);

/* n IDs (1 <= n <= snowflake.count_max) into out, strictly increasing;
 * with snowflake.sequence_random, a millisecond whose sequence wraps
 * (docs/id-kinds.md) gives its later IDs below its earlier ones, while the
 * timestamps never go back. */
int  snowflake_next(struct snowflake *sf, uint32_t n, uint64_t *out,
                    struct snowflake_refusal *why);

const struct sfcodec_layout *snowflake_layout(const struct snowflake *sf);
/* The worker ID in use, or -1 while it is unknown (one atomic load). */
int64_t snowflake_worker_id(struct snowflake *sf);
/* GET /snowflake/decode/<id> (leaf_format 0) or /decodeSnowflakeId (1):
 * appends the JSON to out. Returns 0, or -1 with *cause for a bad ID. */
int  snowflake_decode_json(const struct snowflake *sf, const char *s,
                           size_t len, int leaf_format, struct sbuf *out,
                           char **cause);
/* GET /snowflake/state: worker ID and its source (static, zookeeper, cache,
 * takeover, none), layout, last timestamp, persisted fence, ZooKeeper node
 * path and session state, current refusal if any. */
void snowflake_state_json(struct snowflake *sf, struct sbuf *out);
/* 0 when IDs can be issued now; else -1 and *reason (malloc'd). */
int  snowflake_health(struct snowflake *sf, char **reason);
/* Appends "worker_id":N|null[,"datacenter_id":N],"worker_id_min":N,
 * "worker_id_max":N (the datacenter ID when the layout has datacenter
 * bits; the range this node's worker ID must be in), for /health and
 * /snowflake/state. */
void snowflake_identity_json(struct snowflake *sf, struct sbuf *out);
/* Prometheus text, every name prefixed leafd_snowflake_. */
void snowflake_metrics(struct snowflake *sf, struct sbuf *out);

/* --- lower level: sfconfig.c, the worker ID backends and tests ------- */

/* What the keeper uses to persist fences and keep the worker ID. */
/* What persist returns. */
enum {
    SNOWFLAKE_PERSIST_OK = 0,
    SNOWFLAKE_PERSIST_FAILED = -1,      /* not durable (disk error, lost) */
    SNOWFLAKE_PERSIST_UNCONFIRMED = -2   /* in the file, but ZooKeeper, which
                                     another owner gates on, does not hold it */
};

struct snowflake_backend {
    /* Make fence durable (file, ZooKeeper): SNOWFLAKE_PERSIST_*, *cause
     * when not OK. */
    int  (*persist)(void *arg, int64_t fence_ms, char **cause);
    /* Periodic upkeep (heartbeat, reconnect); returns SNOWFLAKE_TICK_*.
     * May be NULL. */
    int  (*tick)(void *arg, int64_t now_ms);
    /* On SNOWFLAKE_TICK_ACQUIRED: the worker ID and the fence it must pass. */
    int  (*worker)(void *arg, int64_t *worker_id, int64_t *fence_ms);
    /* Extras, each may be NULL: state_json appends ,"key":value pairs to
     * the state object; metrics appends Prometheus text; source names the
     * worker ID's origin. Called from any thread. */
    void (*state_json)(void *arg, struct sbuf *out);
    void (*metrics)(void *arg, struct sbuf *out);
    const char *(*source)(void *arg);
    /* The last measured offset of the store's clock from ours (ms); 0 or
     * -1 when not measured. May be NULL. */
    int  (*clock_offset)(void *arg, int64_t *offset_ms);
    /* The monotonic ms (util_mono_ms) from which no ID may be issued: the
     * holder's side of a lease that others may take over once it expires
     * (0: no lease). Read by the keeper after each tick and persist; the
     * request path refuses (worker_lease_expired) from then on, also while
     * the keeper is stuck in a store call. May be NULL. */
    int64_t (*lease_until)(void *arg);
    /* Why the start gate is gate when it is not a persisted fence (a
     * store's new/wiped-store epoch gate): 1 with the text in buf, else 0.
     * For the refusal before the clock passes it. May be NULL. */
    int  (*gate_note)(void *arg, int64_t gate, char *buf, size_t size);
    void (*close)(void *arg);
    void *arg;
};

enum {
    SNOWFLAKE_TICK_NONE,          /* nothing changed */
    SNOWFLAKE_TICK_ACQUIRED,      /* a worker ID is now known (was unknown) */
    SNOWFLAKE_TICK_LOST,          /* the worker ID must not be used any more */
    SNOWFLAKE_TICK_LEASE_EXPIRED, /* stop issuing until LEASE_OK */
    SNOWFLAKE_TICK_LEASE_OK,      /* issuing again (lease and clock fine) */
    SNOWFLAKE_TICK_CLOCK_BAD      /* clock too far off the store's: stop
                                     issuing until LEASE_OK */
};

struct snowflake_options {
    struct sfcodec_layout layout;
    int64_t   worker_id;          /* -1: unknown until the backend has it */
    int64_t   datacenter_id;
    int       worker_range;       /* 1: the worker ID must be inside
                                     worker_min..worker_max (refused
                                     otherwise); 0: anywhere in the field */
    int64_t   worker_min;
    int64_t   worker_max;
    int64_t   start_fence_ms;     /* issue nothing at or below this */
    int       sequence_random;
    int64_t   sequence_random_bound;
    int64_t   max_backward_ms;
    int64_t   max_borrow_ms;
    int64_t   fence_step_ms;
    int64_t   start_wait_ms;
    uint32_t  count_max;
    snowflake_clock_fn clock;            /* NULL: CLOCK_REALTIME */
    void     *clock_arg;
    snowflake_wake_fn wake;
    void     *wake_arg;
    struct snowflake_backend backend;    /* persist is required */
    int       no_thread;          /* tests: no keeper thread, call
                                     snowflake_keeper_step yourself */
};

/* Build the generator, persist a first fence (when the worker ID is known),
 * start the keeper thread unless no_thread. NULL with *cause on failure (the
 * backend is closed then too). */
struct snowflake *snowflake_create(const struct snowflake_options *o,
                                   char **cause);
/* One pass of the keeper: persist a further fence when due or asked, tick
 * the backend, wake waiters. */
void snowflake_keeper_step(struct snowflake *sf);

/* --- for tests only: nothing in src/ calls these --------------------- */

/* The persisted fence the request path checks against. */
int64_t snowflake_fence(struct snowflake *sf);

#endif
