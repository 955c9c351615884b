/* check_http_query.c: query strings as the API reads them (util.h's
 * util_query_param and util_query_valid): percent-decoded with the path's
 * rules, a repeated key reported, malformed escapes refused. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static enum util_query_result
param(const char *q, const char *key, char *out, size_t cap, size_t *len)
{
    return util_query_param(q, strlen(q), key, out, cap, len);
}

START_TEST(test_plain)
{
    char v[32];
    size_t n = 0;

    ck_assert_int_eq(param("count=5&format=json", "count", v, sizeof v, &n),
                     UTIL_QUERY_FOUND);
    ck_assert_uint_eq(n, 1);
    ck_assert(memcmp(v, "5", 1) == 0);
    ck_assert_int_eq(param("count=5&format=json", "format", v, sizeof v, &n),
                     UTIL_QUERY_FOUND);
    ck_assert(n == 4 && memcmp(v, "json", 4) == 0);
    ck_assert_int_eq(param("count=5", "format", v, sizeof v, &n), UTIL_QUERY_ABSENT);
    ck_assert_int_eq(param("", "count", v, sizeof v, &n), UTIL_QUERY_ABSENT);
    ck_assert_int_eq(param("counter=5&xcount=1", "count", v, sizeof v, &n),
                     UTIL_QUERY_ABSENT);
    ck_assert_int_eq(param("a&&count", "count", v, sizeof v, &n), UTIL_QUERY_FOUND);
    ck_assert_uint_eq(n, 0);
}
END_TEST

/* The query is decoded like the path: count=%35 is count=5, c%6Funt is
 * count, and '+' stays '+'. */
START_TEST(test_decoded)
{
    char v[32];
    size_t n = 0;

    ck_assert_int_eq(param("count=%35", "count", v, sizeof v, &n), UTIL_QUERY_FOUND);
    ck_assert(n == 1 && v[0] == '5');
    ck_assert_int_eq(param("c%6Funt=12", "count", v, sizeof v, &n), UTIL_QUERY_FOUND);
    ck_assert(n == 2 && memcmp(v, "12", 2) == 0);
    ck_assert_int_eq(param("format=js%6fn", "format", v, sizeof v, &n),
                     UTIL_QUERY_FOUND);
    ck_assert(n == 4 && memcmp(v, "json", 4) == 0);
    ck_assert_int_eq(param("token=a+b%2Bc%26d", "token", v, sizeof v, &n),
                     UTIL_QUERY_FOUND);
    ck_assert(n == 7 && memcmp(v, "a+b+c&d", 7) == 0);
}
END_TEST

/* count=1&count=5 used to take the first silently: now it is reported, also
 * when the second is spelled with an escape. */
START_TEST(test_repeated)
{
    char v[32];
    size_t n = 0;

    ck_assert_int_eq(param("count=1&count=5", "count", v, sizeof v, &n),
                     UTIL_QUERY_REPEATED);
    ck_assert_int_eq(param("count=1&c%6funt=5", "count", v, sizeof v, &n),
                     UTIL_QUERY_REPEATED);
    ck_assert_int_eq(param("count&count", "count", v, sizeof v, &n),
                     UTIL_QUERY_REPEATED);
    ck_assert_int_eq(param("count=1&format=a&format=b", "count", v, sizeof v, &n),
                     UTIL_QUERY_FOUND);
}
END_TEST

START_TEST(test_bad)
{
    char v[4];
    size_t n = 0;

    ck_assert_int_eq(param("count=%3", "count", v, sizeof v, &n), UTIL_QUERY_BAD);
    ck_assert_int_eq(param("count=%zz", "count", v, sizeof v, &n), UTIL_QUERY_BAD);
    ck_assert_int_eq(param("count=%00", "count", v, sizeof v, &n), UTIL_QUERY_BAD);
    ck_assert_int_eq(param("c%zunt=1", "count", v, sizeof v, &n), UTIL_QUERY_BAD);
    ck_assert_int_eq(param("count=12345", "count", v, sizeof v, &n), UTIL_QUERY_BAD);
    ck_assert_int_eq(param("x=%G0&count=1", "count", v, sizeof v, &n), UTIL_QUERY_BAD);
    ck_assert(util_query_valid("a=%41&b=c", 9));
    ck_assert(!util_query_valid("a=%4", 4));
    ck_assert(!util_query_valid("a=%00", 5));
    ck_assert(!util_query_valid("%", 1));
    ck_assert(util_query_valid("", 0));
}
END_TEST

static Suite *
query_suite(void)
{
    Suite *s = suite_create("http_query");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_plain);
    tcase_add_test(tc, test_decoded);
    tcase_add_test(tc, test_repeated);
    tcase_add_test(tc, test_bad);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(query_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
