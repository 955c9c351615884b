/* snowflake.c: snowflake mode's generator and its keeper thread (see
 * snowflake.h); the ID layout is sfcodec.c, worker IDs and fences come from
 * a backend (workerid.c for a static or k8s worker ID, workerid_lease.c for
 * the stores; sfconfig.c wires it up).
 *
 * DESIGN: the clock rule. One worker ID never issues the same ID twice,
 * whatever the wall clock does, while running or across restarts.
 *
 * 1. A logical clock. The generator state is one 64-bit word (t, seq): the ms
 *    (since the layout's epoch) and sequence of the last ID issued. A request
 *    reads the wall clock `now` and takes t' = max(now, t); at t' == t it
 *    continues the sequence, and when the sequence is used up it moves to
 *    t + 1 even before the wall clock gets there (borrowing). The new state is
 *    installed with one compare-and-swap, so (t, seq) only ever grows and two
 *    threads never get the same pair. IDs are (t, worker, seq) packed, so
 *    they are unique and increase with the state (with sequence_random the
 *    printed sequence is seq plus a per-ms offset modulo its size, still
 *    one-to-one per ms: unique, and increasing except across that wrap).
 * 2. Bounds, never a spin. Borrowing stops max_borrow_ms ahead of the highest
 *    clock reading served so far (`hw`): the caller gets SNOWFLAKE_WAIT with
 *    the ms to wait. If the clock steps back (now < hw), up to
 *    max_backward_ms is served seamlessly from t as above; further back is
 *    refused (clock_behind) with the time until it is back within the limit.
 * 3. The fence survives restarts. No ID with timestamp t is issued unless a
 *    fence F >= t has been made durable first: the backend's persist
 *    returned SNOWFLAKE_PERSIST_OK. For the static source that is the cache
 *    file (fsync and rename); with ZooKeeper it is the node's timestamp too, as
 *    another process may inherit the worker ID and gates on the node alone
 *    (SNOWFLAKE_PERSIST_UNCONFIRMED keeps F where it was: fence_unconfirmed).
 *    The keeper thread moves F to (now + fence_step_ms) whenever less than
 *    half a step is left, so the request path never does I/O; a request that
 *    would pass F (the clock jumped ahead) gets fence_pending and pokes the
 *    keeper. At start the fence read back (cache file and ZooKeeper, the
 *    larger) is a gate: nothing is issued until the clock has passed it, and
 *    the state starts at (gate, full) so the first ID is above it. Every ID
 *    issued before the restart had t <= that fence, every one after has
 *    t > it.
 * 4. A worker ID from ZooKeeper (reused or taken over) gets as gate what
 *    its node holds: a leafd fence as it is, a Java Leaf heartbeat plus one
 *    heartbeat interval and a margin (workerid_zk.c's DESIGN comment).
 *    Who may take a worker ID over, and the gates of Redis and MySQL, are
 *    the lease rule: workerid_lease.c's DESIGN comment.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "csprng.h"
#include "log.h"
#include "snowflake.h"
#include "snowflake_internal.h"
#include "util.h"

#define SF_KEEPER_TICK_MS 20

/* --- layout and decoding (sfcodec.c does the work) -------------------- */

int
snowflake_decode_json(const struct snowflake *sf, const char *s, size_t len,
                      int leaf_format, struct sbuf *out, char **cause)
{
    return sfcodec_decode_to_json(&sf->layout, s, len, leaf_format, out, cause);
}

const struct sfcodec_layout *
snowflake_layout(const struct snowflake *sf)
{
    return &sf->layout;
}

int64_t
snowflake_worker_id(struct snowflake *sf)
{
    return atomic_load(&sf->worker_id);
}

/* --- the generator ----------------------------------------------------- */

/* The sequence offset of ms t (since the layout's epoch): with
 * sequence_random, a keyed mix of t below snowflake.sequence_random_bound;
 * else 0. The state (t, s) counts the IDs of ms t (s = how many - 1); the
 * ID's sequence field is (s + offset(t)) mod 2^sequence_bits, so the count
 * runs through every value of the field once (the random start is where it
 * begins, not values it skips), and all threads and retries agree on it
 * because it depends on t alone. The key is drawn at creation; the mix is
 * not a cryptographic function and the offset is no secret from someone
 * who sees many IDs (docs/id-kinds.md, "Snowflake: what sequence_random
 * hides"). */
static inline uint64_t
sf_seq_offset(const struct snowflake *sf, int64_t t)
{
    uint64_t z;

    if (!sf->seq_random)
        return 0;
    z = ((uint64_t)t ^ sf->seq_key[0]) * UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27) ^ sf->seq_key[1]) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return z % sf->seq_bound;
}

/* Where n more IDs after state `old` end, with the clock at nowr (ms since
 * the layout's epoch). Returns the last timestamp; *borrowed is how many ms
 * that is beyond max(old t, nowr). */
static int64_t
sf_plan(const struct snowflake *sf, uint64_t old, int64_t nowr, uint32_t n,
        uint64_t *nstate, int64_t *borrowed)
{
    int S = sf->layout.sequence_bits;
    int64_t M = (int64_t)sf->layout.max_sequence;
    int64_t t = (int64_t)(old >> S), s = (int64_t)(old & (uint64_t)M);
    int64_t t0 = t, left = n;

    if (nowr > t) {
        t = t0 = nowr;
        s = -1;
    }
    for (;;) {
        int64_t avail = M - s;
        if (avail >= left) {
            s += left;
            break;
        }
        left -= avail;
        t++;
        s = -1;
    }
    *borrowed = t - t0;
    *nstate = ((uint64_t)t << S) | (uint64_t)s;
    return t;
}

/* The IDs sf_plan counted, from state old. */
static void
sf_fill(const struct snowflake *sf, uint64_t old, int64_t nowr, uint32_t n,
        uint64_t wf, uint64_t *out)
{
    int S = sf->layout.sequence_bits, TS = sf->layout.timestamp_shift;
    int64_t M = (int64_t)sf->layout.max_sequence;
    int64_t t = (int64_t)(old >> S), s = (int64_t)(old & (uint64_t)M);
    uint64_t off;

    if (nowr > t) {
        t = nowr;
        s = -1;
    }
    off = sf_seq_offset(sf, t);
    for (uint32_t i = 0; i < n; i++) {
        if (s == M) {
            t++;
            s = -1;
            off = sf_seq_offset(sf, t);
        }
        s++;
        out[i] = ((uint64_t)t << TS) | wf | (((uint64_t)s + off) & (uint64_t)M);
    }
}

static int64_t
sf_div_up(int64_t ms)
{
    return ms <= 0 ? 1 : (ms + 999) / 1000;
}

static int
sf_answer(struct snowflake *sf, struct snowflake_refusal *why, int kind,
          int code, int64_t wait_ms, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Fill *why and count it. Only on the non-OK path. */
static int
sf_answer(struct snowflake *sf, struct snowflake_refusal *why, int kind,
          int code, int64_t wait_ms, const char *fmt, ...)
{
    va_list ap;

    atomic_fetch_add_explicit(&sf->answers[code][kind == SNOWFLAKE_REFUSE], 1,
                              memory_order_relaxed);
    if (kind == SNOWFLAKE_WAIT) {
        if (wait_ms < 1)
            wait_ms = 1;
        atomic_store_explicit(&sf->waiters, 1, memory_order_relaxed);
    }
    why->code = sf_code_names[code];
    why->wait_ms = wait_ms < 0 ? 0 : wait_ms;
    why->retry_after_s = (int)(sf_div_up(why->wait_ms) > 86400 ? 86400 :
                               sf_div_up(why->wait_ms));
    va_start(ap, fmt);
    vsnprintf(why->message, sizeof why->message, fmt, ap);
    va_end(ap);
    return kind;
}

static void
sf_poke(struct snowflake *sf, int64_t need)
{
    int64_t cur = atomic_load(&sf->need);

    while (need > cur && !atomic_compare_exchange_weak(&sf->need, &cur, need))
        ;
    if (!sf->thread_started || atomic_exchange(&sf->poked, 1))
        return;
    /* rare path (the clock outran the fence): a mutex is fine here */
    pthread_mutex_lock(&sf->mu);
    pthread_cond_signal(&sf->cv);
    pthread_mutex_unlock(&sf->mu);
}

static void
sf_backward_event(struct snowflake *sf, int64_t behind)
{
    size_t i;

    if (atomic_load_explicit(&sf->in_backward, memory_order_relaxed) ||
        atomic_exchange(&sf->in_backward, 1))
        return;
    atomic_fetch_add(&sf->bw_events, 1);
    atomic_fetch_add(&sf->bw_sum_ms, (uint64_t)behind);
    for (i = 0; i < SF_NBW; i++) {
        if (behind <= sf_bw_bounds[i]) {
            atomic_fetch_add(&sf->bw_buckets[i], 1);
            break;
        }
    }
    log_warn("the clock went back %" PRId64 " ms (limit "
             "snowflake.max_backward_ms = %" PRId64 ")", behind,
             sf->max_backward_ms);
}

static int
sf_refuse_status(struct snowflake *sf, int st, struct snowflake_refusal *why)
{
    switch (st) {
    case SF_ST_UNKNOWN:
        return sf_answer(sf, why, SNOWFLAKE_REFUSE, SF_C_WORKER_UNKNOWN, 1000,
                         "no worker ID yet: the worker ID store (ZooKeeper, "
                         "Redis) was not reachable at start; retrying");
    case SF_ST_LOST:
        return sf_answer(sf, why, SNOWFLAKE_REFUSE, SF_C_WORKER_LOST, 0,
                         "this node no longer owns worker ID %" PRId64
                         " in the worker ID store; restart to register again",
                         atomic_load(&sf->worker_id));
    case SF_ST_CLOCK: {
        int64_t off = 0;
        if (sf->backend.clock_offset != NULL)
            sf->backend.clock_offset(sf->backend.arg, &off);
        return sf_answer(sf, why, SNOWFLAKE_REFUSE, SF_C_CLOCK_OFFSET, 1000,
                         "this node's clock is %" PRId64 " ms off the "
                         "worker ID store's (over "
                         "snowflake.max_clock_offset_ms); no IDs until it "
                         "is back within it", off);
    }
    default:
        return sf_answer(sf, why, SNOWFLAKE_REFUSE, SF_C_LEASE, 1000,
                         "no heartbeat reached the worker ID store for half "
                         "of snowflake.takeover_age_ms; worker ID %" PRId64
                         " could be taken over, so none are issued",
                         atomic_load(&sf->worker_id));
    }
}

int
snowflake_next(struct snowflake *sf, uint32_t n, uint64_t *out,
               struct snowflake_refusal *why)
{
    const struct sfcodec_layout *l = &sf->layout;
    int64_t now, hw, gate, fence, nowr, t_end, borrowed = 0, lease;
    uint64_t old, nstate, wf;
    int st;

    if (n == 0 || n > sf->count_max)
        return sf_answer(sf, why, SNOWFLAKE_REFUSE, SF_C_BAD_COUNT, 0,
                         "count %u is outside 1..%u (snowflake.count_max)",
                         n, sf->count_max);
    st = atomic_load_explicit(&sf->status, memory_order_acquire);
    if (st != SF_ST_OK)
        return sf_refuse_status(sf, st, why);
    lease = atomic_load_explicit(&sf->lease_until, memory_order_relaxed);
    if (lease != 0 && util_mono_ms() >= lease)
        return sf_refuse_status(sf, SF_ST_LEASE, why);
    wf = atomic_load_explicit(&sf->worker_field, memory_order_relaxed);

    now = sf_now(sf);
    gate = atomic_load_explicit(&sf->gate, memory_order_relaxed);
    if (now <= gate) {
        int64_t gap = gate - now + 1;
        int kind = util_mono_ms() + gap <=
                   atomic_load_explicit(&sf->gate_deadline,
                                        memory_order_relaxed)
                   ? SNOWFLAKE_WAIT : SNOWFLAKE_REFUSE;
        char note[400];

        /* the non-OK path only: the note takes the backend's lock */
        if (sf->backend.gate_note != NULL &&
            sf->backend.gate_note(sf->backend.arg, gate, note, sizeof note))
            return sf_answer(sf, why, kind, SF_C_FENCE_NOT_PASSED, gap,
                             "the clock is %" PRId64 " ms behind the "
                             "new/wiped-store epoch gate %" PRId64 ", when "
                             "IDs start: %s", gap, gate, note);
        if (kind == SNOWFLAKE_WAIT)
            return sf_answer(sf, why, SNOWFLAKE_WAIT, SF_C_FENCE_NOT_PASSED,
                             gap,
                             "waiting %" PRId64 " ms for the clock to pass "
                             "the persisted fence %" PRId64, gap, gate);
        return sf_answer(sf, why, SNOWFLAKE_REFUSE, SF_C_FENCE_NOT_PASSED, gap,
                         "the clock is %" PRId64 " ms behind the persisted "
                         "fence %" PRId64 " (IDs up to it may have been "
                         "issued); none are issued until it passes", gap,
                         gate);
    }

    hw = atomic_load_explicit(&sf->hw, memory_order_relaxed);
    if (now < hw) {
        /* Re-read: our first reading may predate the one that set hw. A
         * second one taken after loading hw and still below it is a real
         * step back of the wall clock. */
        now = sf_now(sf);
        hw = atomic_load_explicit(&sf->hw, memory_order_relaxed);
        if (now < hw) {
            int64_t behind = hw - now;
            sf_backward_event(sf, behind);
            if (behind > sf->max_backward_ms)
                return sf_answer(sf, why, SNOWFLAKE_REFUSE, SF_C_CLOCK_BEHIND,
                                 behind - sf->max_backward_ms,
                                 "the clock is %" PRId64 " ms behind the "
                                 "last time served (limit %" PRId64 " ms); "
                                 "IDs resume in %" PRId64 " ms", behind,
                                 sf->max_backward_ms,
                                 behind - sf->max_backward_ms);
        }
    }
    if (now >= hw &&
        atomic_load_explicit(&sf->in_backward, memory_order_relaxed))
        atomic_store(&sf->in_backward, 0);

    fence = atomic_load_explicit(&sf->fence, memory_order_acquire);
    nowr = now - l->epoch_ms;
    old = atomic_load_explicit(&sf->state, memory_order_relaxed);
    for (;;) {
        int64_t limit = (now > hw ? now : hw) + sf->max_borrow_ms;
        t_end = sf_plan(sf, old, nowr, n, &nstate, &borrowed);
        if ((uint64_t)t_end > l->max_timestamp)
            return sf_answer(sf, why, SNOWFLAKE_REFUSE, SF_C_LAYOUT_EXPIRED, 0,
                             "the %d-bit timestamp has run out",
                             l->timestamp_bits);
        if (t_end + l->epoch_ms > fence) {
            int pf = atomic_load(&sf->persist_failing);
            sf_poke(sf, t_end + l->epoch_ms);
            if (pf == SNOWFLAKE_PERSIST_UNCONFIRMED)
                return sf_answer(sf, why, SNOWFLAKE_REFUSE,
                                 SF_C_FENCE_UNCONFIRMED, 1000,
                                 "the worker ID store does not confirm "
                                 "a fence past %" PRId64 " (another "
                                 "owner could "
                                 "inherit this worker ID and gate on it); "
                                 "no IDs beyond it", fence);
            if (pf != 0)
                return sf_answer(sf, why, SNOWFLAKE_REFUSE,
                                 SF_C_FENCE_PENDING, 1000,
                                 "cannot persist the fence past %" PRId64
                                 " (see the log); no IDs beyond it",
                                 fence);
            return sf_answer(sf, why, SNOWFLAKE_WAIT, SF_C_FENCE_PENDING, 10,
                             "timestamp %" PRId64 " is past the persisted "
                             "fence %" PRId64 "; persisting a new one",
                             t_end + l->epoch_ms, fence);
        }
        if (t_end + l->epoch_ms > limit) {
            int64_t w = t_end + l->epoch_ms - sf->max_borrow_ms - now;
            return sf_answer(sf, why, SNOWFLAKE_WAIT, SF_C_BORROW_LIMIT, w,
                             "sequence used up %" PRId64 " ms ahead of the "
                             "clock (limit %" PRId64 " ms); wait %" PRId64
                             " ms", t_end + l->epoch_ms - now,
                             sf->max_borrow_ms, w);
        }
        if (atomic_compare_exchange_weak_explicit(&sf->state, &old, nstate,
                                                  memory_order_acq_rel,
                                                  memory_order_relaxed))
            break;
    }
    /* rule 3: nothing past the persisted fence; the state only grows */
    assert(t_end + l->epoch_ms <= fence);
    assert(nstate > old);
    assert((int64_t)(nstate >> l->sequence_bits) == t_end);
    sf_fill(sf, old, nowr, n, wf, out);
    /* increasing, but for the one wrap of a ms's sequence to 0 with
     * sequence_random: the timestamps never go back */
    assert(n == 1 || sf->seq_random || out[n - 1] > out[0]);
    assert(out[n - 1] >> l->timestamp_shift >= out[0] >> l->timestamp_shift);
    assert((int64_t)(out[n - 1] >> l->timestamp_shift) == t_end);
    assert(out[n - 1] <= l->max_id);        /* js53: below 2^53 */

    /* served at `now`: raise the high-water mark */
    while (now > hw && !atomic_compare_exchange_weak_explicit(
                           &sf->hw, &hw, now, memory_order_relaxed,
                           memory_order_relaxed))
        ;
    atomic_fetch_add_explicit(&sf->ids_total, n, memory_order_relaxed);
    atomic_fetch_add_explicit(&sf->requests_total, 1, memory_order_relaxed);
    if (borrowed > 0)
        atomic_fetch_add_explicit(&sf->borrowed_ms, (uint64_t)borrowed,
                                  memory_order_relaxed);
    return SNOWFLAKE_OK;
}

/* --- the keeper -------------------------------------------------------- */

int64_t
snowflake_fence(struct snowflake *sf)
{
    return atomic_load(&sf->fence);
}


/* Persist a fence >= want (keeper thread or creation only):
 * SNOWFLAKE_PERSIST_*.
 * Only an OK moves the fence the request path checks. */
/* Publish the backend's lease deadline to the request path. */
static void
sf_lease_publish(struct snowflake *sf)
{
    if (sf->backend.lease_until != NULL)
        atomic_store_explicit(&sf->lease_until,
                              sf->backend.lease_until(sf->backend.arg),
                              memory_order_relaxed);
}

static int
sf_persist(struct snowflake *sf, int64_t want)
{
    char *cause = NULL;

    int rc = sf->backend.persist(sf->backend.arg, want, &cause);

    sf_lease_publish(sf);

    if (rc != SNOWFLAKE_PERSIST_OK) {
        int64_t m = util_mono_ms();
        assert(rc == SNOWFLAKE_PERSIST_FAILED ||
               rc == SNOWFLAKE_PERSIST_UNCONFIRMED);
        atomic_fetch_add(&sf->persist_failures, 1);
        if (atomic_exchange(&sf->persist_failing, rc) != rc ||
            m - sf->last_fail_log_mono >= 10000) {
            log_error("cannot persist the snowflake fence %" PRId64 ": %s",
                      want, cause != NULL ? cause : "?");
            sf->last_fail_log_mono = m;
        }
        pthread_mutex_lock(&sf->mu);
        snprintf(sf->persist_error, sizeof sf->persist_error, "%s",
                 cause != NULL ? cause : "?");
        pthread_mutex_unlock(&sf->mu);
        free(cause);
        return rc;
    }
    atomic_fetch_add(&sf->fence_writes, 1);
    atomic_store_explicit(&sf->fence, want, memory_order_release);
    if (atomic_exchange(&sf->persist_failing, 0))
        log_info("snowflake fence persisted again (%" PRId64 ")", want);
    return 0;
}

/* Install a (newly known) worker ID with its gate; status stays as is. */
static void
sf_set_worker(struct snowflake *sf, int64_t worker, int64_t gate)
{
    const struct sfcodec_layout *l = &sf->layout;
    uint64_t wf = ((uint64_t)sf->datacenter_id << l->datacenter_shift) |
                  ((uint64_t)worker << l->worker_shift);
    int64_t g = gate > l->epoch_ms ? gate - l->epoch_ms : 0;
    uint64_t st = ((uint64_t)g << l->sequence_bits) | l->max_sequence;

    assert(worker >= sf->worker_min && worker <= sf->worker_max &&
           (uint64_t)worker <= l->max_worker);
    atomic_store(&sf->worker_field, wf);
    atomic_store(&sf->worker_id, worker);
    if (st > atomic_load(&sf->state))
        atomic_store(&sf->state, st);
    atomic_store(&sf->gate, gate);
    atomic_store(&sf->gate_deadline, util_mono_ms() + sf->start_wait_ms);
    sf->gate_pending = 1;
}

static void
sf_acquire(struct snowflake *sf, int64_t now)
{
    int64_t worker = -1, gate = 0, base;

    if (sf->backend.worker == NULL ||
        sf->backend.worker(sf->backend.arg, &worker, &gate) == -1 ||
        worker < sf->worker_min || worker > sf->worker_max) {
        log_error("the worker ID source reported a worker ID (%" PRId64
                  ") that cannot be used (outside %" PRId64 "..%" PRId64 ")",
                  worker, sf->worker_min, sf->worker_max);
        return;
    }
    sf_set_worker(sf, worker, gate);
    base = now > gate ? now : gate;
    if (sf_persist(sf, base + sf->fence_step_ms) != SNOWFLAKE_PERSIST_OK)
        return;      /* retried: the status stays unknown until it works */
    atomic_store_explicit(&sf->status, SF_ST_OK, memory_order_release);
    log_info("snowflake worker ID %" PRId64 " acquired (%s); issuing IDs "
             "once the clock passes %" PRId64, worker,
             sf->backend.source != NULL ? sf->backend.source(sf->backend.arg)
                                        : "?", gate);
}

void
snowflake_keeper_step(struct snowflake *sf)
{
    int64_t now = sf_now(sf);
    int wake = 0, st;

    if (sf->backend.tick != NULL) {
        int r = sf->backend.tick(sf->backend.arg, now);
        sf_lease_publish(sf);
        st = atomic_load(&sf->status);
        /* Lost first: a lost worker ID is never acquired again here. */
        if (r == SNOWFLAKE_TICK_LOST && st != SF_ST_LOST) {
            atomic_store(&sf->status, SF_ST_LOST);
            log_error("snowflake worker ID %" PRId64 " lost; no more IDs",
                      atomic_load(&sf->worker_id));
        } else if (st == SF_ST_LOST) {
            /* stays lost: only a restart registers again */
        } else if (r == SNOWFLAKE_TICK_ACQUIRED && st == SF_ST_UNKNOWN) {
            sf_acquire(sf, now);
            wake = atomic_load(&sf->status) == SF_ST_OK;
        } else if (st == SF_ST_UNKNOWN && sf->backend.worker != NULL) {
            /* acquired earlier but the first fence could not be persisted */
            int64_t wid = -1, g = 0;
            if (sf->backend.worker(sf->backend.arg, &wid, &g) == 0) {
                sf_acquire(sf, now);
                wake = atomic_load(&sf->status) == SF_ST_OK;
            }
        } else if (r == SNOWFLAKE_TICK_CLOCK_BAD &&
                   (st == SF_ST_OK || st == SF_ST_LEASE)) {
            atomic_store(&sf->status, SF_ST_CLOCK);
            log_error("the clock is off the worker ID store's by more than "
                      "snowflake.max_clock_offset_ms: not issuing IDs");
        } else if (r == SNOWFLAKE_TICK_LEASE_EXPIRED &&
                   (st == SF_ST_OK || st == SF_ST_CLOCK)) {
            atomic_store(&sf->status, SF_ST_LEASE);
            log_error("no heartbeat reached the worker ID store for half "
                      "of the lease (snowflake.takeover_age_ms): not "
                      "issuing IDs");
        } else if (r == SNOWFLAKE_TICK_LEASE_OK &&
                   (st == SF_ST_LEASE || st == SF_ST_CLOCK)) {
            atomic_store(&sf->status, SF_ST_OK);
            log_info("worker ID store heartbeat back: issuing IDs again");
            wake = 1;
        }
    }

    st = atomic_load(&sf->status);
    if (st == SF_ST_OK || st == SF_ST_LEASE || st == SF_ST_CLOCK) {
        int64_t fence = atomic_load(&sf->fence);
        int64_t need = atomic_exchange(&sf->need, 0);
        int64_t last = sf_last_ms(sf), hw = atomic_load(&sf->hw);
        int64_t base = now, want = 0;

        if (last > base)
            base = last;
        if (hw > base)
            base = hw;
        if (fence - base < sf->fence_step_ms / 2)
            want = base + sf->fence_step_ms;
        if (need > fence && need + sf->fence_step_ms > want)
            want = (need > base ? need : base) + sf->fence_step_ms;
        if (want > fence) {
            if (sf_persist(sf, want) == 0) {
                if (need > fence)
                    wake = 1;
            } else if (need > 0) {
                /* ask again next time */
                int64_t cur = atomic_load(&sf->need);
                while (need > cur &&
                       !atomic_compare_exchange_weak(&sf->need, &cur, need))
                    ;
            }
        }
    }
    if (sf->gate_pending && now > atomic_load(&sf->gate)) {
        sf->gate_pending = 0;
        wake = 1;
    }
    if (atomic_exchange(&sf->waiters, 0))
        wake = 1;
    if (wake && sf->wake != NULL)
        sf->wake(sf->wake_arg);
}

static void *
sf_keeper_main(void *arg)
{
    struct snowflake *sf = arg;
    struct timespec ts;

    pthread_mutex_lock(&sf->mu);
    while (!sf->stop) {
        pthread_mutex_unlock(&sf->mu);
        snowflake_keeper_step(sf);
        pthread_mutex_lock(&sf->mu);
        if (sf->stop)
            break;
        if (!atomic_exchange(&sf->poked, 0)) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += SF_KEEPER_TICK_MS * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&sf->cv, &sf->mu, &ts);
            atomic_store(&sf->poked, 0);
        }
    }
    pthread_mutex_unlock(&sf->mu);
    return NULL;
}

static void
sf_free(struct snowflake *sf)
{
    if (sf->backend.close != NULL)
        sf->backend.close(sf->backend.arg);
    pthread_mutex_destroy(&sf->mu);
    pthread_cond_destroy(&sf->cv);
    free(sf);
}

struct snowflake *
snowflake_create(const struct snowflake_options *o, char **cause)
{
    struct snowflake *sf;
    pthread_condattr_t attr;
    const struct sfcodec_layout *l = &o->layout;
    int64_t now;
    int rc;

    sf = xcalloc(1, sizeof *sf);
    pthread_mutex_init(&sf->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&sf->cv, &attr);
    pthread_condattr_destroy(&attr);
    sf->layout = *l;
    sf->backend = o->backend;
    sf_lease_publish(sf);
    sf->datacenter_id = o->datacenter_id;
    sf->seq_random = o->sequence_random;
    sf->seq_bound = o->sequence_random_bound > 0 ?
                    (uint64_t)o->sequence_random_bound : 1;
    if (sf->seq_bound > l->max_sequence + 1)
        sf->seq_bound = l->max_sequence + 1;
    if (sf->seq_random && csprng_fill(sf->seq_key, sizeof sf->seq_key) != 0) {
        *cause = xasprintf("snowflake.sequence_random: no random bytes from "
                           "the kernel: %s", strerror(errno));
        goto error;
    }
    sf->max_backward_ms = o->max_backward_ms;
    sf->max_borrow_ms = o->max_borrow_ms;
    sf->fence_step_ms = o->fence_step_ms > 0 ? o->fence_step_ms : 1;
    sf->start_wait_ms = o->start_wait_ms;
    sf->count_max = o->count_max;
    sf->clock = o->clock;
    sf->clock_arg = o->clock_arg;
    sf->wake = o->wake;
    sf->wake_arg = o->wake_arg;
    atomic_store(&sf->worker_id, -1);

    if (sf->backend.persist == NULL) {
        *cause = xstrdup("snowflake: no fence persistence");
        goto error;
    }
    if (o->datacenter_id < 0 || (uint64_t)o->datacenter_id > l->max_datacenter) {
        *cause = xasprintf("snowflake.datacenter_id %" PRId64 " is outside "
                           "0..%" PRIu64 " (%d datacenter bits)",
                           o->datacenter_id, l->max_datacenter,
                           l->datacenter_bits);
        goto error;
    }
    if (o->worker_id >= 0 && (uint64_t)o->worker_id > l->max_worker) {
        *cause = xasprintf("worker ID %" PRId64 " is outside 0..%" PRIu64
                           " (%d worker bits)", o->worker_id, l->max_worker,
                           l->worker_bits);
        goto error;
    }
    sf->worker_min = o->worker_range ? o->worker_min : 0;
    sf->worker_max = o->worker_range ? o->worker_max : (int64_t)l->max_worker;
    if (sf->worker_min < 0 || sf->worker_min > sf->worker_max ||
        (uint64_t)sf->worker_max > l->max_worker) {
        *cause = xasprintf("snowflake.worker_id_min..worker_id_max %" PRId64
                           "..%" PRId64 " does not fit in 0..%" PRIu64
                           " (%d worker bits)", sf->worker_min,
                           sf->worker_max, l->max_worker, l->worker_bits);
        goto error;
    }
    if (o->worker_id >= 0 &&
        (o->worker_id < sf->worker_min || o->worker_id > sf->worker_max)) {
        *cause = xasprintf("worker ID %" PRId64 " is outside this node's "
                           "range %" PRId64 "..%" PRId64 " (snowflake."
                           "worker_id_min, worker_id_max)", o->worker_id,
                           sf->worker_min, sf->worker_max);
        goto error;
    }
    if (o->count_max < 1) {
        *cause = xstrdup("snowflake.count_max must be at least 1");
        goto error;
    }
    if (o->max_backward_ms < 0 || o->max_borrow_ms < 0 ||
        o->start_wait_ms < 0) {
        *cause = xstrdup("snowflake: negative max_backward_ms, max_borrow_ms "
                         "or start_wait_ms");
        goto error;
    }

    now = sf_now(sf);
    if (o->worker_id >= 0) {
        sf_set_worker(sf, o->worker_id, o->start_fence_ms);
        atomic_store(&sf->fence, o->start_fence_ms);
        if (sf_persist(sf, (now > o->start_fence_ms ? now : o->start_fence_ms)
                           + sf->fence_step_ms) == SNOWFLAKE_PERSIST_FAILED) {
            *cause = xasprintf("snowflake: cannot persist the first fence: "
                               "%s", sf->persist_error);
            goto error;
        }
        atomic_store(&sf->status, SF_ST_OK);
    } else {
        atomic_store(&sf->status, SF_ST_UNKNOWN);
    }

    if (!o->no_thread) {
        sf->thread_started = 1;
        rc = pthread_create(&sf->thread, NULL, sf_keeper_main, sf);
        if (rc != 0) {
            sf->thread_started = 0;
            *cause = xasprintf("snowflake: pthread_create: %s", strerror(rc));
            goto error;
        }
    }
    return sf;

error:
    sf_free(sf);
    return NULL;
}

void
snowflake_stop(struct snowflake *sf)
{
    if (sf == NULL)
        return;
    if (sf->thread_started) {
        pthread_mutex_lock(&sf->mu);
        sf->stop = 1;
        pthread_cond_signal(&sf->cv);
        pthread_mutex_unlock(&sf->mu);
        pthread_join(sf->thread, NULL);
    }
    /* A clean stop comes after the HTTP server has stopped: nothing more is
     * issued, so the last timestamp issued is itself a fence (rule 3 holds:
     * every ID had t <= it), and a restart need not wait out the rest of the
     * fence step. If ZooKeeper is unreachable only the file is lowered and
     * the restart waits for the node's higher fence, as before. */
    if (atomic_load(&sf->status) == SF_ST_OK) {
        int64_t last = sf_last_ms(sf);
        if (last < atomic_load(&sf->fence) &&
            sf_persist(sf, last) == SNOWFLAKE_PERSIST_OK)
            log_info("snowflake fence lowered to the last timestamp issued "
                     "(%" PRId64 ") for a quick restart", last);
    }
    sf_free(sf);
}
