/* snowflake_internal.h: the generator's state, shared by snowflake.c (the
 * generator and its keeper thread) and snowflake_state.c (its state page,
 * health and metrics). Not for other modules: they use snowflake.h. */
#ifndef LEAFD_SNOWFLAKE_INTERNAL_H
#define LEAFD_SNOWFLAKE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "sfcodec.h"
#include "snowflake.h"
#include "util.h"

enum { SF_ST_OK, SF_ST_UNKNOWN, SF_ST_LOST, SF_ST_LEASE, SF_ST_CLOCK };

/* refusal/wait codes, for counting */
enum {
    SF_C_BORROW_LIMIT,
    SF_C_FENCE_PENDING,
    SF_C_FENCE_NOT_PASSED,
    SF_C_CLOCK_BEHIND,
    SF_C_WORKER_UNKNOWN,
    SF_C_WORKER_LOST,
    SF_C_LEASE,
    SF_C_LAYOUT_EXPIRED,
    SF_C_BAD_COUNT,
    SF_C_FENCE_UNCONFIRMED,
    SF_C_CLOCK_OFFSET,
    SF_NCODES
};

static const char *const sf_code_names[SF_NCODES] = {
    "borrow_limit", "fence_pending", "fence_not_passed", "clock_behind",
    "worker_id_unknown", "worker_id_lost", "worker_lease_expired",
    "layout_expired", "bad_count", "fence_unconfirmed", "clock_offset",
};

/* histogram of clock steps back, ms */
static const int64_t sf_bw_bounds[] = {1, 5, 10, 50, 100, 500, 1000, 5000,
                                       60000, 3600000};
#define SF_NBW (sizeof sf_bw_bounds / sizeof sf_bw_bounds[0])

struct snowflake {
    /* The generator state (t << sequence_bits | seq): the contended word. */
    _Alignas(64) _Atomic uint64_t state;

    /* Read by every request, written rarely. */
    _Alignas(64) _Atomic int64_t hw;        /* highest clock served (unix ms) */
    _Atomic int64_t  fence;                 /* persisted fence (unix ms) */
    _Atomic int64_t  gate;                  /* nothing while now <= gate */
    _Atomic int64_t  gate_deadline;         /* mono ms: after it, refuse */
    _Atomic int64_t  lease_until;           /* mono ms: from it, refuse;
                                               0 no lease (backend) */
    _Atomic int      status;                /* SF_ST_* */
    _Atomic uint64_t worker_field;          /* datacenter|worker, shifted */
    _Atomic int      in_backward;           /* a step back is being served */
    _Atomic int      persist_failing;       /* 0, or the failed result */

    /* Set at creation, read-only afterwards. */
    struct sfcodec_layout layout;
    int64_t          datacenter_id;
    int64_t          worker_min;            /* the range a worker ID must */
    int64_t          worker_max;            /* be in (the whole field
                                               without one) */
    int              seq_random;
    uint64_t         seq_bound;
    int64_t          max_backward_ms;
    int64_t          max_borrow_ms;
    int64_t          fence_step_ms;
    int64_t          start_wait_ms;
    uint32_t         count_max;
    snowflake_clock_fn      clock;
    void            *clock_arg;
    snowflake_wake_fn       wake;
    void            *wake_arg;
    struct snowflake_backend backend;

    /* Counters (relaxed atomics). */
    _Alignas(64) _Atomic uint64_t ids_total;
    _Atomic uint64_t requests_total;
    _Atomic uint64_t borrowed_ms;
    _Atomic uint64_t answers[SF_NCODES][2]; /* [code][0 wait, 1 refuse] */
    _Atomic uint64_t bw_events;
    _Atomic uint64_t bw_sum_ms;
    _Atomic uint64_t bw_buckets[SF_NBW];
    _Atomic uint64_t persist_failures;
    _Atomic uint64_t fence_writes;

    /* Pokes from the request path to the keeper. */
    _Alignas(64) _Atomic int64_t need;      /* a fence >= this is wanted */
    _Atomic int      poked;
    _Atomic int      waiters;               /* someone got SNOWFLAKE_WAIT */
    _Atomic int64_t  worker_id;             /* -1 unknown; for state/metrics */

    /* Keeper thread. Lock rule: mu guards stop and the cond wait only;
     * everything else the keeper touches is atomic or keeper-private. */
    pthread_t        thread;
    int              thread_started;
    pthread_mutex_t  mu;
    pthread_cond_t   cv;
    int              stop;
    int              gate_pending;          /* keeper-private */
    int64_t          last_fail_log_mono;    /* keeper-private */
    char             persist_error[200];    /* guarded by mu */
};

/* The clock the generator reads (the injected one, or the wall). */
static inline int64_t
sf_now(const struct snowflake *sf)
{
    return sf->clock != NULL ? sf->clock(sf->clock_arg) : util_wall_ms();
}

/* The ms of the last ID issued (unix ms). */
static inline int64_t
sf_last_ms(struct snowflake *sf)
{
    uint64_t st = atomic_load(&sf->state);
    return (int64_t)(st >> sf->layout.sequence_bits) + sf->layout.epoch_ms;
}

#endif
