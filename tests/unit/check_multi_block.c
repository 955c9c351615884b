/* check_multi_block.c: which IDs each database of a multi-db set may hand
 * out (store_block_start), the URL list (store_multi_split), and a
 * member missing from a new list (store_multi_missing). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "multi_block.h"

static int64_t
start_of(int64_t r, int64_t n, int64_t b, int64_t since, int64_t from, int64_t step)
{
    struct multi_meta mm = { r, n, b, since, 0 };

    return store_block_start(&mm, from, step);
}

START_TEST(test_block_start)
{
    /* Two databases, blocks of 100 from block 1: database 1 owns 100..199,
     * 300..399; database 0 owns 200..299. */
    ck_assert_int_eq(start_of(1, 2, 100, 1, 1, 10), 100);
    ck_assert_int_eq(start_of(0, 2, 100, 1, 1, 10), 200);
    ck_assert_int_eq(start_of(1, 2, 100, 1, 150, 50), 150);     /* fits exactly */
    ck_assert_int_eq(start_of(1, 2, 100, 1, 150, 51), 300);     /* would cross */
    ck_assert_int_eq(start_of(0, 2, 100, 1, 250, 10), 250);
    ck_assert_int_eq(start_of(0, 2, 100, 1, 300, 10), 400);     /* 300s are 1's */
    /* Block 0 is owned by database 0: IDs start at 1, never 0. */
    ck_assert_int_eq(start_of(0, 2, 100, 0, 0, 10), 1);
    /* Three databases from block 7: database r's first block is the first
     * k >= 7 with k mod 3 = r. */
    ck_assert_int_eq(start_of(0, 3, 1000, 7, 1, 1000), 9000);
    ck_assert_int_eq(start_of(1, 3, 1000, 7, 1, 1000), 7000);
    ck_assert_int_eq(start_of(2, 3, 1000, 7, 1, 1000), 8000);
    /* A step over the block, and the top of the ID space. */
    ck_assert_int_eq(start_of(0, 2, 100, 0, 1, 101), -1);
    ck_assert_int_eq(start_of(0, 1, 100, 0, INT64_MAX - 5, 10), -1);
    ck_assert_int_eq(start_of(0, 1, 100, 0, INT64_MAX - 50, 10), INT64_MAX - 50);
    ck_assert_int_eq(start_of(0, 2, INT64_MAX / 4, 0, INT64_MAX - 5, 10), -1);
}
END_TEST

/* Random sets: every range is inside one block its database owns, at or
 * above from, and two databases' ranges never overlap. */
START_TEST(test_block_start_random)
{
    srand(7);
    for (int i = 0; i < 20000; i++) {
        int64_t n = 1 + rand() % 5, b = 1 + rand() % 1000, since = rand() % 50;
        int64_t from = rand() % 200000, step = 1 + rand() % b, s[5];

        for (int64_t r = 0; r < n; r++) {
            s[r] = start_of(r, n, b, since, from, step);
            ck_assert_int_ge(s[r], from > 0 ? from : 1);
            ck_assert_int_ge(s[r] / b, since);
            ck_assert_int_eq((s[r] / b) % n, r);
            ck_assert_int_eq((s[r] + step - 1) / b, s[r] / b);
            ck_assert(store_block_owns(&(struct multi_meta){ r, n, b, since, 0 },
                                       s[r], step));
            if (n > 1)          /* and no other database owns it */
                ck_assert(!store_block_owns(&(struct multi_meta){
                              (r + 1) % n, n, b, since, 0 }, s[r], step));
            for (int64_t q = 0; q < r; q++)
                ck_assert(s[q] + step <= s[r] || s[r] + step <= s[q]);
        }
    }
}
END_TEST

/* What the multi store asserts of every range a database hands back. */
START_TEST(test_block_owns)
{
    /* Two databases, blocks of 100 from block 1. */
    struct multi_meta d0 = { 0, 2, 100, 1, 0 }, d1 = { 1, 2, 100, 1, 0 };

    ck_assert(store_block_owns(&d1, 100, 100));         /* all of block 1 */
    ck_assert(store_block_owns(&d0, 250, 50));
    ck_assert(!store_block_owns(&d0, 150, 10));         /* database 1's */
    ck_assert(!store_block_owns(&d1, 150, 51));         /* crosses 199|200 */
    ck_assert(!store_block_owns(&d0, 1, 10));           /* below since_block */
    ck_assert(!store_block_owns(&d1, 100, 101));        /* over the block */
    ck_assert(!store_block_owns(&d1, 100, 0));
    ck_assert(!store_block_owns(&d1, INT64_MAX - 5, 10));
    /* From block 0: database 0's IDs start at 1, never 0. */
    d0.since_block = 0;
    ck_assert(store_block_owns(&d0, 1, 99));
    ck_assert(!store_block_owns(&d0, 0, 10));
}
END_TEST

START_TEST(test_missing)
{
    /* A's record of the set {A=11, B=22} (and an old member 33, pos -1). */
    struct multi_member rows[] = {
        { .db_id = 11, .pos = 0, .self = 1 },
        { .db_id = 22, .pos = 1, .top = 4000 },
        { .db_id = 33, .pos = -1 },
    };
    int64_t ab[] = { 11, 22 }, ba[] = { 22, 11 }, ac[] = { 11, 44 },
            abc[] = { 11, 22, 44 };
    const struct multi_member *miss;

    ck_assert_ptr_null(store_multi_missing(rows, 3, ab, 2));
    ck_assert_ptr_null(store_multi_missing(rows, 3, ba, 2));    /* reordered */
    ck_assert_ptr_null(store_multi_missing(rows, 3, abc, 3));   /* added */
    miss = store_multi_missing(rows, 3, ac, 2);                 /* B replaced */
    ck_assert_ptr_nonnull(miss);
    ck_assert_int_eq(miss->db_id, 22);
    ck_assert_int_eq(miss->top, 4000);
    ck_assert_ptr_nonnull(store_multi_missing(rows, 3, ab, 1)); /* removed */
    ck_assert_ptr_null(store_multi_missing(rows, 0, ac, 2));    /* new set */
}
END_TEST

START_TEST(test_split)
{
    char *u[8], *cause = NULL;
    int n = store_multi_split(" mysql://a@h:1/l , mysql://b@h:2/l", u, 8, &cause);

    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(u[0], "mysql://a@h:1/l");
    ck_assert_str_eq(u[1], "mysql://b@h:2/l");
    free(u[0]);
    free(u[1]);
    ck_assert_int_eq(store_multi_split("a,,b", u, 8, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "empty URL"));
    free(cause);
    ck_assert_int_eq(store_multi_split("a,", u, 8, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "trailing comma"));
    free(cause);
    ck_assert_int_eq(store_multi_split("a,b,c", u, 2, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "more than 2"));
    free(cause);
    ck_assert_int_eq(store_multi_split("mysql://a@h:1/l,postgresql://b@h/l",
                                       u, 8, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "URL 2 is PostgreSQL's: a set's "
                                 "databases are all MySQL/MariaDB"));
    free(cause);
}
END_TEST

/* segment.postgresql.urls: a comma ends a URI only before another
 * connection string, so a URI's own host list stays whole. */
START_TEST(test_split_pg)
{
    char *u[8], *cause = NULL;

    ck_assert_int_eq(store_multi_split_kind("postgresql://l@a,b:5/x?"
                                            "target_session_attrs=read-write, "
                                            "postgres://l@[::1]:6,c/y", 1, u,
                                            8, &cause), 2);
    ck_assert_str_eq(u[0], "postgresql://l@a,b:5/x?target_session_attrs="
                     "read-write");
    ck_assert_str_eq(u[1], "postgres://l@[::1]:6,c/y");
    free(u[0]);
    free(u[1]);
    ck_assert_int_eq(store_multi_split_kind("postgresql://l@a/x,mysql://l@b/y",
                                            1, u, 8, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "URL 2 is not a postgresql:// URI"));
    ck_assert_ptr_nonnull(strstr(cause, "sets mixing the two"));
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_multi_split_kind("postgresql://l@a/x, host=h "
                                            "dbname=y", 1, u, 8, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "URL 2 is not a postgresql:// URI"));
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_multi_split_kind("postgresql://l@a/x,", 1, u, 8,
                                            &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "trailing comma"));
    free(cause);
}
END_TEST

START_TEST(test_is_pg)
{
    ck_assert_int_eq(store_multi_is_pg("postgresql://l@h/leaf"), 1);
    ck_assert_int_eq(store_multi_is_pg("Postgres://l@h/leaf"), 1);
    ck_assert_int_eq(store_multi_is_pg("host=h dbname=leaf"), 1);
    ck_assert_int_eq(store_multi_is_pg("mysql://l:p=q@h:1/leaf"), 0);
    ck_assert_int_eq(store_multi_is_pg("jdbc:mysql://h:1/leaf?useSSL=true"), 0);
    ck_assert_int_eq(store_multi_is_pg("h"), 0);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("multi_block");
    TCase *tc = tcase_create("multi_block");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);     /* a CPU-bound sweep: under ASan on a busy machine, seconds */
    tcase_add_test(tc, test_block_start);
    tcase_add_test(tc, test_block_start_random);
    tcase_add_test(tc, test_block_owns);
    tcase_add_test(tc, test_split);
    tcase_add_test(tc, test_is_pg);
    tcase_add_test(tc, test_split_pg);
    tcase_add_test(tc, test_missing);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
