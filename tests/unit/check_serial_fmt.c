/* check_serial_fmt.c: serial time patterns (tokens, refusals, coverage of
 * the reset period), period keys, padding; and a daylight-saving fall-back
 * in America/New_York, where local time repeats: the period key stays the
 * same day, so the day's sequence goes on instead of restarting. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "serial_fmt.h"

static struct serial_pattern
pat(const char *s)
{
    struct serial_pattern p;
    char *cause = NULL;

    ck_assert_msg(serial_pattern_parse(s, strlen(s), &p, &cause) == 0, "%s: %s",
                  s, cause ? cause : "");
    return p;
}

START_TEST(patterns)
{
    struct tzone_tm tm = { 2026, 11, 23, 14, 30, 5, 7, 0 };
    struct serial_pattern p;
    char out[64];
    char *end;

    p = pat("yyyyMMddHHmmss");
    ck_assert_int_eq(p.width, 14);
    end = serial_pattern_format(&p, &tm, out);
    *end = '\0';
    ck_assert_str_eq(out, "20261123143005");
    p = pat("yyMMddHHmmssSSS");
    end = serial_pattern_format(&p, &tm, out);
    *end = '\0';
    ck_assert_str_eq(out, "261123143005007");
    ck_assert(serial_pattern_has_ms(&p));
    p = pat("yyyyMMdd");
    ck_assert(serial_pattern_covers(&p, SERIAL_RESET_DAY));
    ck_assert(!serial_pattern_has_ms(&p));
    p = pat("yyyyMM");
    ck_assert(!serial_pattern_covers(&p, SERIAL_RESET_DAY));
    ck_assert(serial_pattern_covers(&p, SERIAL_RESET_MONTH));
    p = pat("");
    ck_assert_int_eq(p.width, 0);
    ck_assert(serial_pattern_covers(&p, SERIAL_RESET_NEVER));
    ck_assert(!serial_pattern_covers(&p, SERIAL_RESET_YEAR));
}
END_TEST

START_TEST(pattern_refusals)
{
    static const char *bad[] = {
        "yyyyMMddx", "yyy", "yyyyyyyy", "yyyyyy", "MMMM", "YYYYMMdd", "yyyy-MM-dd",
        "hh", "DD", "yyyyMMddHHmmssSSSSSSSSSSSSSSSSSSSSSSSSSS",
    };
    struct serial_pattern p;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *cause = NULL;

        ck_assert_msg(serial_pattern_parse(bad[i], strlen(bad[i]), &p, &cause) == -1,
                      "%s accepted", bad[i]);
        ck_assert_ptr_nonnull(cause);
        free(cause);
    }
}
END_TEST

START_TEST(period_keys_and_padding)
{
    struct tzone_tm tm = { 2026, 1, 5, 0, 0, 0, 0, 0 };
    enum serial_reset r;
    char key[16], out[32];

    serial_period_key(SERIAL_RESET_DAY, &tm, key);
    ck_assert_str_eq(key, "20260105");
    serial_period_key(SERIAL_RESET_MONTH, &tm, key);
    ck_assert_str_eq(key, "202601");
    serial_period_key(SERIAL_RESET_YEAR, &tm, key);
    ck_assert_str_eq(key, "2026");
    serial_period_key(SERIAL_RESET_NEVER, &tm, key);
    ck_assert_str_eq(key, "");
    ck_assert_int_eq(serial_reset_parse("day", &r), 0);
    ck_assert_int_eq(r, SERIAL_RESET_DAY);
    ck_assert_int_eq(serial_reset_parse("weekly", &r), -1);
    *serial_pad(out, 123, 6) = '\0';
    ck_assert_str_eq(out, "000123");
    *serial_pad(out, 999999, 6) = '\0';
    ck_assert_str_eq(out, "999999");
    ck_assert_uint_eq(serial_digits_max(6), 999999);
    ck_assert_uint_eq(serial_digits_max(19), 9999999999999999999ULL);
}
END_TEST

/* 2026-11-01 in New York: 01:00-01:59 local happens twice (EDT, then EST).
 * Every instant of that night maps to the period 20261101, so the day's
 * sequence is not restarted by the repeated hour. */
/* What row keys and the same-text check read of a pattern. */
START_TEST(shape_of_patterns)
{
    struct serial_pattern p;
    struct tzone_tm tm = { .year = 2026, .month = 11, .day = 3 };
    uint16_t dig[SERIAL_TOKENS_MAX * 4];
    char name[SERIAL_PATTERN_NAME_MAX + 1], key[16];

    ck_assert_int_eq(serial_pattern_parse("ddMMyyyyHHmmssSSS", 17, &p, NULL), 0);
    serial_pattern_name(&p, name);
    ck_assert_str_eq(name, "dmoy4hmisms");
    ck_assert_int_eq(serial_pattern_digits(&p, dig), 17);
    ck_assert_uint_eq(dig[0], 0xf);            /* day: 0-3 */
    ck_assert_uint_eq(dig[1], 0x3ff);
    ck_assert_uint_eq(dig[2], 0x3);            /* month: 0-1 */
    ck_assert_uint_eq(dig[8], 0x7);            /* hour: 0-2 */
    ck_assert_uint_eq(dig[10], 0x3f);          /* minute: 0-5 */
    ck_assert_uint_eq(dig[12], 0x7f);          /* second: 0-6 (a leap second) */
    /* The period as the pattern prints it, in the canonical order. */
    serial_period_text(&p, SERIAL_RESET_DAY, &tm, key);
    ck_assert_str_eq(key, "20261103");
    serial_period_text(&p, SERIAL_RESET_NEVER, &tm, key);
    ck_assert_str_eq(key, "all");
    ck_assert_int_eq(serial_pattern_parse("yyMM", 4, &p, NULL), 0);
    serial_pattern_name(&p, name);
    ck_assert_str_eq(name, "y2mo");
    serial_period_text(&p, SERIAL_RESET_MONTH, &tm, key);
    ck_assert_str_eq(key, "2611");
    serial_period_text(&p, SERIAL_RESET_YEAR, &tm, key);
    ck_assert_str_eq(key, "26");
    ck_assert(serial_pattern_has_yy(&p));
    ck_assert_int_eq(serial_digits_of(0), 1);
    ck_assert_int_eq(serial_digits_of(9999), 4);
    ck_assert_int_eq(serial_digits_of(16383), 5);
    ck_assert_int_eq(serial_digits_of(UINT64_MAX), 20);
}
END_TEST

START_TEST(dst_fall_back_same_period)
{
    struct tzone *z = tzone_load("America/New_York", NULL);
    int64_t first = 1793510100000LL;     /* 2026-11-01T05:15:00Z = 01:15 EDT */
    int64_t second = first + 3600000;    /* 06:15Z = 01:15 EST */
    struct tzone_tm a, b;
    char ka[16], kb[16];

    ck_assert_ptr_nonnull(z);
    tzone_local(z, first, &a);
    tzone_local(z, second, &b);
    ck_assert_int_eq(a.hour, 1);
    ck_assert_int_eq(b.hour, 1);
    ck_assert_int_eq(a.min, b.min);
    ck_assert_int_ne(a.utoff, b.utoff);
    serial_period_key(SERIAL_RESET_DAY, &a, ka);
    serial_period_key(SERIAL_RESET_DAY, &b, kb);
    ck_assert_str_eq(ka, "20261101");
    ck_assert_str_eq(ka, kb);
    tzone_free(z);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("serial_fmt");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, patterns);
    tcase_add_test(tc, pattern_refusals);
    tcase_add_test(tc, period_keys_and_padding);
    tcase_add_test(tc, dst_fall_back_same_period);
    tcase_add_test(tc, shape_of_patterns);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
