/* check_segment.c: unit tests of the double-buffered allocator (segment.c)
 * with a fake loader and an injectable clock. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "segment.h"

/* A fake loader: records requests; tests install ranges by hand. */
static struct segment_tag *load_req[64];
static int nload;
static char lookup_req[64][TAG_MAX + 1];
static int nlookup;
static int64_t fake_now = 1000000;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

static void
fake_load(void *arg, struct segment_tag *t)
{
    (void)arg;
    pthread_mutex_lock(&fake_lock);
    load_req[nload++ % 64] = t;
    pthread_mutex_unlock(&fake_lock);
}

static void
fake_lookup(void *arg, const char *name)
{
    (void)arg;
    snprintf(lookup_req[nlookup++ % 64], TAG_MAX + 1, "%s", name);
}

static int64_t
fake_clock(void)
{
    return fake_now;
}

static struct segments *
mk(int prefetch)
{
    struct segment_options o = { .prefetch_percent = prefetch, .max_step = 1000000,
                                 .duration_ms = 900000, .negative_ttl_ms = 10000 };
    struct segment_hooks h = { .load = fake_load, .lookup = fake_lookup,
                               .now_ms = fake_clock };
    nload = nlookup = 0;
    return segments_new(&o, &h);
}

static struct store_row
row(const char *name, int64_t max_id, int64_t step)
{
    struct store_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.biz_tag, sizeof r.biz_tag, "%s", name);
    r.max_id = max_id;
    r.step = step;
    return r;
}

/* Serve a pending load of t the way the loader does. */
static int64_t db_max = 1;
static void
serve_load(struct segments *s, struct segment_tag *t)
{
    int64_t step = segment_next_step(s, t);
    db_max += step;
    segment_install(s, t, db_max, step, step == 0 ? 1 : step);
}

static int64_t
take1(struct segments *s, const char *name, enum segment_result *res)
{
    struct segment_take st;
    memset(&st, 0, sizeof st);
    *res = segment_take(s, name, strlen(name), 1, &st);
    return *res == SEGMENT_OK ? st.ranges[0].start : -1;
}

START_TEST(unknown_tag_lookup_then_negative)
{
    struct segments *s = mk(10);
    enum segment_result r;

    ck_assert_int_eq(take1(s, "nope", &r), -1);
    ck_assert_int_eq(r, SEGMENT_WAIT);
    ck_assert_int_eq(nlookup, 1);
    /* A second request while the lookup is in flight does not ask again. */
    take1(s, "nope", &r);
    ck_assert_int_eq(r, SEGMENT_WAIT);
    ck_assert_int_eq(nlookup, 1);
    segment_tag_missing(s, "nope");
    take1(s, "nope", &r);
    ck_assert_int_eq(r, SEGMENT_UNKNOWN);
    ck_assert_int_eq(nlookup, 1);
    /* After the TTL, the database is asked again. */
    fake_now += 10001;
    take1(s, "nope", &r);
    ck_assert_int_eq(r, SEGMENT_WAIT);
    ck_assert_int_eq(nlookup, 2);
    segments_free(s);
}
END_TEST

START_TEST(first_take_waits_then_serves)
{
    struct segments *s = mk(10);
    struct store_row rw = row("t", 1, 100);
    enum segment_result r;

    segment_refresh(s, &rw, 1, segments_generation(s));
    ck_assert_int_eq(take1(s, "t", &r), -1);
    ck_assert_int_eq(r, SEGMENT_WAIT);
    ck_assert_int_eq(nload, 1);
    db_max = 1;
    serve_load(s, load_req[0]);           /* [1, 101) */
    ck_assert_int_eq(take1(s, "t", &r), 1);
    ck_assert_int_eq(take1(s, "t", &r), 2);
    segments_free(s);
}
END_TEST

START_TEST(buffer_switch_and_prefetch)
{
    struct segments *s = mk(10);
    struct store_row rw = row("t", 1, 100);
    enum segment_result r;
    int64_t prev = 0;

    segment_refresh(s, &rw, 1, segments_generation(s));
    take1(s, "t", &r);
    db_max = 1;
    serve_load(s, load_req[0]);           /* [1, 101) */
    for (int i = 1; i <= 9; i++)
        ck_assert_int_eq(take1(s, "t", &r), i);
    ck_assert_int_eq(nload, 1);           /* 9% used: no prefetch yet */
    ck_assert_int_eq(take1(s, "t", &r), 10);
    ck_assert_int_eq(nload, 2);           /* 10% used: next segment asked for */
    fake_now += 1000;                     /* fast: the step doubles */
    serve_load(s, load_req[1]);           /* [101, 301) */
    for (int i = 11; i <= 100; i++)
        ck_assert_int_eq(take1(s, "t", &r), i);
    /* The switch: no gap, no wait. */
    for (int i = 101; i <= 300; i++) {
        int64_t id = take1(s, "t", &r);
        ck_assert_int_eq(r, SEGMENT_OK);
        ck_assert_int_eq(id, i);
        prev = id;
    }
    ck_assert_int_eq(prev, 300);
    ck_assert_int_eq(nload, 3);
    /* Both buffers empty: wait. */
    ck_assert_int_eq(take1(s, "t", &r), -1);
    ck_assert_int_eq(r, SEGMENT_WAIT);
    segments_free(s);
}
END_TEST

START_TEST(batch_across_segment_end)
{
    struct segments *s = mk(50);
    struct store_row rw = row("t", 1, 10);
    struct segment_take st;
    enum segment_result r;

    segment_refresh(s, &rw, 1, segments_generation(s));
    take1(s, "t", &r);
    db_max = 1;
    serve_load(s, load_req[0]);           /* [1, 11) */
    memset(&st, 0, sizeof st);
    /* 15 IDs: 10 from this segment, then wait for the next. */
    ck_assert_int_eq(segment_take(s, "t", 1, 15, &st), SEGMENT_WAIT);
    ck_assert_int_eq(st.nranges, 1);
    ck_assert_int_eq(st.ranges[0].start, 1);
    ck_assert_int_eq(st.ranges[0].count, 10);
    serve_load(s, load_req[1]);
    ck_assert_int_eq(segment_take(s, "t", 1, 15, &st), SEGMENT_OK);
    ck_assert_int_eq(st.nranges, 1);      /* contiguous: merged */
    ck_assert_int_eq(st.ranges[0].start, 1);
    ck_assert_int_eq(st.ranges[0].count, 15);
    segments_free(s);
}
END_TEST

START_TEST(batch_spanning_two_ready_segments_with_gap)
{
    struct segments *s = mk(10);
    struct store_row rw = row("t", 1, 10);
    struct segment_take st;
    enum segment_result r;
    int64_t step;

    segment_refresh(s, &rw, 1, segments_generation(s));
    take1(s, "t", &r);
    db_max = 1;
    serve_load(s, load_req[0]);           /* [1, 11) */
    take1(s, "t", &r);                    /* 1; prefetch asked */
    /* Another node took a range meanwhile: the next one is not adjacent. */
    db_max += 1000;
    step = segment_next_step(s, load_req[1]);
    db_max += step;
    segment_install(s, load_req[1], db_max, step, 10);
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_take(s, "t", 1, 12, &st), SEGMENT_OK);
    ck_assert_int_eq(st.nranges, 2);
    ck_assert_int_eq(st.ranges[0].start, 2);
    ck_assert_int_eq(st.ranges[0].count, 9);
    ck_assert_int_eq(st.ranges[1].start, db_max - step);
    ck_assert_int_eq(st.ranges[1].count, 3);
    segments_free(s);
}
END_TEST

/* Issue 9 item 7: with a step of 10 and another node taking a range
 * between each of ours, 100 IDs need 10 segments. The old code took them
 * and waited forever for a ninth range it could not hold (each wake dropped
 * what it had just taken), then 503. Now a batch that could need more than
 * SEGMENT_MAX_RANGES segments is refused before anything is taken, with the
 * limit, and one within the limit completes. */
START_TEST(batch_over_the_range_limit)
{
    struct segments *s = mk(10);
    struct store_row rw = row("t", 1, 10);
    struct segment_take st;
    enum segment_result r;
    int64_t total = 0;

    segment_refresh(s, &rw, 1, segments_generation(s));
    take1(s, "t", &r);
    db_max = 1;
    serve_load(s, load_req[0]);                  /* [1, 11) */
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_take(s, "t", 1, 100, &st), SEGMENT_TOO_LARGE);
    ck_assert_int_eq(st.limit, (SEGMENT_MAX_RANGES - 1) * 10);
    ck_assert_int_eq(st.nranges, 0);
    ck_assert_int_eq(take1(s, "t", &r), 1);      /* nothing was taken */
    /* The limit itself: 70 IDs over 8 ranges, another node in between. */
    memset(&st, 0, sizeof st);
    for (int i = 1; i <= 10; i++) {
        r = segment_take(s, "t", 1, 70, &st);
        if (r == SEGMENT_OK)
            break;
        ck_assert_int_eq(r, SEGMENT_WAIT);
        db_max += 1000;                          /* the other node */
        serve_load(s, load_req[i]);
    }
    ck_assert_int_eq(r, SEGMENT_OK);
    ck_assert_int_le(st.nranges, SEGMENT_MAX_RANGES);
    for (int i = 0; i < st.nranges; i++) {
        total += st.ranges[i].count;
        if (i > 0)
            ck_assert_int_gt(st.ranges[i].start, st.ranges[i - 1].start);
    }
    ck_assert_int_eq(total, 70);
    segments_free(s);
}
END_TEST

/* Many threads take at once while a "loader" thread installs segments. */
#define NTHREADS 4
#define PER_THREAD 200000
static struct segments *race_s;
static int64_t *race_ids[NTHREADS];
static _Atomic int race_done;

static void *
race_taker(void *arg)
{
    int me = (int)(intptr_t)arg;
    int got = 0;

    while (got < PER_THREAD) {
        struct segment_take st;
        int64_t n = 1 + (got % 3);       /* singles and small batches */
        memset(&st, 0, sizeof st);
        if (n > PER_THREAD - got)
            n = PER_THREAD - got;
        while (segment_take(race_s, "t", 1, n, &st) == SEGMENT_WAIT)
            ;   /* spin: the loader thread installs */
        for (int i = 0; i < st.nranges; i++)
            for (int64_t k = 0; k < st.ranges[i].count; k++)
                race_ids[me][got++] = st.ranges[i].start + k;
    }
    return NULL;
}

static void *
race_loader(void *arg)
{
    (void)arg;
    int served = 0;
    while (!race_done) {
        struct segment_tag *t = NULL;
        pthread_mutex_lock(&fake_lock);
        if (nload > served)
            t = load_req[served++ % 64];
        pthread_mutex_unlock(&fake_lock);
        if (t != NULL) {
            int64_t step = 1000;          /* fixed, to check contiguity */
            db_max += step;
            segment_install(race_s, t, db_max, step, 1000);
        }
    }
    return NULL;
}

static int
cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Runs the race; returns every ID handed out, sorted, and checks that none
 * repeats. */
static int64_t *
race_run(size_t *np)
{
    struct store_row rw = row("t", 1, 1000);
    pthread_t th[NTHREADS], lt;
    int64_t *all = malloc(sizeof(int64_t) * NTHREADS * PER_THREAD);
    size_t n = 0;

    race_s = mk(10);
    db_max = 1;
    race_done = 0;
    segment_refresh(race_s, &rw, 1, segments_generation(race_s));
    pthread_create(&lt, NULL, race_loader, NULL);
    for (int i = 0; i < NTHREADS; i++) {
        race_ids[i] = malloc(sizeof(int64_t) * PER_THREAD);
        pthread_create(&th[i], NULL, race_taker, (void *)(intptr_t)i);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    race_done = 1;
    pthread_join(lt, NULL);
    for (int i = 0; i < NTHREADS; i++) {
        /* (Per thread, IDs trend upward but need not strictly increase: a
         * thread stalled across a switch may take from the next range.) */
        memcpy(all + n, race_ids[i], sizeof(int64_t) * PER_THREAD);
        n += PER_THREAD;
        free(race_ids[i]);
    }
    qsort(all, n, sizeof *all, cmp64);
    for (size_t k = 1; k < n; k++)
        ck_assert_msg(all[k - 1] != all[k], "duplicate ID %lld", (long long)all[k]);
    segments_free(race_s);
    *np = n;
    return all;
}

START_TEST(threads_no_duplicate_no_gap)
{
    size_t n;
    int64_t *all = race_run(&n);

    /* Ranges are contiguous here (one node, fixed step), so below the
     * highest ID handed out the only gaps are the ones segment.c's DESIGN
     * allows: a taker stalled across a whole segment's lifetime and a
     * refill loses its add (at most 3 IDs here). That takes a rare stall
     * (seen once under TSan: 1 ID in 800,000); a bug losing IDs at every
     * switch would lose hundreds. */
    ck_assert_uint_eq(n, NTHREADS * PER_THREAD);
    ck_assert_int_eq(all[0], 1);
    ck_assert_msg(all[n - 1] - (int64_t)n <= 3 * NTHREADS,
                  "%lld IDs missing below %lld", (long long)(all[n - 1] - (int64_t)n),
                  (long long)all[n - 1]);
    if (all[n - 1] != (int64_t)n)
        printf("check_segment: %lld IDs lost to stalled takers (allowed)\n",
               (long long)(all[n - 1] - (int64_t)n));
    free(all);
}
END_TEST

START_TEST(step_adaptation)
{
    /* Leaf's rule, target 15 min. */
    ck_assert_int_eq(segment_adapt_step(1000, 1000, 1000000, 60000, 900000), 2000);
    ck_assert_int_eq(segment_adapt_step(800000, 1000, 1000000, 60000, 900000), 800000);
    ck_assert_int_eq(segment_adapt_step(500000, 1000, 1000000, 60000, 900000), 1000000);
    ck_assert_int_eq(segment_adapt_step(4000, 1000, 1000000, 1200000, 900000), 4000);
    ck_assert_int_eq(segment_adapt_step(4000, 1000, 1000000, 1800000, 900000), 2000);
    ck_assert_int_eq(segment_adapt_step(1000, 1000, 1000000, 7200000, 900000), 1000);
    ck_assert_int_eq(segment_adapt_step(1500, 1000, 1000000, 7200000, 900000), 1500);
}
END_TEST

/* Issue 9 item 4: the step adapts once per installed segment. A load that
 * fails and is retried (segment_next_step again, nothing installed) asks for
 * the same step; the old code doubled it on every retry, so a one-second
 * blip made the next segment 16-32 times its intended size. */
START_TEST(step_grows_once_per_installed_segment)
{
    struct segments *s = mk(10);
    struct store_row rw = row("t", 1, 100);
    enum segment_result r;
    struct segment_tag *t;

    segment_refresh(s, &rw, 1, segments_generation(s));
    take1(s, "t", &r);
    t = load_req[0];
    ck_assert_int_eq(segment_next_step(s, t), 100);
    segment_install(s, t, 101, 100, 100);
    fake_now += 60000;
    ck_assert_int_eq(segment_next_step(s, t), 200);    /* adapted once */
    for (int i = 0; i < 10; i++) {                      /* retries fail */
        segment_load_failed(s, t);
        fake_now += 100;
        ck_assert_int_eq(segment_next_step(s, t), 200);
    }
    segment_install(s, t, 301, 200, 100);
    fake_now += 60000;
    ck_assert_int_eq(segment_next_step(s, t), 400);     /* the next install */
    segments_free(s);
}
END_TEST

START_TEST(step_adapts_with_clock_and_dba_change)
{
    struct segments *s = mk(10);
    struct store_row rw = row("t", 1, 100);
    enum segment_result r;
    struct segment_tag *t;

    segment_refresh(s, &rw, 1, segments_generation(s));
    take1(s, "t", &r);
    t = load_req[0];
    ck_assert_int_eq(segment_next_step(s, t), 100);   /* first load: table's step */
    segment_install(s, t, 101, 100, 100);
    fake_now += 60000;                                 /* lasted 1 min */
    ck_assert_int_eq(segment_next_step(s, t), 200);
    segment_install(s, t, 301, 200, 100);
    fake_now += 60000;
    ck_assert_int_eq(segment_next_step(s, t), 400);
    segment_install(s, t, 701, 400, 100);
    fake_now += 3600000;                               /* lasted 1 h: halve */
    ck_assert_int_eq(segment_next_step(s, t), 200);
    segment_install(s, t, 901, 200, 100);
    /* The DBA sets step = 5000: the next load uses it. */
    rw.step = 5000;
    segment_refresh(s, &rw, 1, segments_generation(s));
    fake_now += 60000;
    ck_assert_int_eq(segment_next_step(s, t), 5000);
    segment_install(s, t, 5901, 5000, 5000);
    /* ...and halving never goes below it. */
    fake_now += 7200000;
    ck_assert_int_eq(segment_next_step(s, t), 5000);
    /* A change seen only in a load's own SELECT counts from the next load. */
    segment_install(s, t, 10901, 5000, 300);
    fake_now += 7200000;
    ck_assert_int_eq(segment_next_step(s, t), 300);
    segments_free(s);
}
END_TEST

START_TEST(deleted_tag_is_unknown)
{
    struct segments *s = mk(10);
    struct store_row rows[2] = { row("a", 1, 10), row("b", 1, 10) };
    enum segment_result r;

    segment_refresh(s, rows, 2, segments_generation(s));
    ck_assert_uint_eq(segments_count(s), 2);
    segment_refresh(s, rows, 1, segments_generation(s));            /* b deleted */
    take1(s, "b", &r);
    ck_assert_int_eq(r, SEGMENT_UNKNOWN);
    take1(s, "a", &r);
    ck_assert_int_eq(r, SEGMENT_WAIT);
    segment_refresh(s, rows, 2, segments_generation(s));            /* b back */
    take1(s, "b", &r);
    ck_assert_int_eq(r, SEGMENT_WAIT);
    segments_free(s);
}
END_TEST

START_TEST(many_tags_registry_grows)
{
    struct segments *s = mk(10);
    enum segment_result r;

    for (int i = 0; i < 10000; i++) {
        char name[32];
        struct store_row rw;
        snprintf(name, sizeof name, "tag-%d", i);
        rw = row(name, 1, 10);
        segment_tag_found(s, &rw);
    }
    ck_assert_uint_eq(segments_count(s), 10000);
    for (int i = 0; i < 10000; i += 97) {
        char name[32];
        snprintf(name, sizeof name, "tag-%d", i);
        take1(s, name, &r);
        ck_assert_int_eq(r, SEGMENT_WAIT);       /* known: asks for a load */
    }
    ck_assert_int_eq(nlookup, 0);
    segments_free(s);
}
END_TEST

/* Names that differ only in their last bytes must not share buckets (the
 * negative cache is one slot per bucket): 200 such unknown names, each
 * looked up once, then all remembered. */
START_TEST(negative_cache_spreads_similar_names)
{
    struct segments *s = mk(10);
    enum segment_result r;
    char name[32];

    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "junk-%d-%d", i / 50, i % 50);
        take1(s, name, &r);
        segment_tag_missing(s, name);
    }
    ck_assert_int_eq(nlookup, 200);
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "junk-%d-%d", i / 50, i % 50);
        take1(s, name, &r);
    }
    /* A handful of hash collisions may evict a few entries, no more. */
    ck_assert_int_le(nlookup, 210);
    segments_free(s);
}
END_TEST

/* A tag a lookup found while a refresh's list was being read is not marked
 * gone by that list. */
START_TEST(refresh_does_not_drop_tags_found_meanwhile)
{
    struct segments *s = mk(10);
    struct store_row a = row("a", 1, 10), b = row("b", 1, 10);
    enum segment_result r;
    uint64_t since;

    segment_refresh(s, &a, 1, segments_generation(s));
    since = segments_generation(s);       /* the list read starts: only "a" */
    segment_tag_found(s, &b);             /* a lookup finds "b" meanwhile */
    segment_refresh(s, &a, 1, since);
    take1(s, "b", &r);
    ck_assert_int_eq(r, SEGMENT_WAIT);    /* known, asks for a segment */
    /* The next refresh that still lacks it does mark it gone. */
    segment_refresh(s, &a, 1, segments_generation(s));
    take1(s, "b", &r);
    ck_assert_int_eq(r, SEGMENT_UNKNOWN);
    segments_free(s);
}
END_TEST

START_TEST(broken_row_until_read_again)
{
    struct segments *s = mk(10);
    struct store_row rw = row("t", 1, 0);
    enum segment_result r;

    segment_refresh(s, &rw, 1, segments_generation(s));
    take1(s, "t", &r);
    ck_assert_int_eq(r, SEGMENT_WAIT);
    segment_tag_broken(s, load_req[0]);   /* the store said: step 0 */
    /* Issue 9 item 5: while broken, requests load nothing (the old code
     * ran one transaction and logged one error per request). */
    for (int i = 0; i < 5; i++) {
        take1(s, "t", &r);
        ck_assert_int_eq(r, SEGMENT_BROKEN);
    }
    ck_assert_int_eq(nload, 1);
    rw.step = 10;                         /* the DBA fixes it */
    segment_refresh(s, &rw, 1, segments_generation(s));
    take1(s, "t", &r);
    ck_assert_int_eq(r, SEGMENT_WAIT);
    ck_assert_int_eq(nload, 2);
    segments_free(s);
}
END_TEST

int
main(void)
{
    Suite *su = suite_create("segment");
    TCase *tc = tcase_create("allocator");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, unknown_tag_lookup_then_negative);
    tcase_add_test(tc, first_take_waits_then_serves);
    tcase_add_test(tc, buffer_switch_and_prefetch);
    tcase_add_test(tc, batch_across_segment_end);
    tcase_add_test(tc, batch_spanning_two_ready_segments_with_gap);
    tcase_add_test(tc, threads_no_duplicate_no_gap);
    tcase_add_test(tc, batch_over_the_range_limit);
    tcase_add_test(tc, step_grows_once_per_installed_segment);
    tcase_add_test(tc, step_adaptation);
    tcase_add_test(tc, step_adapts_with_clock_and_dba_change);
    tcase_add_test(tc, deleted_tag_is_unknown);
    tcase_add_test(tc, many_tags_registry_grows);
    tcase_add_test(tc, negative_cache_spreads_similar_names);
    tcase_add_test(tc, refresh_does_not_drop_tags_found_meanwhile);
    tcase_add_test(tc, broken_row_until_read_again);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
