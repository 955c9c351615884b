/* check_segment_wrap.c: segment.c built with a 4-bit generation
 * (-DCTR_OFFSET_BITS=60, see the Makefile), so that the generation in a
 * slot's counter wraps after 16 refills instead of 2^24. Takes across
 * several wraps, single IDs and batches, must keep serving every range
 * whole: no repeat, no ID lost, no take refused. */
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
    ck_assert_int_eq(segment_take(s, "t", 1, n, &st), SEGMENT_OK);
    for (int i = 0; i < st.nranges; i++)
        for (int64_t k = 0; k < st.ranges[i].count; k++)
            saw(st.ranges[i].start + k);
}

START_TEST(takes_across_generation_wraps)
{
    struct segment_options o = { .prefetch_percent = 99, .max_step = 1000000,
                                 .duration_ms = 900000, .negative_ttl_ms = 10000 };
    struct segment_hooks h = { .load = fake_load, .lookup = fake_lookup };
    struct segments *s = segments_new(&o, &h);
    struct segment_take st;
    struct store_row row;
    int64_t db_max = 0;

    memset(&row, 0, sizeof row);
    strcpy(row.biz_tag, "t");
    row.step = 8;
    segment_refresh(s, &row, 1, segments_generation(s));
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(segment_take(s, "t", 1, 1, &st), SEGMENT_WAIT);
    ck_assert_ptr_nonnull(pending);

    /* 100 refills of 8 IDs, alternating slots: each slot's generation wraps
     * three times. Each range goes as a single, a pair and a batch of 5. */
    for (int i = 0; i < 100; i++) {
        segment_install(s, pending, db_max += 8, 8, 8);
        take(s, 1);
        take(s, 2);
        take(s, 5);
    }
    ck_assert_int_eq(nseen, 800);
    for (int i = 0; i < nseen; i++)
        ck_assert_int_eq(seen[i], i);   /* contiguous: nothing lost */
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

    tcase_add_test(tc, takes_across_generation_wraps);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
