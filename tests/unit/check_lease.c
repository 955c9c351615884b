/* check_lease.c: unit tests of segment_lease (segment.c, DESIGN: leases)
 * with a fake loader and a fake table: when leases come from the buffers
 * and when from the table, how they are counted, and a race of leases,
 * single IDs and installs in which no ID may come out twice. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "segment.h"

/* The fake table: max_id of the one row, advanced under a lock as the
 * UPDATE max_id = max_id + n transaction would. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t table_max = 1;

static int64_t
table_alloc(int64_t n)
{
    int64_t end;

    pthread_mutex_lock(&table_lock);
    table_max += n;
    end = table_max;
    pthread_mutex_unlock(&table_lock);
    return end;
}

static struct segment_tag *pending_load[1024];
static int npending;
static int nlookup;

static void
fake_load(void *arg, struct segment_tag *t)
{
    (void)arg;
    pthread_mutex_lock(&table_lock);
    pending_load[npending++ % 1024] = t;
    pthread_mutex_unlock(&table_lock);
}

static void
fake_lookup(void *arg, const char *name)
{
    (void)arg;
    (void)name;
    nlookup++;
}

static struct segments *
mk(void)
{
    struct segment_options o = { .prefetch_percent = 20, .max_step = 1000000,
                                 .duration_ms = 900000, .negative_ttl_ms = 10000 };
    struct segment_hooks h = { .load = fake_load, .lookup = fake_lookup };
    struct store_row r;

    memset(&r, 0, sizeof r);
    snprintf(r.biz_tag, sizeof r.biz_tag, "t");
    r.step = 1000;
    npending = nlookup = 0;
    table_max = 1;
    {
        struct segments *s = segments_new(&o, &h);
        segment_tag_found(s, &r);
        return s;
    }
}

/* Serve one pending load, as loader.c does. Returns 0 if none. */
static int
serve_one(struct segments *s)
{
    struct segment_tag *t = NULL;
    static int served;

    pthread_mutex_lock(&table_lock);
    if (npending > served)
        t = pending_load[served++ % 1024];
    pthread_mutex_unlock(&table_lock);
    if (t == NULL)
        return 0;
    {
        int64_t step = segment_next_step(s, t);
        segment_install(s, t, table_alloc(step), step, 1000);
    }
    return 1;
}

static struct segment_tag_info got_info;

static void
grab_info(const struct segment_tag_info *in, void *arg)
{
    (void)arg;
    got_info = *in;
}

START_TEST(lease_unknown_tag_is_looked_up)
{
    struct segments *s = mk();
    struct segment_take st;
    int from_db = -1;

    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_lease(s, "nope", 4, 10, 0, &st, &from_db), SEGMENT_WAIT);
    ck_assert_int_eq(nlookup, 1);
    segment_tag_missing(s, "nope");
    ck_assert_int_eq(segment_lease(s, "nope", 4, 10, 0, &st, &from_db), SEGMENT_UNKNOWN);
    segments_free(s);
}
END_TEST

START_TEST(lease_from_buffers_only_when_they_hold_twice)
{
    struct segments *s = mk();
    struct segment_take st, one;
    int from_db = -1;

    /* Nothing loaded yet: the table. */
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_lease(s, "t", 1, 10, 0, &st, &from_db), SEGMENT_OK);
    ck_assert_int_eq(from_db, 1);
    ck_assert_int_eq(st.nranges, 0);
    ck_assert_int_eq(st.want, 10);

    /* A segment [1, 1001): one ID, then a lease of 100 from it. */
    memset(&one, 0, sizeof one);
    ck_assert_int_eq(segment_take(s, "t", 1, 1, &one), SEGMENT_WAIT);
    ck_assert(serve_one(s));
    memset(&one, 0, sizeof one);
    ck_assert_int_eq(segment_take(s, "t", 1, 1, &one), SEGMENT_OK);
    ck_assert_int_eq(one.ranges[0].start, 1);
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_lease(s, "t", 1, 100, 0, &st, &from_db), SEGMENT_OK);
    ck_assert_int_eq(from_db, 0);
    ck_assert_int_eq(st.nranges, 1);
    ck_assert_int_eq(st.ranges[0].start, 2);
    ck_assert_int_eq(st.ranges[0].count, 100);

    /* 899 left: a lease of 450 would leave less than it takes. */
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_lease(s, "t", 1, 450, 0, &st, &from_db), SEGMENT_OK);
    ck_assert_int_eq(from_db, 1);
    ck_assert_int_eq(st.nranges, 0);
    segment_lease_db_done(s, st.tag, 450);
    /* A table lease of 3000: the next load asks for at least 6000 (the
     * rate alone would give 2000). */
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_lease(s, "t", 1, 3000, 0, &st, &from_db), SEGMENT_OK);
    ck_assert_int_eq(from_db, 1);
    segment_lease_db_done(s, st.tag, 3000);
    ck_assert_int_ge(segment_next_step(s, st.tag), 6000);

    /* contiguous: always the table, even for one ID. */
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_lease(s, "t", 1, 1, 1, &st, &from_db), SEGMENT_OK);
    ck_assert_int_eq(from_db, 1);
    /* n <= 0: the row's step. */
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_lease(s, "t", 1, 0, 1, &st, &from_db), SEGMENT_OK);
    ck_assert_int_eq(st.want, 1000);

    /* Counted apart: 1 served, 100 leased from the buffers, 450 from the
     * table, two leases answered. */
    segments_foreach(s, grab_info, NULL);
    ck_assert_int_eq(got_info.issued, 1);
    ck_assert_int_eq(got_info.leased_buf, 100);
    ck_assert_int_eq(got_info.leased_db, 3450);
    ck_assert_int_eq(got_info.leases, 3);
    segments_free(s);
}
END_TEST

START_TEST(lease_on_broken_or_gone_tag)
{
    struct segments *s = mk();
    struct segment_take st;
    int from_db;
    struct segment_tag *t;

    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_lease(s, "t", 1, 5, 1, &st, &from_db), SEGMENT_OK);
    t = st.tag;
    segment_tag_broken(s, t);
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_lease(s, "t", 1, 5, 0, &st, &from_db), SEGMENT_BROKEN);
    segment_tag_gone(s, t);
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_lease(s, "t", 1, 5, 0, &st, &from_db), SEGMENT_UNKNOWN);
    segments_free(s);
}
END_TEST

/* Threads lease (from the buffers or the fake table) and take single IDs
 * while a loader thread installs segments: no ID twice. */
#define NT 4
#define PER 60000
static struct segments *race_s;
static int64_t *race_ids[NT];
static int race_n[NT];
static _Atomic int race_done;
static _Atomic int64_t race_leased;     /* IDs the lease threads got */

static void
keep(int me, int64_t start, int64_t count)
{
    for (int64_t k = 0; k < count && race_n[me] < PER; k++)
        race_ids[me][race_n[me]++] = start + k;
}

static void *
race_thread(void *arg)
{
    int me = (int)(intptr_t)arg;
    int k = 0;

    while (race_n[me] < PER) {
        struct segment_take st;
        int from_db = 0;
        enum segment_result r;

        memset(&st, 0, sizeof st);
        k++;
        if (me % 2 == 0) {
            int64_t n = 1 + (k * 7) % 300;

            r = segment_lease(race_s, "t", 1, n, 0, &st, &from_db);
            ck_assert_int_eq(r, SEGMENT_OK);
            race_leased += n;
            for (int i = 0; i < st.nranges; i++)
                keep(me, st.ranges[i].start, st.ranges[i].count);
            if (from_db) {
                int64_t end = table_alloc(st.want);
                keep(me, end - st.want, st.want);
                segment_lease_db_done(race_s, st.tag, st.want);
            }
        } else {
            while ((r = segment_take(race_s, "t", 1, 1 + k % 3, &st)) == SEGMENT_WAIT)
                ;
            ck_assert_int_eq(r, SEGMENT_OK);
            for (int i = 0; i < st.nranges; i++)
                keep(me, st.ranges[i].start, st.ranges[i].count);
        }
    }
    return NULL;
}

static void *
race_loader(void *arg)
{
    (void)arg;
    while (!race_done)
        serve_one(race_s);
    return NULL;
}

static int
cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

START_TEST(race_leases_and_takes_no_duplicate)
{
    pthread_t th[NT], ld;
    int64_t *all = malloc(sizeof *all * NT * PER);
    size_t n = 0;

    race_s = mk();
    race_done = 0;
    race_leased = 0;
    pthread_create(&ld, NULL, race_loader, NULL);
    for (int i = 0; i < NT; i++) {
        race_ids[i] = malloc(sizeof(int64_t) * PER);
        race_n[i] = 0;
        pthread_create(&th[i], NULL, race_thread, (void *)(intptr_t)i);
    }
    for (int i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    race_done = 1;
    pthread_join(ld, NULL);
    for (int i = 0; i < NT; i++) {
        memcpy(all + n, race_ids[i], sizeof *all * (size_t)race_n[i]);
        n += (size_t)race_n[i];
        free(race_ids[i]);
    }
    ck_assert_uint_eq(n, (size_t)NT * PER);
    qsort(all, n, sizeof *all, cmp64);
    for (size_t i = 1; i < n; i++)
        ck_assert_msg(all[i] != all[i - 1], "ID %lld twice", (long long)all[i]);
    segments_foreach(race_s, grab_info, NULL);
    /* Every leased ID counted once, from the buffers or the table. */
    ck_assert_int_eq(got_info.leased_buf + got_info.leased_db, race_leased);
    free(all);
    segments_free(race_s);
}
END_TEST

int
main(void)
{
    Suite *su = suite_create("lease");
    TCase *tc = tcase_create("lease");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, lease_unknown_tag_is_looked_up);
    tcase_add_test(tc, lease_from_buffers_only_when_they_hold_twice);
    tcase_add_test(tc, lease_on_broken_or_gone_tag);
    tcase_add_test(tc, race_leases_and_takes_no_duplicate);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
