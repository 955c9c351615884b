/* check_snowflake.c: the snowflake layout, decoding and the generator's
 * clock rule (snowflake.c), with an injected clock and a fake fence store. */
#include <check.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "sfconfig.h"
#include "snowflake.h"
#include "util.h"

#define T0 1700000000000LL          /* 2023-11-14T22:13:20Z */

/* --- fakes ---------------------------------------------------------------- */

static _Atomic int64_t fake_now = T0;
static _Atomic int64_t persisted_max;
static _Atomic int     persist_calls;
static _Atomic int     persist_fail;

static int64_t
fake_clock(void *arg)
{
    (void)arg;
    return atomic_load(&fake_now);
}

static int
fake_persist(void *arg, int64_t fence, char **cause)
{
    int64_t cur;

    (void)arg;
    if (atomic_load(&persist_fail) == 2) {
        *cause = xstrdup("ZooKeeper unreachable: in the file only");
        return SNOWFLAKE_PERSIST_UNCONFIRMED;
    }
    if (atomic_load(&persist_fail)) {
        *cause = xstrdup("disk on fire");
        return SNOWFLAKE_PERSIST_FAILED;
    }
    cur = atomic_load(&persisted_max);
    while (fence > cur && !atomic_compare_exchange_weak(&persisted_max, &cur,
                                                        fence))
        ;
    atomic_fetch_add(&persist_calls, 1);
    return 0;
}

static void
default_layout(struct sfcodec_layout *l)
{
    char *cause = NULL;
    ck_assert_int_eq(sfcodec_layout_init(l, SFCODEC_LEAF_EPOCH_MS, 41, 0, 10, 12, T0,
                                    365, &cause), 0);
}

static void
options(struct snowflake_options *o)
{
    memset(o, 0, sizeof *o);
    default_layout(&o->layout);
    o->worker_id = 7;
    o->datacenter_id = 0;
    o->start_fence_ms = 0;
    o->sequence_random = 0;
    o->sequence_random_bound = 100;
    o->max_backward_ms = 1000;
    o->max_borrow_ms = 1000;
    o->fence_step_ms = 3000;
    /* a gate this far is waited for, not refused, even after a stall of
     * seconds between the start and the request (the real clock counts) */
    o->start_wait_ms = 60000;
    o->count_max = 4096;
    o->clock = fake_clock;
    o->backend.persist = fake_persist;
    o->no_thread = 1;
}

static int seq_random_on;        /* see in_order() */

static struct snowflake *
make(const struct snowflake_options *o)
{
    char *cause = NULL;
    struct snowflake *sf = snowflake_create(o, &cause);

    seq_random_on = o->sequence_random;
    if (sf == NULL)
        ck_abort_msg("snowflake_create: %s", cause);
    return sf;
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sort and check that no ID appears twice. */
static void
assert_unique(uint64_t *ids, size_t n)
{
    qsort(ids, n, sizeof *ids, cmp_u64);
    for (size_t i = 1; i < n; i++)
        if (ids[i] == ids[i - 1])
            ck_abort_msg("duplicate ID %" PRIu64 " (%zu of %zu)", ids[i], i,
                         n);
}

static int64_t
ts_of(const struct snowflake *sf, uint64_t id)
{
    const struct sfcodec_layout *l = snowflake_layout(sf);
    return (int64_t)(id >> l->timestamp_shift) + l->epoch_ms;
}

/* The order one node's IDs keep: each above the one before, except that
 * with sequence_random a millisecond's sequence wraps to 0 once when more
 * than 2^bits - offset IDs are taken in it (random_start_full_capacity);
 * then the ID is below the one before in the same millisecond, and
 * *wrap_ms (the last ms that wrapped; -1 at first) records it. */
static int
in_order(const struct snowflake *sf, uint64_t prev, uint64_t id, int64_t *wrap_ms)
{
    const struct sfcodec_layout *l = snowflake_layout(sf);
    int64_t ms = (int64_t)(id >> l->timestamp_shift);

    if (id > prev)
        return 1;
    if (!seq_random_on || ms != (int64_t)(prev >> l->timestamp_shift) ||
        ms == *wrap_ms)
        return 0;
    *wrap_ms = ms;
    return 1;
}

/* next() with the keeper run by hand on fence_pending; checks that every ID
 * is within the fence persisted before the call returned. */
static int
issue(struct snowflake *sf, uint32_t n, uint64_t *out, struct snowflake_refusal *why)
{
    for (int tries = 0; tries < 5; tries++) {
        int rc = snowflake_next(sf, n, out, why);
        if (rc == SNOWFLAKE_WAIT && strcmp(why->code, "fence_pending") == 0) {
            snowflake_keeper_step(sf);
            continue;
        }
        if (rc == SNOWFLAKE_OK) {
            int64_t max = atomic_load(&persisted_max), wrap_ms = -1;
            /* plain ifs: check writes to a pipe on every ck_assert */
            for (uint32_t i = 0; i < n; i++) {
                if (ts_of(sf, out[i]) > max)
                    ck_abort_msg("ID ts %" PRId64 " beyond persisted fence %"
                                 PRId64, ts_of(sf, out[i]), max);
                if (i > 0 && !in_order(sf, out[i - 1], out[i], &wrap_ms))
                    ck_abort_msg("batch not increasing");
            }
        }
        return rc;
    }
    ck_abort_msg("fence_pending does not clear");
    return -1;
}

static void
reset_fakes(void)
{
    atomic_store(&fake_now, T0);
    atomic_store(&persisted_max, 0);
    atomic_store(&persist_calls, 0);
    atomic_store(&persist_fail, 0);
}

/* --- layout and decoding -------------------------------------------------- */

START_TEST(pack_decode_roundtrip)
{
    static const struct { int64_t epoch; int ts, dc, wk, seq; } lay[] = {
        {SFCODEC_LEAF_EPOCH_MS, 41, 0, 10, 12},
        {SFCODEC_LEAF_EPOCH_MS, 41, 5, 5, 12},
        {1600000000000LL, 39, 0, 12, 12},
        {1500000000000LL, 43, 3, 7, 10},
        {0, 50, 0, 5, 8},
        {1288834974657LL, 41, 0, 0, 22},
    };
    for (size_t i = 0; i < sizeof lay / sizeof lay[0]; i++) {
        struct sfcodec_layout l;
        char *cause = NULL;
        ck_assert_msg(sfcodec_layout_init(&l, lay[i].epoch, lay[i].ts, lay[i].dc,
                                     lay[i].wk, lay[i].seq, T0, 1, &cause)
                      == 0, "layout %zu: %s", i, cause);
        for (int k = 0; k < 200; k++) {
            int64_t ts = T0 + (int64_t)(rand() % 100000000) - 50000000;
            uint64_t dc = l.max_datacenter ? (uint64_t)rand() % (l.max_datacenter + 1) : 0;
            uint64_t wk = l.max_worker ? (uint64_t)rand() % (l.max_worker + 1) : 0;
            uint64_t sq = (uint64_t)rand() % (l.max_sequence + 1);
            struct sfcodec_decoded d;
            char buf[32];
            if (k == 0) {   /* extremes */
                dc = l.max_datacenter;
                wk = l.max_worker;
                sq = l.max_sequence;
            }
            uint64_t id = sfcodec_pack(&l, ts, dc, wk, sq);
            snprintf(buf, sizeof buf, "%" PRIu64, id);
            ck_assert_int_eq(sfcodec_decode(&l, buf, strlen(buf), &d, &cause), 0);
            ck_assert_uint_eq(d.id, id);
            ck_assert_int_eq(d.timestamp_ms, ts);
            ck_assert_uint_eq(d.datacenter_id, dc);
            ck_assert_uint_eq(d.worker_id, wk);
            ck_assert_uint_eq(d.sequence, sq);
            ck_assert_int_eq(d.has_datacenter, lay[i].dc > 0);
        }
    }
}
END_TEST

START_TEST(decode_leaf_compatible)
{
    /* Leaf's own example: 1567733700834(2019-09-06 09:35:00.834), seq 3448,
     * worker 39, server in China Standard Time. */
    struct sfcodec_layout l;
    struct sfcodec_decoded d;
    struct sbuf b = {0};
    char *cause = NULL, buf[32];
    uint64_t id = ((uint64_t)(1567733700834LL - SFCODEC_LEAF_EPOCH_MS) << 22) |
                  (39u << 12) | 3448u;

    setenv("TZ", "Asia/Shanghai", 1);
    tzset();
    default_layout(&l);
    snprintf(buf, sizeof buf, "%" PRIu64, id);
    ck_assert_int_eq(sfcodec_decode(&l, buf, strlen(buf), &d, &cause), 0);
    sfcodec_decoded_leaf_json(&l, &d, &b);
    ck_assert_str_eq(b.p, "{\"timestamp\":\"1567733700834(2019-09-06 "
                     "09:35:00.834)\",\"sequenceId\":\"3448\","
                     "\"workerId\":\"39\"}");
    sbuf_free(&b);
    sfcodec_decoded_json(&d, &b);
    {
        char want[256];
        snprintf(want, sizeof want, "{\"id\":\"%s\",\"timestamp\":"
                 "1567733700834,\"time\":\"2019-09-06T01:35:00.834Z\","
                 "\"worker_id\":39,\"sequence\":3448}", buf);
        ck_assert_str_eq(b.p, want);
    }
    sbuf_free(&b);
}
END_TEST

START_TEST(decode_split_json)
{
    struct sfcodec_layout l;
    struct sfcodec_decoded d;
    struct sbuf b = {0};
    char *cause = NULL, buf[32];
    uint64_t id;

    ck_assert_int_eq(sfcodec_layout_init(&l, SFCODEC_LEAF_EPOCH_MS, 41, 5, 5, 12, T0,
                                    365, &cause), 0);
    id = sfcodec_pack(&l, T0, 3, 17, 5);
    snprintf(buf, sizeof buf, "%" PRIu64, id);
    ck_assert_int_eq(sfcodec_decode(&l, buf, strlen(buf), &d, &cause), 0);
    sfcodec_decoded_json(&d, &b);
    ck_assert_ptr_nonnull(strstr(b.p, "\"worker_id\":17,\"sequence\":5,"
                                      "\"datacenter_id\":3}"));
    ck_assert_ptr_nonnull(strstr(b.p, "\"time\":\"2023-11-14T22:13:20.000Z\""));
    sbuf_free(&b);
    setenv("TZ", "UTC", 1);
    tzset();
    sfcodec_decoded_leaf_json(&l, &d, &b);
    /* Leaf's workerId is the whole 10-bit field: 3 << 5 | 17 = 113 */
    ck_assert_str_eq(b.p, "{\"timestamp\":\"1700000000000(2023-11-14 "
                     "22:13:20.000)\",\"sequenceId\":\"5\",\"workerId\":"
                     "\"113\",\"datacenterId\":\"3\"}");
    sbuf_free(&b);
}
END_TEST

START_TEST(decode_strict)
{
    static const char *bad[] = {
        "", "abc", "-1", "+1", " 1", "1 ", "01", "00", "12a", "1.5", "0x10",
        "18446744073709551616", "99999999999999999999999",
        "9223372036854775808", "18446744073709551615",
    };
    struct sfcodec_layout l;
    struct sfcodec_decoded d;
    char *cause = NULL;

    default_layout(&l);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cause = NULL;
        ck_assert_msg(sfcodec_decode(&l, bad[i], strlen(bad[i]), &d, &cause) == -1,
                      "accepted \"%s\"", bad[i]);
        ck_assert_ptr_nonnull(cause);
        free(cause);
    }
    ck_assert_int_eq(sfcodec_decode(&l, "0", 1, &d, &cause), 0);
    ck_assert_int_eq(sfcodec_decode(&l, "9223372036854775807", 19, &d, &cause), 0);
    ck_assert_uint_eq(d.sequence, 4095);
    ck_assert_uint_eq(d.worker_id, 1023);
}
END_TEST

START_TEST(decode_cli)
{
    struct config cfg;
    struct sbuf b = {0};
    char *cause = NULL;

    memset(&cfg, 0, sizeof cfg);
    cfg.epoch_ms = SFCODEC_LEAF_EPOCH_MS;
    cfg.timestamp_bits = 41;
    cfg.worker_bits = 10;
    cfg.sequence_bits = 12;
    ck_assert_int_eq(sfconfig_decode_cli(&cfg, "1167498218493988864", 0, &b,
                                          &cause), 0);
    ck_assert_ptr_nonnull(strstr(b.p, "\"id\":\"1167498218493988864\""));
    sbuf_free(&b);
    ck_assert_int_eq(sfconfig_decode_cli(&cfg, "x", 0, &b, &cause), -1);
    free(cause);
}
END_TEST

START_TEST(layout_refusal)
{
    struct sfcodec_layout l;
    char *cause = NULL, *desc;

    /* bits not 63 */
    ck_assert_int_eq(sfcodec_layout_init(&l, SFCODEC_LEAF_EPOCH_MS, 41, 0, 10, 11, T0,
                                    365, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "must be 63"));
    free(cause);
    ck_assert_int_eq(sfcodec_layout_init(&l, SFCODEC_LEAF_EPOCH_MS, 42, 0, 10, 12, T0,
                                    365, &cause), -1);
    free(cause);
    /* expired: 30 bits of ms is 12.4 days */
    ck_assert_int_eq(sfcodec_layout_init(&l, SFCODEC_LEAF_EPOCH_MS, 30, 0, 21, 12, T0,
                                    0, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "ran out"));
    free(cause);
    /* 35 bits = 397.7 days from 100 days ago: runs out within 365 days */
    ck_assert_int_eq(sfcodec_layout_init(&l, T0 - 100 * 86400000LL, 35, 0, 16, 12,
                                    T0, 365, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "margin"));
    free(cause);
    ck_assert_int_eq(sfcodec_layout_init(&l, T0 - 100 * 86400000LL, 35, 0, 16, 12,
                                    T0, 200, &cause), 0);
    /* epoch in the future */
    ck_assert_int_eq(sfcodec_layout_init(&l, T0 + 1000, 41, 0, 10, 12, T0, 365,
                                    &cause), -1);
    free(cause);
    /* the start description */
    default_layout(&l);
    desc = sfcodec_layout_describe(&l);
    ck_assert_ptr_nonnull(strstr(desc, "worker IDs 0..1023"));
    ck_assert_ptr_nonnull(strstr(desc, "4096 IDs per ms"));
    ck_assert_ptr_nonnull(strstr(desc, "2080-07-10T17:30:30.208Z"));
    free(desc);
    ck_assert_int_eq(sfcodec_layout_init(&l, SFCODEC_LEAF_EPOCH_MS, 41, 5, 5, 12, T0,
                                    365, &cause), 0);
    desc = sfcodec_layout_describe(&l);
    ck_assert_ptr_nonnull(strstr(desc, "datacenter IDs 0..31, worker IDs 0..31"));
    free(desc);
}
END_TEST

/* --- the generator ---------------------------------------------------------- */

START_TEST(first_ids_and_fields)
{
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    struct sfcodec_decoded d;
    uint64_t id[3];
    char *cause = NULL, buf[32];

    reset_fakes();
    options(&o);
    sf = make(&o);
    ck_assert_int_eq(atomic_load(&persisted_max), T0 + 3000);
    ck_assert_int_eq(issue(sf, 3, id, &why), SNOWFLAKE_OK);
    snprintf(buf, sizeof buf, "%" PRIu64, id[2]);
    ck_assert_int_eq(sfcodec_decode(snowflake_layout(sf), buf, strlen(buf), &d,
                               &cause), 0);
    ck_assert_int_eq(d.timestamp_ms, T0);
    ck_assert_uint_eq(d.worker_id, 7);
    ck_assert_uint_eq(d.sequence, 2);
    ck_assert_uint_eq(id[0], sfcodec_pack(snowflake_layout(sf), T0, 0, 7, 0));
    snowflake_stop(sf);
}
END_TEST

START_TEST(overflow_borrows_bounded)
{
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    static uint64_t ids[4096];
    int rc;

    reset_fakes();
    options(&o);
    o.max_borrow_ms = 5;
    sf = make(&o);
    /* a full ms at T0 */
    ck_assert_int_eq(issue(sf, 4096, ids, &why), SNOWFLAKE_OK);
    ck_assert_int_eq(ts_of(sf, ids[0]), T0);
    ck_assert_int_eq(ts_of(sf, ids[4095]), T0);
    /* overflow: the next ms before the clock gets there */
    ck_assert_int_eq(issue(sf, 1, ids, &why), SNOWFLAKE_OK);
    ck_assert_int_eq(ts_of(sf, ids[0]), T0 + 1);
    ck_assert_uint_eq(ids[0] & 4095, 0);
    /* borrow up to T0 + 5, then wait */
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(issue(sf, i == 0 ? 4095 : 4096, ids, &why), SNOWFLAKE_OK);
    ck_assert_int_eq(ts_of(sf, ids[4095]), T0 + 5);
    rc = issue(sf, 1, ids, &why);
    ck_assert_int_eq(rc, SNOWFLAKE_WAIT);
    ck_assert_str_eq(why.code, "borrow_limit");
    ck_assert_int_eq(why.wait_ms, 1);
    /* a batch that would go 3 ms further waits for 3 ms */
    rc = issue(sf, 4096 * 2 + 1, ids, &why);
    ck_assert_int_eq(rc, SNOWFLAKE_REFUSE);          /* over count_max */
    ck_assert_str_eq(why.code, "bad_count");
    atomic_fetch_add(&fake_now, 1);
    ck_assert_int_eq(issue(sf, 1, ids, &why), SNOWFLAKE_OK);
    ck_assert_int_eq(ts_of(sf, ids[0]), T0 + 6);
    /* a batch may span ms */
    atomic_store(&fake_now, T0 + 100);
    ck_assert_int_eq(issue(sf, 4000, ids, &why), SNOWFLAKE_OK);
    ck_assert_int_eq(issue(sf, 200, ids, &why), SNOWFLAKE_OK);
    ck_assert_int_eq(ts_of(sf, ids[0]), T0 + 100);
    ck_assert_int_eq(ts_of(sf, ids[199]), T0 + 101);
    ck_assert_uint_eq(ids[199] & 4095, 103);
    snowflake_stop(sf);
}
END_TEST

/* Issue IDs for span_ms of fake clock (per ms: per_ms IDs in batches of
 * batch), advancing the clock 1 ms at a time. Appends to ids. */
static void
run_for(struct snowflake *sf, int span_ms, int per_ms, uint32_t batch,
        uint64_t *ids, size_t *n, size_t cap)
{
    struct snowflake_refusal why;

    for (int ms = 0; ms < span_ms; ms++) {
        for (int k = 0; k < per_ms; k += (int)batch) {
            if (*n + batch > cap)
                ck_abort_msg("test buffer too small");
            int rc = issue(sf, batch, ids + *n, &why);
            if (rc == SNOWFLAKE_WAIT && strcmp(why.code, "borrow_limit") == 0)
                break;
            if (rc != SNOWFLAKE_OK)
                ck_abort_msg("rc %d %s: %s", rc, why.code, why.message);
            *n += batch;
        }
        atomic_fetch_add(&fake_now, 1);
        if (ms % 100 == 0)
            snowflake_keeper_step(sf);
    }
}

static void
step_back(int64_t step, int refused)
{
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    size_t cap = 4000000, n = 0;
    uint64_t *ids = malloc(cap * sizeof *ids), one;

    reset_fakes();
    options(&o);
    sf = make(&o);
    run_for(sf, 300, 1500, 60, ids, &n, cap);
    /* served at the clock's current ms: the step is measured from it */
    ck_assert_int_eq(issue(sf, 1, ids + n++, &why), SNOWFLAKE_OK);
    atomic_fetch_sub(&fake_now, step);
    if (refused) {
        ck_assert_int_eq(issue(sf, 1, &one, &why), SNOWFLAKE_REFUSE);
        ck_assert_str_eq(why.code, "clock_behind");
        ck_assert_int_eq(why.wait_ms, step - o.max_backward_ms);
        ck_assert_ptr_nonnull(strstr(why.message, "behind"));
        /* still refused a bit later, served once within the limit */
        atomic_fetch_add(&fake_now, why.wait_ms - 1);
        ck_assert_int_eq(issue(sf, 1, &one, &why), SNOWFLAKE_REFUSE);
        ck_assert_int_eq(why.wait_ms, 1);
        atomic_fetch_add(&fake_now, 1);
        snowflake_keeper_step(sf);
    }
    /* serve through the step back and past it */
    run_for(sf, (int)(step > 1000 ? 1000 : step) + 300, 1500, 60, ids, &n,
            cap);
    assert_unique(ids, n);
    snowflake_stop(sf);
    free(ids);
}

START_TEST(step_back_1ms)    { step_back(1, 0); }
END_TEST
START_TEST(step_back_5ms)    { step_back(5, 0); }
END_TEST
START_TEST(step_back_1s)     { step_back(1000, 0); }
END_TEST
START_TEST(step_back_1h)     { step_back(3600000, 1); }
END_TEST
START_TEST(step_back_over)   { step_back(1001, 1); }
END_TEST

START_TEST(step_back_and_forth)
{
    /* a clock that wanders +-400 ms at random never yields a repeat */
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    size_t cap = 2000000, n = 0;
    uint64_t *ids = malloc(cap * sizeof *ids);
    int64_t base = T0;

    reset_fakes();
    options(&o);
    o.sequence_random = 1;
    sf = make(&o);
    srand(42);
    for (int i = 0; i < 100000 && n + 32 <= cap; i++) {
        uint32_t k = 1 + (uint32_t)(rand() % 32);
        if (i % 10 == 0) {
            base += 1;
            atomic_store(&fake_now, base + rand() % 800 - 400);
            snowflake_keeper_step(sf);
        }
        int rc = issue(sf, k, ids + n, &why);
        if (rc == SNOWFLAKE_OK)
            n += k;
        else if (strcmp(why.code, "borrow_limit") != 0 &&
                 strcmp(why.code, "clock_behind") != 0)
            ck_abort_msg("%s", why.code);
    }
    ck_assert_uint_gt(n, 100000);
    assert_unique(ids, n);
    snowflake_stop(sf);
    free(ids);
}
END_TEST

START_TEST(fence_before_use)
{
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    uint64_t id[16];
    int rc;

    reset_fakes();
    options(&o);
    sf = make(&o);
    ck_assert_int_eq(snowflake_fence(sf), T0 + 3000);
    ck_assert_int_eq(issue(sf, 1, id, &why), SNOWFLAKE_OK);
    /* within the fence: no persisting needed */
    atomic_store(&fake_now, T0 + 1000);
    ck_assert_int_eq(snowflake_next(sf, 1, id, &why), SNOWFLAKE_OK);
    /* the keeper moves it ahead before it is needed (half a step left) */
    atomic_store(&fake_now, T0 + 1600);
    snowflake_keeper_step(sf);
    ck_assert_int_eq(snowflake_fence(sf), T0 + 4600);
    /* the clock jumps an hour ahead: fence_pending, then served */
    atomic_store(&fake_now, T0 + 3600000);
    rc = snowflake_next(sf, 1, id, &why);
    ck_assert_int_eq(rc, SNOWFLAKE_WAIT);
    ck_assert_str_eq(why.code, "fence_pending");
    snowflake_keeper_step(sf);
    ck_assert_int_ge(atomic_load(&persisted_max), T0 + 3600000);
    ck_assert_int_eq(snowflake_next(sf, 1, id, &why), SNOWFLAKE_OK);
    ck_assert_int_le(ts_of(sf, id[0]), atomic_load(&persisted_max));
    /* persisting fails: refused with fence_pending, not served */
    atomic_store(&persist_fail, 1);
    atomic_store(&fake_now, T0 + 7200000);
    ck_assert_int_eq(snowflake_next(sf, 1, id, &why), SNOWFLAKE_WAIT);
    snowflake_keeper_step(sf);
    ck_assert_int_eq(snowflake_next(sf, 1, id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "fence_pending");
    atomic_store(&persist_fail, 0);
    snowflake_keeper_step(sf);
    ck_assert_int_eq(issue(sf, 16, id, &why), SNOWFLAKE_OK);
    snowflake_stop(sf);
}
END_TEST

/* A fence the backend could not confirm (ZooKeeper) does not count: 503
 * fence_unconfirmed past the last confirmed one, never an ID beyond it;
 * a start that cannot confirm its first fence is not fatal. */
START_TEST(fence_unconfirmed)
{
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    uint64_t id[16];
    char *reason = NULL;

    reset_fakes();
    options(&o);
    o.start_fence_ms = T0 - 10;
    atomic_store(&persist_fail, 2);
    sf = make(&o);
    ck_assert_int_eq(snowflake_fence(sf), T0 - 10);
    ck_assert_int_eq(snowflake_next(sf, 1, id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "fence_unconfirmed");
    ck_assert_int_eq(snowflake_health(sf, &reason), -1);
    ck_assert_ptr_nonnull(strstr(reason, "fence_unconfirmed"));
    free(reason);
    /* confirmed: served */
    atomic_store(&persist_fail, 0);
    snowflake_keeper_step(sf);
    ck_assert_int_eq(issue(sf, 16, id, &why), SNOWFLAKE_OK);
    ck_assert_int_eq(snowflake_health(sf, &reason), 0);
    /* lost again, the clock jumps past the fence: nothing beyond it */
    atomic_store(&persist_fail, 2);
    atomic_store(&fake_now, T0 + 60000);
    snowflake_next(sf, 1, id, &why);
    snowflake_keeper_step(sf);
    ck_assert_int_eq(snowflake_next(sf, 1, id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "fence_unconfirmed");
    ck_assert_int_lt(snowflake_fence(sf), T0 + 60000);
    /* within the confirmed fence, IDs go on (the clock steps back to it) */
    atomic_store(&fake_now, T0 + 1000);
    ck_assert_int_eq(snowflake_next(sf, 1, id, &why), SNOWFLAKE_OK);
    ck_assert_int_le(ts_of(sf, id[0]), snowflake_fence(sf));
    snowflake_stop(sf);
}
END_TEST

START_TEST(restart_behind_fence)
{
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    size_t n1 = 0, cap = 100000;
    uint64_t *ids = malloc(cap * sizeof *ids), id;
    int64_t fence;

    reset_fakes();
    options(&o);
    sf = make(&o);
    run_for(sf, 20, 2000, 100, ids, &n1, cap);
    fence = atomic_load(&persisted_max);
    snowflake_stop(sf);

    /* restart with the clock 2 s behind the fence: wait for it to pass */
    atomic_store(&fake_now, fence - 2000);
    o.start_fence_ms = fence;
    sf = make(&o);
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_WAIT);
    ck_assert_str_eq(why.code, "fence_not_passed");
    ck_assert_int_eq(why.wait_ms, 2001);
    atomic_store(&fake_now, fence);
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_WAIT);
    ck_assert_int_eq(why.wait_ms, 1);
    atomic_store(&fake_now, fence + 1);
    ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_OK);
    ck_assert_int_gt(ts_of(sf, id), fence);
    for (size_t i = 0; i < n1; i++)
        if (id <= ids[i])
            ck_abort_msg("ID after restart not above the ones before");
    snowflake_stop(sf);

    /* restart with the clock an hour behind: refused, with the gap */
    atomic_store(&fake_now, fence - 3600000);
    sf = make(&o);
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "fence_not_passed");
    ck_assert_int_eq(why.wait_ms, 3600001);
    ck_assert_int_eq(why.retry_after_s, 3601);
    {
        char *reason = NULL;
        ck_assert_int_eq(snowflake_health(sf, &reason), -1);
        ck_assert_ptr_nonnull(strstr(reason, "fence_not_passed"));
        free(reason);
    }
    snowflake_stop(sf);
    free(ids);
}
END_TEST

START_TEST(random_sequence_start)
{
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    int seen[100] = {0}, odd = 0, distinct = 0;
    uint64_t id;

    reset_fakes();
    options(&o);
    o.sequence_random = 1;
    sf = make(&o);
    for (int i = 0; i < 2000; i++) {
        if (issue(sf, 1, &id, &why) != SNOWFLAKE_OK)
            ck_abort_msg("%s", why.code);
        uint64_t seq = id & 4095;
        if (seq >= 100)
            ck_abort_msg("sequence start %" PRIu64 " >= 100", seq);
        seen[seq]++;
        odd += (int)(id & 1);
        atomic_fetch_add(&fake_now, 1);
        if (i % 500 == 0)
            snowflake_keeper_step(sf);
    }
    for (int i = 0; i < 100; i++)
        distinct += seen[i] > 0;
    ck_assert_int_gt(odd, 800);
    ck_assert_int_lt(odd, 1200);
    ck_assert_int_gt(distinct, 90);
    snowflake_stop(sf);

    /* without it every first ID of a ms is even (sequence 0) */
    reset_fakes();
    options(&o);
    sf = make(&o);
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_OK);
        ck_assert_uint_eq(id & 4095, 0);
        atomic_fetch_add(&fake_now, 1);
    }
    snowflake_stop(sf);
}
END_TEST

/* sequence_random costs no capacity: with the clock held still, each
 * millisecond (the clock's and the borrowed ones after it) hands out all
 * 4096 sequence values, each once, one ID at a time and in batches that
 * cross millisecond ends; the random start is an offset, not a skip.
 * _i: 0, bound 100 (Leaf's); 1, bound 4096 (every start possible); 2,
 * bound 4096 with two threads taking batches of 1 to 16 at once. */
struct capacity_arg {
    struct snowflake *sf;
    uint64_t *ids;
    size_t n;
    unsigned seed;
};

static void *
capacity_taker(void *p)
{
    struct capacity_arg *a = p;
    struct snowflake_refusal why;
    size_t done = 0;

    while (done < a->n) {
        uint32_t k = 1 + (uint32_t)(rand_r(&a->seed) % 16);

        if (k > a->n - done)
            k = (uint32_t)(a->n - done);
        if (snowflake_next(a->sf, k, a->ids + done, &why) != SNOWFLAKE_OK)
            ck_abort_msg("%s: %s", why.code, why.message);
        done += k;
    }
    return NULL;
}

START_TEST(random_start_full_capacity)
{
    enum { MS = 6, SEQ = 4096 };
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    static uint64_t ids[MS * SEQ];
    static uint8_t seen[MS][SEQ];
    size_t n = 0;
    int wrapped = 0;

    reset_fakes();
    options(&o);
    o.sequence_random = 1;
    o.sequence_random_bound = _i == 0 ? 100 : 4096;
    sf = make(&o);
    memset(seen, 0, sizeof seen);
    if (_i == 2) {
        /* the first ID here (it makes the fence durable), the rest from
         * two threads: 12,287 and 12,288 */
        struct capacity_arg a[2];
        pthread_t th[2];

        ck_assert_int_eq(issue(sf, 1, ids, &why), SNOWFLAKE_OK);
        for (int t = 0; t < 2; t++) {
            a[t] = (struct capacity_arg){sf, t == 0 ? ids + 1 : ids + MS * SEQ / 2,
                                         MS * SEQ / 2 - (t == 0), (unsigned)t + 1};
            pthread_create(&th[t], NULL, capacity_taker, &a[t]);
        }
        for (int t = 0; t < 2; t++)
            pthread_join(th[t], NULL);
        n = MS * SEQ;
    }
    while (n < MS * SEQ) {
        /* 1 at a time in the first three ms, then batches of 1000 */
        uint32_t k = n < 3 * SEQ ? 1 : (uint32_t)(MS * SEQ - n < 1000 ? MS * SEQ - n : 1000);

        if (issue(sf, k, ids + n, &why) != SNOWFLAKE_OK)
            ck_abort_msg("after %zu IDs: %s: %s", n, why.code, why.message);
        n += k;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t ms = ts_of(sf, ids[i]) - T0;
        uint64_t seq = ids[i] & (SEQ - 1);

        if (ms < 0 || ms >= MS)
            ck_abort_msg("ID %zu of %zu in ms %+" PRId64 ": the sequence of "
                         "ms %" PRId64 " was not used up", i, n, ms,
                         ms < 0 ? ms : ms - 1);
        if (seen[ms][seq]++)
            ck_abort_msg("sequence %" PRIu64 " twice in ms %" PRId64, seq, ms);
        if (i > 0 && ids[i] < ids[i - 1] && _i != 2)
            wrapped++;
    }
    for (int ms = 0; ms < MS; ms++)
        for (int q = 0; q < SEQ; q++)
            if (!seen[ms][q])
                ck_abort_msg("sequence %d of ms %d never issued", q, ms);
    /* each ms starts at an offset and wraps to 0 at most once */
    ck_assert_int_le(wrapped, MS);
    assert_unique(ids, n);
    snowflake_stop(sf);
}
END_TEST

/* --- threads -------------------------------------------------------------- */

struct worker_arg {
    struct snowflake *sf;
    uint64_t *ids;
    size_t    n;
    size_t    cap;
    int       seed;
};

static _Atomic int hammers_done;

static void *
hammer(void *p)
{
    struct worker_arg *a = p;
    struct snowflake_refusal why;
    unsigned seed = (unsigned)a->seed;
    uint64_t prev = 0;
    int64_t wrap_ms = -1;

    while (a->n + 16 <= a->cap) {
        uint32_t k = 1 + (uint32_t)(rand_r(&seed) % 16);
        int rc = snowflake_next(a->sf, k, a->ids + a->n, &why);
        if (rc != SNOWFLAKE_OK) {
            if (rc == SNOWFLAKE_REFUSE && strcmp(why.code, "clock_behind") != 0)
                ck_abort_msg("refused: %s %s", why.code, why.message);
            continue;
        }
        int64_t max = atomic_load(&persisted_max);
        for (uint32_t i = 0; i < k; i++) {
            uint64_t id = a->ids[a->n + i];
            if (!in_order(a->sf, prev, id, &wrap_ms))
                ck_abort_msg("not increasing in a thread");
            if (ts_of(a->sf, id) > max)
                ck_abort_msg("ID beyond the persisted fence");
            prev = id;
        }
        a->n += k;
    }
    atomic_fetch_add(&hammers_done, 1);
    return NULL;
}

static void
threads_run(int chaos)
{
    enum { NT = 4, PER = 150000 };
    struct snowflake_options o;
    struct snowflake *sf;
    struct worker_arg a[NT];
    pthread_t th[NT];
    uint64_t *all = malloc((size_t)NT * PER * sizeof *all);
    size_t n = 0;

    reset_fakes();
    options(&o);
    o.no_thread = 0;           /* the real keeper thread */
    o.sequence_random = 1;
    if (!chaos) {
        o.clock = NULL;        /* CLOCK_REALTIME */
    }
    sf = make(&o);
    atomic_store(&hammers_done, 0);
    for (int i = 0; i < NT; i++) {
        a[i] = (struct worker_arg){sf, malloc(PER * sizeof(uint64_t)), 0, PER,
                                   i + 1};
        pthread_create(&th[i], NULL, hammer, &a[i]);
    }
    if (chaos) {
        /* the clock wanders by up to 300 ms each way while time passes */
        unsigned seed = 7;
        int64_t base = T0;
        while (atomic_load(&hammers_done) < NT) {
            base += 1;
            atomic_store(&fake_now, base + (int64_t)(rand_r(&seed) % 600) - 300);
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        memcpy(all + n, a[i].ids, a[i].n * sizeof *all);
        n += a[i].n;
        free(a[i].ids);
    }
    assert_unique(all, n);
    {
        struct sbuf b = {0};
        snowflake_metrics(sf, &b);
        ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_ids_total "));
        ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_clock_backward_ms_bucket{le=\"+Inf\"}"));
        sbuf_free(&b);
    }
    snowflake_stop(sf);
    free(all);
}

START_TEST(threads_no_duplicates)   { threads_run(0); }
END_TEST
START_TEST(threads_chaos_clock)     { threads_run(1); }
END_TEST

/* --- worker ID states, status, metrics --------------------------------------- */

static _Atomic int tick_result;
static int64_t acquired_fence;

static int
fake_tick(void *arg, int64_t now)
{
    (void)arg;
    (void)now;
    return atomic_exchange(&tick_result, SNOWFLAKE_TICK_NONE);
}

static int
fake_worker(void *arg, int64_t *worker, int64_t *fence)
{
    (void)arg;
    *worker = acquired_fence != 0 ? 9 : -1;
    *fence = acquired_fence;
    return acquired_fence != 0 ? 0 : -1;
}

static int wakes;

static void
count_wake(void *arg)
{
    (void)arg;
    wakes++;
}

START_TEST(worker_unknown_then_acquired)
{
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    struct sbuf b = {0};
    uint64_t id;
    json_t *j;
    json_error_t err;

    reset_fakes();
    options(&o);
    o.worker_id = -1;
    o.backend.tick = fake_tick;
    o.backend.worker = fake_worker;
    o.wake = count_wake;
    sf = make(&o);
    acquired_fence = 0;
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "worker_id_unknown");
    snowflake_keeper_step(sf);
    ck_assert_int_eq(atomic_load(&persist_calls), 0);
    /* acquired, but the first fence cannot be persisted: still refused */
    acquired_fence = T0 + 500;
    atomic_store(&tick_result, SNOWFLAKE_TICK_ACQUIRED);
    atomic_store(&persist_fail, 1);
    snowflake_keeper_step(sf);
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "worker_id_unknown");
    /* the next pass gets it */
    atomic_store(&persist_fail, 0);
    wakes = 0;
    snowflake_keeper_step(sf);
    ck_assert_int_ge(wakes, 1);
    ck_assert_int_eq(atomic_load(&persisted_max), T0 + 3500);
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_WAIT);
    ck_assert_str_eq(why.code, "fence_not_passed");
    atomic_store(&fake_now, T0 + 501);
    ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_OK);
    ck_assert_uint_eq((id >> 12) & 1023, 9);

    snowflake_state_json(sf, &b);
    j = json_loads(b.p, 0, &err);
    ck_assert_msg(j != NULL, "state JSON: %s: %s", err.text, b.p);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "worker_id")), 9);
    ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "ok");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "fence")),
                     T0 + 3500);
    json_decref(j);
    sbuf_free(&b);

    /* lease expiry and loss */
    atomic_store(&tick_result, SNOWFLAKE_TICK_LEASE_EXPIRED);
    snowflake_keeper_step(sf);
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "worker_lease_expired");
    atomic_store(&tick_result, SNOWFLAKE_TICK_LEASE_OK);
    snowflake_keeper_step(sf);
    ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_OK);
    atomic_store(&tick_result, SNOWFLAKE_TICK_LOST);
    snowflake_keeper_step(sf);
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "worker_id_lost");

    snowflake_metrics(sf, &b);
    ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_not_served_total{code=\"worker_id_lost\",answer=\"refuse\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_up 0\n"));
    sbuf_free(&b);
    snowflake_stop(sf);
}
END_TEST

static _Atomic int64_t fake_lease;

static int64_t
fake_lease_until(void *arg)
{
    (void)arg;
    return atomic_load(&fake_lease);
}

/* The lease deadline is checked on the request path: a keeper stuck in a
 * store call (here: never stepped) does not delay the stop. */
START_TEST(lease_deadline_without_keeper)
{
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    uint64_t id;

    reset_fakes();
    options(&o);
    o.backend.tick = fake_tick;
    o.backend.lease_until = fake_lease_until;
    atomic_store(&tick_result, SNOWFLAKE_TICK_NONE);
    atomic_store(&fake_lease, util_mono_ms() + 60000);
    sf = make(&o);
    ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_OK);
    /* the last write that lands gives 150 ms (published only now, so a
     * stall before the issue above cannot run it out) */
    atomic_store(&fake_lease, util_mono_ms() + 150);
    snowflake_keeper_step(sf);
    usleep(200 * 1000);             /* the keeper is "stuck": no step */
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "worker_lease_expired");
    /* a write lands: the keeper publishes the new deadline */
    atomic_store(&fake_lease, util_mono_ms() + 60000);
    snowflake_keeper_step(sf);
    ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_OK);
    /* 0: no lease */
    atomic_store(&fake_lease, 0);
    snowflake_keeper_step(sf);
    ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_OK);
    snowflake_stop(sf);
}
END_TEST

START_TEST(layout_runs_out_while_running)
{
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    uint64_t id;
    char *cause = NULL;

    reset_fakes();
    options(&o);
    /* 30-bit timestamp ending 2 ms after T0 (no time checks) */
    ck_assert_int_eq(sfcodec_layout_init(&o.layout, T0 + 2 - ((1LL << 30) - 1), 30,
                                    0, 21, 12, -1, 0, &cause), 0);
    o.max_borrow_ms = 10;
    sf = make(&o);
    ck_assert_int_eq(issue(sf, 4096, (uint64_t[4096]){0}, &why), SNOWFLAKE_OK);
    ck_assert_int_eq(issue(sf, 4096, (uint64_t[4096]){0}, &why), SNOWFLAKE_OK);
    ck_assert_int_eq(issue(sf, 4096, (uint64_t[4096]){0}, &why), SNOWFLAKE_OK);
    ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "layout_expired");
    snowflake_stop(sf);
}
END_TEST

/* snowflake.layout = js53 (41 timestamp + 5 worker + 7 sequence bits):
 * up to the layout's last ms, with the highest worker ID, every ID the
 * generator gives is at most 2^53-1 (JavaScript's Number.MAX_SAFE_INTEGER),
 * and past it the generator refuses. The last IDs have bit 52 set: the test
 * runs at the top of the range, where a wider ID would show. */
START_TEST(js53_ids_fit_53_bits)
{
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    uint64_t ids[8 * 128], top = 0;
    size_t n = 0;
    char *cause = NULL;
    int rc;
    const int64_t now = (1LL << 41) + 100000000000LL;   /* a 2^41 ms span fits */

    reset_fakes();
    atomic_store(&fake_now, now);
    options(&o);
    /* the 41-bit timestamp ends 3 ms after now */
    ck_assert_int_eq(sfcodec_layout_init(&o.layout, now + 3 - ((1LL << 41) - 1), 41,
                                    0, 5, 7, -1, 0, &cause), 0);
    o.worker_id = 31;
    o.count_max = 128;
    o.max_borrow_ms = 10;
    sf = make(&o);
    while ((rc = issue(sf, 128, ids + n, &why)) == SNOWFLAKE_OK) {
        n += 128;
        ck_assert_uint_le(n, sizeof ids / sizeof ids[0]);
    }
    ck_assert_int_eq(rc, SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "layout_expired");
    ck_assert_uint_ge(n, 3 * 128);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] > (UINT64_C(1) << 53) - 1)
            ck_abort_msg("ID %" PRIu64 " is over 2^53-1", ids[i]);
        if (ids[i] > top)
            top = ids[i];
    }
    ck_assert(top >> 52 == 1);
    assert_unique(ids, n);
    snowflake_stop(sf);
}
END_TEST

START_TEST(metrics_backward_histogram)
{
    struct snowflake_options o;
    struct snowflake *sf;
    struct snowflake_refusal why;
    struct sbuf b = {0};
    uint64_t id;

    reset_fakes();
    options(&o);
    sf = make(&o);
    ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_OK);
    atomic_store(&fake_now, T0 - 7);
    ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_OK);
    ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_OK);   /* same event */
    atomic_store(&fake_now, T0 + 5);
    ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_OK);
    atomic_store(&fake_now, T0 + 5 - 2000);
    ck_assert_int_eq(issue(sf, 1, &id, &why), SNOWFLAKE_REFUSE);
    snowflake_metrics(sf, &b);
    ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_clock_backward_ms_bucket{le=\"5\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_clock_backward_ms_bucket{le=\"10\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_clock_backward_ms_count 2\n"));
    ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_clock_backward_ms_sum 2007\n"));
    ck_assert_ptr_nonnull(strstr(b.p, "leafd_snowflake_ids_total 4\n"));
    sbuf_free(&b);
    snowflake_stop(sf);
}
END_TEST

static Suite *
snowflake_suite(void)
{
    Suite *s = suite_create("snowflake");
    TCase *tc = tcase_create("layout");

    tcase_add_test(tc, pack_decode_roundtrip);
    tcase_add_test(tc, decode_leaf_compatible);
    tcase_add_test(tc, decode_split_json);
    tcase_add_test(tc, decode_strict);
    tcase_add_test(tc, decode_cli);
    tcase_add_test(tc, layout_refusal);
    suite_add_tcase(s, tc);

    tc = tcase_create("generator");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, first_ids_and_fields);
    tcase_add_test(tc, overflow_borrows_bounded);
    tcase_add_test(tc, step_back_1ms);
    tcase_add_test(tc, step_back_5ms);
    tcase_add_test(tc, step_back_1s);
    tcase_add_test(tc, step_back_1h);
    tcase_add_test(tc, step_back_over);
    tcase_add_test(tc, step_back_and_forth);
    tcase_add_test(tc, fence_before_use);
    tcase_add_test(tc, fence_unconfirmed);
    tcase_add_test(tc, restart_behind_fence);
    tcase_add_test(tc, random_sequence_start);
    tcase_add_loop_test(tc, random_start_full_capacity, 0, 3);
    tcase_add_test(tc, threads_no_duplicates);
    tcase_add_test(tc, threads_chaos_clock);
    tcase_add_test(tc, worker_unknown_then_acquired);
    tcase_add_test(tc, lease_deadline_without_keeper);
    tcase_add_test(tc, layout_runs_out_while_running);
    tcase_add_test(tc, js53_ids_fit_53_bits);
    tcase_add_test(tc, metrics_backward_histogram);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(snowflake_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
