/* snowflake.h: snowflake mode: the ID layout, decoding, and the generator
 * that keeps one worker ID from ever issuing the same ID twice (the clock
 * rule, see the DESIGN comment in snowflake.c).
 *
 * An ID is, from the high bit down: 0 | timestamp | datacenter | worker |
 * sequence, with the timestamp in ms since the layout's epoch. Defaults are
 * Leaf's: 41 bits of ms since 1288834974657, 10 worker bits, 12 sequence
 * bits, no datacenter bits.
 *
 * Ownership: snowflake_start/snowflake_create return a struct snowflake the
 * caller ends with snowflake_stop (NULL is a no-op). *cause strings are
 * malloc'd; the caller frees them.
 *
 * Failure values: constructors return NULL with *cause; actions return 0 or
 * -1 with *cause; snowflake_next returns SF_OK, SF_WAIT or SF_REFUSE.
 *
 * Thread-safety: snowflake_next, the decode functions, snowflake_state_json,
 * snowflake_health and snowflake_metrics may be called from any thread at
 * once. snowflake_next is lock-free and makes no system call besides reading
 * the clock (vDSO). snowflake_start/stop are called once, from the main
 * thread. The wake callback runs on the keeper thread.
 */
#ifndef LEAFD_SNOWFLAKE_H
#define LEAFD_SNOWFLAKE_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct config;
struct snowflake;

/* --- layout ------------------------------------------------------------ */

#define SF_LEAF_EPOCH_MS 1288834974657LL

struct sf_layout {
    int64_t  epoch_ms;
    int      timestamp_bits;
    int      datacenter_bits;     /* 0: no datacenter field */
    int      worker_bits;         /* the worker field without the datacenter */
    int      sequence_bits;
    int      worker_shift;        /* = sequence_bits */
    int      datacenter_shift;    /* = sequence_bits + worker_bits */
    int      timestamp_shift;     /* = the three below it */
    uint64_t max_timestamp;       /* highest ms offset from the epoch */
    uint64_t max_datacenter;
    uint64_t max_worker;
    uint64_t max_sequence;
};

/* Set up and check a layout: bits each >= 0 (timestamp, sequence >= 1),
 * summing to 63; epoch not in the future; the timestamp must not run out
 * within margin_days of now_ms. now_ms < 0 skips the time checks (decoding
 * only). Returns 0 or -1 with *cause. */
int  sf_layout_init(struct sf_layout *l, int64_t epoch_ms, int timestamp_bits,
                    int datacenter_bits, int worker_bits, int sequence_bits,
                    int64_t now_ms, int64_t margin_days, char **cause);
/* The same from cfg's snowflake.* keys. */
int  sf_layout_from_config(struct sf_layout *l, const struct config *cfg,
                           int64_t now_ms, char **cause);
/* The last ms (since the Unix epoch) the timestamp field can hold. */
int64_t sf_layout_end_ms(const struct sf_layout *l);
/* One line for the start log: bits, epoch, highest worker ID, IDs per ms and
 * the UTC date the timestamp runs out. malloc'd. */
char *sf_layout_describe(const struct sf_layout *l);
/* "2019-09-06T01:35:00.834Z" into buf (>= 32 bytes). */
void sf_format_utc(int64_t unix_ms, char *buf, size_t size);

/* Put the fields together; ts_ms is ms since the Unix epoch. No checks. */
uint64_t sf_pack(const struct sf_layout *l, int64_t ts_ms, uint64_t datacenter,
                 uint64_t worker, uint64_t sequence);

struct sf_decoded {
    uint64_t id;
    int64_t  timestamp_ms;        /* since the Unix epoch */
    char     time[32];            /* ISO-8601 UTC with ms */
    uint64_t datacenter_id;       /* 0 when the layout has no datacenter */
    uint64_t worker_id;           /* without the datacenter bits */
    uint64_t sequence;
    int      has_datacenter;
};

/* Parse a decimal ID strictly: digits only, no sign, no space, no leading
 * zero, no overflow, bit 63 clear. Returns 0 or -1 with *cause. */
int  sf_decode(const struct sf_layout *l, const char *s, size_t len,
               struct sf_decoded *d, char **cause);
/* {"id":"...","timestamp":ms,"time":"...","worker_id":n,"sequence":n
 *  [,"datacenter_id":n]} appended to b. */
void sf_decoded_json(const struct sf_decoded *d, struct sbuf *b);
/* Leaf's /decodeSnowflakeId answer, every value a string like Leaf's:
 * {"timestamp":"1567733700834(2019-09-06 09:35:00.834)","sequenceId":"3448",
 *  "workerId":"39"}. Like Leaf (SimpleDateFormat) the date is in the local
 * time zone; workerId is the whole worker field (datacenter included), and
 * "datacenterId" is added when the layout splits it. On a bad ID Leaf
 * answers 200 {"errorMsg":"..."}; the caller decides (sf_decode failed). */
void sf_decoded_leaf_json(const struct sf_layout *l, const struct sf_decoded *d,
                          struct sbuf *b);

/* For `leafd decode <id>`: the layout from cfg, no time checks; appends the
 * same JSON as GET /snowflake/decode/<id> (leaf_format: Leaf's) to out.
 * Returns 0 or -1 with *cause. */
int  snowflake_decode_cli(const struct config *cfg, const char *id,
                          int leaf_format, struct sbuf *out, char **cause);

/* --- the generator ----------------------------------------------------- */

enum { SF_OK = 0, SF_WAIT = 1, SF_REFUSE = 2 };

/* Why snowflake_next did not answer SF_OK. code is a stable static string:
 *   SF_WAIT:   "borrow_limit"     sequence used up this far ahead of the clock
 *              "fence_pending"    the keeper has not yet persisted a fence
 *                                 far enough (it has been poked)
 *              "fence_not_passed" just started: the clock has not yet passed
 *                                 the persisted fence (within start_wait_ms)
 *   SF_REFUSE: "clock_behind"     the clock went back more than
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
 *                                 ZooKeeper for takeover_age_ms / 2
 *              "layout_expired"   the timestamp field has run out
 *              "bad_count"        n is 0 or over snowflake.count_max
 * wait_ms: SF_WAIT: retry after this many ms (>= 1); SF_REFUSE: ms until it
 * may succeed, 0 when unknown. retry_after_s: for a Retry-After header
 * (>= 1). message: human text with the numbers. */
struct sf_refusal {
    const char *code;
    int64_t     wait_ms;
    int         retry_after_s;
    char        message[200];
};

typedef int64_t (*sf_clock_fn)(void *arg);          /* ms since 1970 */
typedef void    (*sf_wake_fn)(void *arg);

/* Start snowflake mode from cfg: check the layout (refused if it ran out or
 * runs out within snowflake.expiry_margin_days), get the worker ID (static,
 * or ZooKeeper with the cache file; may block up to about
 * snowflake.zk_session_timeout_ms when ZooKeeper is slow or down), persist a
 * first fence, start the keeper thread, and log the layout. http_port is the
 * bound HTTP port (the ZooKeeper registration uses leaf.snowflake.port, or
 * this when that is 0). wake (may be NULL) is called from the keeper thread
 * when requests that got SF_WAIT (or worker_id_unknown) may succeed now.
 * Returns NULL with *cause on a configuration error, an exhausted worker ID
 * space, a corrupt or unwritable cache file. */
struct snowflake *snowflake_start(const struct config *cfg, int http_port,
                                  sf_wake_fn wake, void *wake_arg,
                                  char **cause);
/* Stop the keeper thread, persist the last timestamp issued as the fence
 * (call only once nothing can call snowflake_next any more), and close
 * ZooKeeper. NULL is a no-op. */
void snowflake_stop(struct snowflake *sf);

/* n IDs (1 <= n <= snowflake.count_max) into out, strictly increasing. */
int  snowflake_next(struct snowflake *sf, uint32_t n, uint64_t *out,
                    struct sf_refusal *why);

const struct sf_layout *snowflake_layout(const struct snowflake *sf);
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
/* Prometheus text, every name prefixed leafd_snowflake_. */
void snowflake_metrics(struct snowflake *sf, struct sbuf *out);

/* --- lower level, for tests -------------------------------------------- */

/* What the keeper uses to persist fences and keep the worker ID. */
/* What persist returns. */
enum {
    SF_PERSIST_OK = 0,
    SF_PERSIST_FAILED = -1,       /* not durable (disk error, worker lost) */
    SF_PERSIST_UNCONFIRMED = -2   /* in the file, but ZooKeeper, which
                                     another owner gates on, does not hold it */
};

struct sf_backend {
    /* Make fence durable (file, ZooKeeper): SF_PERSIST_*, *cause when not
     * OK. */
    int  (*persist)(void *arg, int64_t fence_ms, char **cause);
    /* Periodic upkeep (heartbeat, reconnect); returns SF_TICK_*. May be NULL. */
    int  (*tick)(void *arg, int64_t now_ms);
    /* On SF_TICK_ACQUIRED: the worker ID and the fence it must pass. */
    int  (*worker)(void *arg, int64_t *worker_id, int64_t *fence_ms);
    /* Extras, each may be NULL: state_json appends ,"key":value pairs to
     * the state object; metrics appends Prometheus text; source names the
     * worker ID's origin. Called from any thread. */
    void (*state_json)(void *arg, struct sbuf *out);
    void (*metrics)(void *arg, struct sbuf *out);
    const char *(*source)(void *arg);
    void (*close)(void *arg);
    void *arg;
};

enum {
    SF_TICK_NONE,          /* nothing changed */
    SF_TICK_ACQUIRED,      /* a worker ID is now known (was unknown) */
    SF_TICK_LOST,          /* the worker ID must not be used any more */
    SF_TICK_LEASE_EXPIRED, /* stop issuing until SF_TICK_LEASE_OK */
    SF_TICK_LEASE_OK
};

struct sf_options {
    struct sf_layout layout;
    int64_t   worker_id;          /* -1: unknown until the backend acquires it */
    int64_t   datacenter_id;
    int64_t   start_fence_ms;     /* issue nothing at or below this */
    int       sequence_random;
    int64_t   sequence_random_bound;
    int64_t   max_backward_ms;
    int64_t   max_borrow_ms;
    int64_t   fence_step_ms;
    int64_t   start_wait_ms;
    uint32_t  count_max;
    sf_clock_fn clock;            /* NULL: CLOCK_REALTIME */
    void     *clock_arg;
    sf_wake_fn wake;
    void     *wake_arg;
    struct sf_backend backend;    /* persist is required */
    int       no_thread;          /* tests: no keeper thread, call
                                     snowflake_keeper_step yourself */
};

/* Build the generator, persist a first fence (when the worker ID is known),
 * start the keeper thread unless no_thread. NULL with *cause on failure (the
 * backend is closed then too). */
struct snowflake *snowflake_create(const struct sf_options *o, char **cause);
/* One pass of the keeper: persist a further fence when due or asked, tick
 * the backend, wake waiters. */
void snowflake_keeper_step(struct snowflake *sf);
/* The persisted fence the request path checks against. */
int64_t snowflake_fence(struct snowflake *sf);

#endif
