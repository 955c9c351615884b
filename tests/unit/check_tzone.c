/* check_tzone.c: the TZif reader against glibc's localtime_r (with TZ set)
 * over many instants from 1900 to 2200 in zones with every kind of rule:
 * northern and southern daylight time, negative daylight time (Dublin), a
 * 45-minute offset (Chatham), half-hour zones, no daylight time; and the
 * refusals of bad names and bad files. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tzone.h"

static const char *zones[] = {
    "America/New_York", "Europe/Berlin", "Australia/Sydney", "Asia/Shanghai",
    "America/Sao_Paulo", "Asia/Kolkata", "Pacific/Chatham", "Europe/Dublin",
    "Africa/Casablanca", "America/St_Johns", "Australia/Lord_Howe", "UTC",
};

static uint64_t rng = 88172645463325252ULL;

static uint64_t
next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

START_TEST(matches_glibc)
{
    const char *name = zones[_i];
    char *cause = NULL;
    struct tzone *z = tzone_load(name, &cause);
    int64_t lo = -2208988800LL, hi = 7258118400LL;     /* 1900 .. 2200 */

    ck_assert_msg(z != NULL, "%s", cause ? cause : "");
    setenv("TZ", name, 1);
    tzset();
    for (int i = 0; i < 200000; i++) {
        int64_t t = lo + (int64_t)(next_rand() % (uint64_t)(hi - lo));
        time_t tt = (time_t)t;
        struct tm g;
        struct tzone_tm m;
        int same;

        /* Around now, step finely through the transitions as well. */
        if (i % 2)
            t = 1700000000LL + (int64_t)(next_rand() % (40ULL * 366 * 86400));
        tt = (time_t)t;
        localtime_r(&tt, &g);
        tzone_local(z, t * 1000 + 123, &m);
        same = m.year == g.tm_year + 1900 && m.month == g.tm_mon + 1 &&
               m.day == g.tm_mday && m.hour == g.tm_hour &&
               m.min == g.tm_min && m.sec == g.tm_sec &&
               m.utoff == g.tm_gmtoff && m.ms == 123;
        /* check writes to its pipe at every assertion that holds (2.4M
         * writes, most of the suite's time): assert where it does not */
        if (!same)
            ck_assert_msg(same, "%s at %lld: ours %04d-%02d-%02d %02d:%02d:%02d %+d, "
                      "glibc %04d-%02d-%02d %02d:%02d:%02d %+ld", name,
                      (long long)t, m.year, m.month, m.day, m.hour, m.min,
                      m.sec, m.utoff, g.tm_year + 1900, g.tm_mon + 1,
                      g.tm_mday, g.tm_hour, g.tm_min, g.tm_sec, g.tm_gmtoff);
    }
    tzone_free(z);
}
END_TEST

START_TEST(refusals)
{
    static const char *bad[] = {
        "", "../etc/passwd", "/etc/localtime", "Europe/../../etc/passwd",
        "Not/AZone", "Europe/", "a b", "Europe//Berlin",
    };
    static const unsigned char junk[] = "TZif2\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
                                        "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
                                        "\0\0\0\0\0\0\0\0\0\0\0\0";

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *cause = NULL;

        ck_assert_ptr_null(tzone_load(bad[i], &cause));
        ck_assert_ptr_nonnull(cause);
        free(cause);
    }
    {
        char *cause = NULL;

        ck_assert_ptr_null(tzone_parse(junk, sizeof junk - 1, "junk", &cause));
        ck_assert_ptr_nonnull(cause);
        free(cause);
    }
    {
        char *cause = NULL;

        ck_assert_ptr_null(tzone_parse((const unsigned char *)"nope", 4, "x", &cause));
        free(cause);
    }
}
END_TEST

START_TEST(civil_round_trip)
{
    for (int64_t d = -800000; d < 800000; d += 17) {
        int64_t y;
        int m, dd;

        tzone_civil_from_days(d, &y, &m, &dd);
        if (tzone_days_from_civil(y, m, dd) != d)   /* as in matches_glibc */
            ck_assert_int_eq(tzone_days_from_civil(y, m, dd), d);
    }
    ck_assert_int_eq(tzone_days_from_civil(1970, 1, 1), 0);
    ck_assert_int_eq(tzone_days_from_civil(2026, 11, 23), 20780);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("tzone");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, matches_glibc, 0, (int)(sizeof zones / sizeof zones[0]));
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, civil_round_trip);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
