/* check_segment_wrap.c: segment.c built with a 4-bit generation
 * (-DCTR_OFFSET_BITS=60, see the Makefile), so that the generation in a
 * slot's counter wraps after 16 refills instead of 2^24. A block held by an
 * idle thread across a whole wrap must neither come back to life nor give
 * its IDs back into the new incarnation (which would repeat IDs). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "segment.h"

static struct segment_tag *pending;

static void
fake_load(void *arg, struct segment_tag *t)
{
    (void)arg;
    pending = t;
}

static void
fake_lookup(void *arg, const char *name)
{
    (void)arg;
    (void)name;
}

static int64_t
frozen_us(void)
{
    return 1000;        /* every refill looks fast: blocks grow at once */
}

/* Every ID handed out, to look for repeats. */
static int64_t seen[4096];
static int nseen;

static void
saw(int64_t id)
{
    for (int i = 0; i < nseen; i++)
        ck_assert_msg(seen[i] != id, "ID %lld handed out twice", (long long)id);
    seen[nseen++] = id;
}

static void
take(struct segments *s, int64_t n)
{
    struct segment_take st;

    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_take_local(s, "t", 1, n, &st), SEGMENT_OK);
    for (int i = 0; i < st.nranges; i++)
        for (int64_t k = 0; k < st.ranges[i].count; k++)
            saw(st.ranges[i].start + k);
}

START_TEST(block_held_across_generation_wrap)
{
    struct segment_options o = { .prefetch_percent = 99, .max_step = 1000000,
                                 .duration_ms = 900000, .negative_ttl_ms = 10000,
                                 .block_max = 64 };
    struct segment_hooks h = { .load = fake_load, .lookup = fake_lookup,
                               .now_us = frozen_us };
    struct segments *s = segments_new(&o, &h);
    struct segment_range held[4];
    struct segment_take st;
    struct store_row row;
    int64_t db_max = 0, end;

    memset(&row, 0, sizeof row);
    strcpy(row.biz_tag, "t");
    row.step = 64;
    segment_refresh(s, &row, 1, segments_generation(s));
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_take_local(s, "t", 1, 1, &st), SEGMENT_WAIT);
    ck_assert_ptr_nonnull(pending);

    /* Slot X: [0, 64). Single takes until one takes a block (the first
     * switches slots the common way; then blocks of 1, then 2). The block
     * leaves X's counter at `end`. */
    segment_install(s, pending, db_max += 64, 64, 64);
    for (int i = 0; i < 5 && segment_thread_held(s, held, 4) == 0; i++)
        take(s, 1);
    ck_assert_uint_eq(segment_thread_held(s, held, 4), 1);
    end = held[0].start + held[0].count;
    take(s, 64 - end);                          /* X used up */

    /* 32 more refills, alternating slots: X's 16th refill brings its
     * generation back to the block's. Each range is used up at once. */
    for (int i = 0; i < 31; i++) {
        segment_install(s, pending, db_max += 4, 4, 64);
        take(s, 4);
    }
    segment_install(s, pending, db_max += 64, 64, 64);
    take(s, end);             /* X again, counter where the block left it */

    /* The old block is not live (its incarnation is gone) ... */
    ck_assert_uint_eq(segment_thread_held(s, held, 4), 0);
    /* ... and releasing it gives nothing back into the new incarnation. */
    segment_thread_release(s);
    take(s, 2);
    take(s, 1);
    segments_free(s);
}
END_TEST

int
main(void)
{
    Suite *su = suite_create("segment_wrap");
    TCase *tc = tcase_create("wrap");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, block_held_across_generation_wrap);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
