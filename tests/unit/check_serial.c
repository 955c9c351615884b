/* check_serial.c: serial definitions (start-up errors name file:line and
 * key), period ends in zones with and without DST, row names from the
 * database's time, and the allocator's period rules with an injected
 * monotonic clock: a range is never used past its period's end, a load that
 * brings a later period drops the earlier one, the sequence restarts once
 * per period, a repeated local hour (DST fall-back) keeps counting, and a
 * period whose digits are used up is refused, never wrapped. */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "serial.h"
#include "serial_zonerec.h"
#include "serial_zones.h"
#include "store.h"
#include "tzone.h"
#include "util.h"

/* 2026-11-23T00:00:00Z */
#define D23 INT64_C(1795392000000)
#define HOUR INT64_C(3600000)

static int64_t fake_us;
static int loads[8];

static int64_t
fake_now(void)
{
    return fake_us;
}

static void
fake_load(void *arg, size_t i)
{
    (void)arg;
    loads[i]++;
}

static struct config cfg;

static struct serials *
load(const char *text, char **cause)
{
    struct serial_hooks h = { .load = fake_load, .now_us = fake_now };
    struct serials *s;

    config_free(&cfg);
    config_defaults(&cfg);
    cfg.from_file = 1;
    cfg.snowflake_enable = 1;
    ck_assert_int_eq(config_load_string(&cfg, "t.conf", text, cause), 0);
    s = serials_new(&cfg, &h, cause);
    memset(loads, 0, sizeof loads);
    fake_us = 1000000;
    return s;
}

static struct serials *
load_ok(const char *text)
{
    char *cause = NULL;
    struct serials *s = load(text, &cause);

    ck_assert_msg(s != NULL, "%s", cause ? cause : "");
    return s;
}

static void
load_bad(const char *text, const char *want)
{
    char *cause = NULL;
    struct serials *s = load(text, &cause);

    ck_assert_msg(s == NULL, "accepted: %s", text);
    ck_assert_msg(strstr(cause, want) != NULL, "\"%s\" lacks \"%s\"", cause, want);
    free(cause);
}

START_TEST(definitions)
{
    struct serials *s;
    const struct serial_def *d;

    s = load_ok("serial.PAY.prefix = PAY\nserial.PAY.pattern = yyyyMMddHHmmss\n"
                "serial.PAY.zone = Asia/Shanghai\nserial.PAY.digits = 6\n"
                "serial.ORD.source = snowflake\nserial.ORD.pattern = yyMMddHHmmssSSS\n");
    ck_assert_int_eq(serials_count(s), 2);
    ck_assert_int_eq(serials_find(s, "ORD", 3), 1);
    ck_assert_int_eq(serials_find(s, "ord", 3), -1);
    d = serials_def(s, 0);
    ck_assert_str_eq(d->prefix, "PAY");
    ck_assert_int_eq(d->reset, SERIAL_RESET_DAY);
    ck_assert_int_eq(d->pattern.width, 14);
    ck_assert(serials_need_store(s));
    serials_free(s);

    /* No definition in a file: none; without a file: the demo. */
    s = load_ok("listen.port = 1\n");
    ck_assert_int_eq(serials_count(s), 0);
    serials_free(s);

    load_bad("\n\nserial.PAY.colour = red\n", "t.conf:3: serial.PAY.colour: unknown field");
    load_bad("serial.PAY.pattern = yyyyMMdx\n", "t.conf:1: serial.PAY.pattern: time pattern");
    load_bad("serial.PAY.prefix = P\nserial.PAY.zone = Mars/Base\n",
             "t.conf:2: serial.PAY.zone:");
    load_bad("serial.PAY.pattern = yyyyMM\n", "t.conf:1: serial.PAY.pattern: the time "
             "pattern \"yyyyMM\" does not print every field");
    load_bad("serial.PAY.pattern = yyyyMM\nserial.PAY.reset = month\nserial.PAY.reset = day\n",
             "t.conf:3: serial.PAY.reset is set twice (also on line 2)");
    load_bad("serial.PAY.digits = 19\n", "t.conf:1: serial.PAY.digits:");
    load_bad("serial.PAY.reset = hourly\n", "serial.PAY.reset: \"hourly\" is not");
    load_bad("serial.PAY.step = 10\n", "t.conf:1: serial.PAY.step: must be at least "
             "serial.count_max (100)");
    load_bad("serial.PAY.prefix = P\nserial.pay.prefix = Q\n",
             "t.conf:2: serial code \"pay\" differs from \"PAY\" only in case");
    load_bad("serial.P/Y.prefix = P\n", "t.conf:1: serial.P/Y.prefix: expected");
    load_bad("serial.S.source = snowflake\n", "t.conf:1: serial.S.pattern: source = "
             "snowflake needs every field down to the millisecond");
    load_bad("serial.S.source = snowflake\nserial.S.pattern = yyyyMMddHHmmssSSS\n"
             "serial.S.zone = America/New_York\n", "t.conf:3: serial.S.zone: source = "
             "snowflake prints local time, and America/New_York turns its clocks back");
    load_bad("serial.S.source = snowflake\nserial.S.pattern = yyyyMMddHHmmssSSS\n"
             "serial.S.digits = 4\n", "t.conf:3: serial.S.digits: not used with source");
}
END_TEST

START_TEST(demo_without_file)
{
    char *cause = NULL;
    struct serials *s;

    config_free(&cfg);
    config_defaults(&cfg);
    cfg.snowflake_enable = 1;
    s = serials_new(&cfg, NULL, &cause);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(serials_find(s, "demo", 4), 0);
    ck_assert_str_eq(serials_def(s, 0)->prefix, "DEMO");
    serials_free(s);
}
END_TEST

static int64_t
ms_of(int y, int mo, int d, int h, int mi)
{
    return (tzone_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60) * 1000;
}

START_TEST(period_ends)
{
    char *cause = NULL;
    struct tzone *utc = tzone_load("UTC", &cause);
    struct tzone *ny = tzone_load("America/New_York", &cause);
    struct tzone *ber = tzone_load("Europe/Berlin", &cause);
    struct tzone *sh = tzone_load("Asia/Shanghai", &cause);

    ck_assert_ptr_nonnull(ny);
    ck_assert_ptr_nonnull(ber);
    ck_assert_ptr_nonnull(sh);
    ck_assert_int_eq(serial_period_end(utc, SERIAL_RESET_DAY, D23 + 12 * HOUR),
                     D23 + 24 * HOUR);
    ck_assert_int_eq(serial_period_end(utc, SERIAL_RESET_DAY, D23), D23 + 24 * HOUR);
    ck_assert_int_eq(serial_period_end(utc, SERIAL_RESET_DAY, D23 - 1), D23);
    ck_assert_int_eq(serial_period_end(utc, SERIAL_RESET_NEVER, D23), INT64_MAX);
    /* Fall-back day in New York lasts 25 hours: 00:00 EDT to 00:00 EST. */
    ck_assert_int_eq(serial_period_end(ny, SERIAL_RESET_DAY, ms_of(2026, 11, 1, 4, 30)),
                     ms_of(2026, 11, 2, 5, 0));
    /* During the repeated hour (01:30 EST, after 01:30 EDT): same end. */
    ck_assert_int_eq(serial_period_end(ny, SERIAL_RESET_DAY, ms_of(2026, 11, 1, 6, 30)),
                     ms_of(2026, 11, 2, 5, 0));
    /* Spring-forward day: 23 hours. */
    ck_assert_int_eq(serial_period_end(ny, SERIAL_RESET_DAY, ms_of(2026, 3, 8, 6, 0)),
                     ms_of(2026, 3, 9, 4, 0));
    /* Month in Berlin: November starts at 00:00 CET = 23:00Z. */
    ck_assert_int_eq(serial_period_end(ber, SERIAL_RESET_MONTH, ms_of(2026, 10, 15, 0, 0)),
                     ms_of(2026, 10, 31, 23, 0));
    /* Year in Shanghai. */
    ck_assert_int_eq(serial_period_end(sh, SERIAL_RESET_YEAR, ms_of(2026, 6, 1, 0, 0)),
                     ms_of(2026, 12, 31, 16, 0));
    /* Just before the end it is still the same period, at the end it is not. */
    ck_assert_int_eq(serial_period_end(sh, SERIAL_RESET_YEAR, ms_of(2026, 12, 31, 16, 0) - 1),
                     ms_of(2026, 12, 31, 16, 0));
    tzone_free(utc);
    tzone_free(ny);
    tzone_free(ber);
    tzone_free(sh);
}
END_TEST

START_TEST(row_names)
{
    struct serials *s = load_ok("serial.PAY.zone = America/New_York\n"
                                "serial.PAY.prefix = PAY\n"
                                "serial.ALL.reset = never\n"
                                "serial.M.prefix = Mo\nserial.M.reset = month\n"
                                "serial.M.pattern = yyMMdd\n");
    struct serial_key_arg ka = { s, 0 };
    struct store_serial_floor f;
    char tag[129];

    /* 03:00Z on the 24th is still the 23rd in New York. The key is what is
     * printed: prefix (lower case), pattern, worker and sequence widths. */
    ck_assert_int_eq(serial_row_name(&ka, D23 + 27 * HOUR, tag, sizeof tag, &f), 0);
    ck_assert_str_eq(tag, "serial.pay.y4mod.0.6:20261123");
    /* Its floor: this day and the rows of its month, year and all time,
     * in this format and the one before ("PAY:20261123"). */
    ck_assert_int_eq(f.n, 8);
    ck_assert_str_eq(f.row[0].tag, "serial.pay.y4mod.0.6:20261123");
    ck_assert_int_eq(f.row[0].prefix, 1);
    ck_assert_str_eq(f.row[1].tag, "PAY:20261123");
    ck_assert_int_eq(f.row[1].prefix, 1);
    ck_assert_str_eq(f.row[2].tag, "serial.pay.y4mod.0.6:all");
    ck_assert_str_eq(f.row[3].tag, "PAY:all");
    ck_assert_str_eq(f.row[4].tag, "serial.pay.y4mod.0.6:2026");
    ck_assert_str_eq(f.row[5].tag, "PAY:2026");
    ck_assert_str_eq(f.row[6].tag, "serial.pay.y4mod.0.6:202611");
    ck_assert_str_eq(f.row[7].tag, "PAY:202611");
    for (int k = 2; k < 8; k++)
        ck_assert_int_eq(f.row[k].prefix, 0);
    /* The old format's rows are raised by the load too. */
    for (int k = 0; k < 8; k++)
        ck_assert_int_eq(f.row[k].raise, k % 2);
    ck_assert_int_eq(serial_row_name(&ka, D23 + 29 * HOUR, tag, sizeof tag, &f), 0);
    ck_assert_str_eq(tag, "serial.pay.y4mod.0.6:20261124");
    /* Never: every row of its shape, and of its code in the old format. */
    ka.i = 1;
    ck_assert_int_eq(serial_row_name(&ka, D23, tag, sizeof tag, &f), 0);
    ck_assert_str_eq(tag, "serial..y4mod.0.6:all");
    ck_assert_int_eq(f.n, 2);
    ck_assert_str_eq(f.row[0].tag, "serial..y4mod.0.6:");
    ck_assert_str_eq(f.row[1].tag, "ALL:");
    ck_assert_int_eq(f.row[1].prefix, 1);
    ck_assert_int_eq(serial_row_name(&ka, D23, tag, 5, &f), -1);
    /* yy prints the year in two digits, and so does the key. */
    ka.i = 2;
    ck_assert_int_eq(serial_row_name(&ka, D23, tag, sizeof tag, &f), 0);
    ck_assert_str_eq(tag, "serial.mo.y2mod.0.6:2611");
    ck_assert_int_eq(f.n, 6);
    ck_assert_str_eq(f.row[0].tag, "serial.mo.y2mod.0.6:2611");
    ck_assert_str_eq(f.row[1].tag, "M:202611");
    ck_assert_str_eq(f.row[4].tag, "serial.mo.y2mod.0.6:26");
    serials_free(s);
}
END_TEST

/* Issue 20, finding 3, review hole 2: a row of another shape that can
 * print the same text as a code, in a period some zone can still print,
 * stands in its way; a row of the same shape, of a period over everywhere,
 * or whose text always differs somewhere does not. */
static int
in_the_way(const char *text, const char *tag, int64_t now, char **cause)
{
    struct serials *s = load_ok(text);
    struct store_row row;
    int r;

    memset(&row, 0, sizeof row);
    snprintf(row.biz_tag, sizeof row.biz_tag, "%s", tag);
    snprintf(row.description, sizeof row.description, "%s",
             STORE_SERIAL_DESCRIPTION);
    *cause = NULL;
    r = serial_rows_check(s, 0, &row, 1, now, cause);
    serials_free(s);
    return r;
}

START_TEST(rows_of_other_shapes)
{
    const char *day = "serial.pay.y4mod.0.6:20261123";
    int64_t noon = D23 + 12 * HOUR;
    char *cause = NULL;

    /* PAY20 + yyMMdd prints PAY20261123000001 as PAY + yyyyMMdd does. */
    ck_assert_int_eq(in_the_way("serial.N.prefix = PAY20\nserial.N.pattern = "
                                "yyMMdd\n", day, noon, &cause), -1);
    ck_assert_msg(strstr(cause, "serial.N: the database's row "
                         "serial.pay.y4mod.0.6:20261123") != NULL &&
                  strstr(cause, "prefix") != NULL, "%s", cause);
    free(cause);
    /* The prefix's case is not known from the key: Pay20 too. */
    ck_assert_int_eq(in_the_way("serial.N.prefix = Pay20\nserial.N.pattern = "
                                "yyMMdd\n", day, noon, &cause), -1);
    free(cause);
    /* yyyyMMddHH + 4 digits; the worker ID (4 digits) + 6 for 10 digits. */
    ck_assert_int_eq(in_the_way("serial.N.prefix = PAY\nserial.N.pattern = "
                                "yyyyMMddHH\nserial.N.digits = 4\n", day, noon,
                                &cause), -1);
    free(cause);
    ck_assert_int_eq(in_the_way("serial.N.prefix = PAY\nserial.N.worker_id = "
                                "true\n", "serial.pay.y4mod.0.10:20261123",
                                noon, &cause), -1);
    free(cause);
    /* An "all" row is never over; a year's row lasts its year. */
    ck_assert_int_eq(in_the_way("serial.N.prefix = PAY20\nserial.N.pattern = "
                                "yyMMdd\n", "serial.pay.y4mod.0.6:all",
                                noon + 400 * 24 * HOUR, &cause), -1);
    free(cause);
    ck_assert_int_eq(in_the_way("serial.N.prefix = PAY20\nserial.N.pattern = "
                                "yyMMdd\n", "serial.pay.y4mod.0.6:2026",
                                noon + 30 * 24 * HOUR, &cause), -1);
    free(cause);
    /* The 23rd is over everywhere at 12:00Z on the 24th (UTC-12's
     * midnight), plus an hour for the clocks: 13:00Z. */
    ck_assert_int_eq(in_the_way("serial.N.prefix = PAY20\nserial.N.pattern = "
                                "yyMMdd\n", day, D23 + 37 * HOUR - 1, &cause), -1);
    free(cause);
    ck_assert_int_eq(in_the_way("serial.N.prefix = PAY20\nserial.N.pattern = "
                                "yyMMdd\n", day, D23 + 37 * HOUR, &cause), 0);
    /* The same shape is the code's own row; another prefix always differs;
     * and so does another length. */
    ck_assert_int_eq(in_the_way("serial.N.prefix = PAY\n", day, noon, &cause), 0);
    ck_assert_int_eq(in_the_way("serial.N.prefix = PAX\nserial.N.reset = "
                                "month\n", day, noon, &cause), 0);
    ck_assert_int_eq(in_the_way("serial.N.prefix = PAY\nserial.N.digits = 7\n",
                                day, noon, &cause), 0);
    /* A row that is not a key of this format is not looked at. */
    ck_assert_int_eq(in_the_way("serial.N.prefix = PAY20\nserial.N.pattern = "
                                "yyMMdd\n", "serial.pay.zz.0.6:20261123", noon,
                                &cause), 0);
}
END_TEST

/* Issue 28, section 3.3: ddMMyy -> yyMMdd. The old row of 2026-11-28
 * printed INV281126000001..; its period is over, but yyMMdd prints
 * INV281126 again on 2028-11-26, so the row stands in the way until that
 * date is over everywhere. A row whose text the new pattern reads as a
 * date already over, or as no date at all, does not. */
START_TEST(pattern_reorder_after_period)
{
    const char *inv = "serial.N.prefix = INV\nserial.N.pattern = yyMMdd\n";
    int64_t dec5 = D23 + 12 * 24 * HOUR;            /* 2026-12-05 */
    int64_t d2028 = INT64_C(1795392000000) + 734 * 24 * HOUR; /* 2028-11-26 */
    char *cause = NULL;

    ck_assert_int_eq(in_the_way(inv, "serial.inv.dmoy2.0.6:261128", dec5,
                                &cause), -1);
    ck_assert_msg(strstr(cause, "serial.inv.dmoy2.0.6:261128") != NULL &&
                  strstr(cause, "281126") != NULL, "%s", cause);
    free(cause);
    /* The other way: yyMMdd's 261128 is ddMMyy's 2028-11-26. */
    ck_assert_int_eq(in_the_way("serial.N.prefix = INV\nserial.N.pattern = "
                                "ddMMyy\n", "serial.inv.y2mod.0.6:261128",
                                dec5, &cause), -1);
    free(cause);
    /* A month's row: MMyy's 1126 of November 2026 is yyMM's 2011-26: no
     * month 26, never printed. yyyyMM's 202611 as MMyyyy: month 20. */
    ck_assert_int_eq(in_the_way("serial.N.prefix = INV\nserial.N.pattern = "
                                "yyMM\nserial.N.reset = month\n",
                                "serial.inv.moy2.0.6:2611", dec5, &cause), 0);
    ck_assert_int_eq(in_the_way("serial.N.prefix = INV\nserial.N.pattern = "
                                "MMyyyy\nserial.N.reset = month\n",
                                "serial.inv.y4mo.0.6:202611", dec5,
                                &cause), 0);
    /* 2026-11-20 under ddMMyy printed 201126: yyMMdd's 2020-11-26, over. */
    ck_assert_int_eq(in_the_way(inv, "serial.inv.dmoy2.0.6:261120", dec5,
                                &cause), 0);
    /* Still in the way on 2028-11-26, clear once that day is over. */
    ck_assert_int_eq(in_the_way(inv, "serial.inv.dmoy2.0.6:261128",
                                d2028 + 36 * HOUR, &cause), -1);
    free(cause);
    ck_assert_int_eq(in_the_way(inv, "serial.inv.dmoy2.0.6:261128",
                                d2028 + 37 * HOUR, &cause), 0);
    /* A pattern with no year reads no date: always in the way. */
    ck_assert_int_eq(in_the_way("serial.N.prefix = INV\nserial.N.pattern = "
                                "ddMMHH\nserial.N.reset = never\n",
                                "serial.inv.dmoy2.0.6:261128", dec5 + 3000 *
                                24 * HOUR, &cause), -1);
    free(cause);
    /* A field finer than the period is any digit (yyyyMMdd reset by the
     * month prints 202611dd); ddMMyyyy reads 20 as the day and 26 as the
     * month: never printed. */
    ck_assert_int_eq(in_the_way("serial.N.prefix = INV\nserial.N.pattern = "
                                "ddMMyyyy\n", "serial.inv.y4mod.0.6:202611",
                                dec5, &cause), 0);
}
END_TEST

/* Issue 20, finding 3, review hole 3: a snowflake serial's zone moved to
 * one behind it (Tokyo UTC+9 -> Shanghai UTC+8) is refused; ahead of it,
 * or with a new prefix, it is recorded. */
static int
zones(const char *path, const char *zone, const char *prefix, char **cause)
{
    char text[256];
    struct serials *s;
    int r;

    snprintf(text, sizeof text, "serial.Z.source = snowflake\nserial.Z.pattern = "
             "yyyyMMddHHmmssSSS\nserial.Z.zone = %s\nserial.Z.prefix = %s\n",
             zone, prefix);
    s = load_ok(text);
    *cause = NULL;
    r = serial_zones_check(s, path, D23, cause);
    serials_free(s);
    return r;
}

START_TEST(snowflake_zone_behind)
{
    char dir[] = "/tmp/check_serial.XXXXXX", path[64], *cause = NULL;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/z", dir);
    ck_assert_int_eq(zones(path, "Asia/Tokyo", "A", &cause), 0);
    ck_assert_int_eq(zones(path, "Asia/Shanghai", "A", &cause), -1);
    ck_assert_msg(strstr(cause, "serial.Z.zone: Asia/Shanghai (UTC+08:00 now) is "
                         "behind Asia/Tokyo (UTC+09:00 now)") != NULL &&
                  strstr(cause, "Change the prefix with the zone") != NULL &&
                  strstr(cause, path) != NULL, "%s", cause);
    free(cause);
    /* A new prefix is another shape; Shanghai -> Tokyo moves ahead. */
    ck_assert_int_eq(zones(path, "Asia/Shanghai", "B", &cause), 0);
    ck_assert_int_eq(zones(path, "Asia/Tokyo", "B", &cause), 0);
    /* and back is refused again; A's line was kept. */
    ck_assert_int_eq(zones(path, "Asia/Shanghai", "B", &cause), -1);
    free(cause);
    ck_assert_int_eq(zones(path, "Asia/Shanghai", "A", &cause), -1);
    free(cause);
    ck_assert_int_eq(zones(path, "Asia/Tokyo", "A", &cause), 0);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* Issue 28, 3.5: the serial zones record's text. What parses formats back
 * to the same entries; anything else is refused with a reason. */
START_TEST(zonerec_parse)
{
    struct szrec_entry e[SZREC_MAX], f[SZREC_MAX];
    const char *why = NULL;
    const char *bad[] = { "x", "a", "a:", ":5", "A:5", "a:5,", "a:5,,b:6",
                          "a:+5", "a:86400001", "a:-86400001", "a:5,a:6",
                          "a b:5", "a:5 ", "a:99999999999999999999",
                          "a:5\n" };
    char *text, *big;
    struct sbuf b = {0};
    int n;

    ck_assert_int_eq(szrec_parse("", 0, e, &why), 0);
    n = szrec_parse("serial.ord.y4modhmisms.4.6:32400000,x-y_z.0:-43200000",
                    53, e, &why);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(e[0].shape, "serial.ord.y4modhmisms.4.6");
    ck_assert_int_eq(e[0].ahead_ms, 32400000);
    ck_assert_int_eq(e[1].ahead_ms, -43200000);
    text = szrec_format(e, n);
    ck_assert_str_eq(text, "serial.ord.y4modhmisms.4.6:32400000,"
                     "x-y_z.0:-43200000");
    ck_assert_int_eq(szrec_parse(text, strlen(text), f, &why), 2);
    free(text);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why = NULL;
        ck_assert_msg(szrec_parse(bad[i], strlen(bad[i]), e, &why) == -1 &&
                      why != NULL, "accepted %s", bad[i]);
    }
    /* SZREC_MAX entries pass, one more is refused; so is an embedded NUL
     * and anything over the text limit */
    for (int k = 0; k < SZREC_MAX; k++)
        sbuf_printf(&b, "%ss%d:1", k ? "," : "", k);
    ck_assert_int_eq(szrec_parse(b.p, b.len, e, &why), SZREC_MAX);
    sbuf_puts(&b, ",t:1");
    ck_assert_int_eq(szrec_parse(b.p, b.len, e, &why), -1);
    ck_assert_int_eq(szrec_parse("a:5\0", 4, e, &why), -1);
    big = xcalloc(SZREC_TEXT_MAX + 2, 1);
    memset(big, 'a', SZREC_TEXT_MAX + 1);
    ck_assert_int_eq(szrec_parse(big, SZREC_TEXT_MAX + 1, e, &why), -1);
    free(big);
    free(b.p);
}
END_TEST

/* Issue 28, 3.5: the gate of a worker ID's record. Z prints in Shanghai
 * (UTC+8), Y in Tokyo (UTC+9); the record claimed says Z's shape reached
 * fence + 9 h (its last holder printed it in Tokyo), and carries a shape
 * this node does not print. */
START_TEST(zone_gate_record)
{
    struct serials *s = load_ok(
        "serial.Z.source = snowflake\nserial.Z.pattern = yyyyMMddHHmmssSSS\n"
        "serial.Z.zone = Asia/Shanghai\nserial.Z.prefix = A\n"
        "serial.Y.source = snowflake\nserial.Y.pattern = yyyyMMddHHmmssSSS\n"
        "serial.Y.zone = Asia/Tokyo\nserial.Y.prefix = B\n"
        "serial.S.prefix = C\n");
    struct serial_zgate *g = serial_zgate_new(s);
    char shz[SERIAL_ROW_SHAPE_MAX], shy[SERIAL_ROW_SHAPE_MAX], rec[256];
    char msg[768], *text;
    const int64_t F = D23, H = 3600000;
    struct szrec_entry e[SZREC_MAX];
    const char *why;
    struct sbuf b = {0};
    int retry = 0, n;

    serial_row_shape(serials_def(s, 0), shz);
    serial_row_shape(serials_def(s, 1), shy);
    /* no claim yet, or an empty record: nothing gated */
    ck_assert_int_eq(serial_zgate_allows(g, 0, F, msg, sizeof msg, &retry), 1);
    serial_zgate_claimed(g, "", 0, F);
    ck_assert_int_eq(serial_zgate_allows(g, 0, F, msg, sizeof msg, &retry), 1);
    text = serial_zgate_record(g, F);
    snprintf(rec, sizeof rec, "%s:%" PRId64 ",%s:%" PRId64, shz, 8 * H, shy, 9 * H);
    ck_assert_str_eq(text, rec);
    free(text);

    snprintf(rec, sizeof rec, "%s:%" PRId64 ",%s:%" PRId64 ",serial.other.y4.0.6:%" PRId64,
             shz, 9 * H, shy, 9 * H, H);
    serial_zgate_claimed(g, rec, strlen(rec), F);
    /* Z: local t + 8 h at or below F + 9 h is refused: up to F + 1 h */
    ck_assert_int_eq(serial_zgate_allows(g, 0, F + 1, msg, sizeof msg,
                                         &retry), 0);
    ck_assert_msg(strstr(msg, "no serial for code 'Z' until") != NULL &&
                  strstr(msg, "change the prefix with the zone") != NULL &&
                  strstr(msg, shz) != NULL, "%s", msg);
    ck_assert_int_eq(retry, 3600);
    ck_assert_int_eq(serial_zgate_allows(g, 0, F + H, msg, sizeof msg,
                                         &retry), 0);
    ck_assert_int_eq(serial_zgate_allows(g, 0, F + H + 1, msg, sizeof msg,
                                         &retry), 1);
    /* Y, in the same zone as before: past the fence, past the gate */
    ck_assert_int_eq(serial_zgate_allows(g, 1, F + 1, msg, sizeof msg,
                                         &retry), 1);
    ck_assert_int_eq(serial_zgate_json(g, F + 1, &b), 1);
    ck_assert_msg(strstr(b.p, "\"zone_gates\":[{\"code\":\"Z\",\"until_ms\":")
                  != NULL, "%s", b.p);
    b.len = 0;
    ck_assert_int_eq(serial_zgate_json(g, F + H + 1, &b), 0);

    /* written at F + 1 s: Z keeps the claimed bound (9 h - 1 s ahead), Y
     * its own zone, the other shape its bound */
    text = serial_zgate_record(g, F + 1000);
    n = szrec_parse(text, strlen(text), e, &why);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(e[0].shape, shz);
    ck_assert_int_eq(e[0].ahead_ms, 9 * H - 1000);
    ck_assert_str_eq(e[1].shape, shy);
    ck_assert_int_eq(e[1].ahead_ms, 9 * H);
    ck_assert_str_eq(e[2].shape, "serial.other.y4.0.6");
    ck_assert_int_eq(e[2].ahead_ms, H - 1000);
    free(text);
    /* two hours on: Z's own zone is past the old bound; the other shape
     * is an hour behind the fence, and still kept */
    text = serial_zgate_record(g, F + 2 * H);
    ck_assert_int_eq(szrec_parse(text, strlen(text), e, &why), 3);
    ck_assert_int_eq(e[0].ahead_ms, 8 * H);
    ck_assert_int_eq(e[2].ahead_ms, -H);
    free(text);
    /* thirteen hours on, no zone can print the other shape's bound again */
    text = serial_zgate_record(g, F + 13 * H);
    ck_assert_int_eq(szrec_parse(text, strlen(text), e, &why), 2);
    free(text);

    /* a record that cannot be read: every snowflake code refused, the
     * store's record kept (NULL), the segment code untouched */
    serial_zgate_claimed(g, "serial.a:x", 10, F);
    ck_assert_int_eq(serial_zgate_allows(g, 0, F + 100 * H, msg, sizeof msg,
                                         &retry), 0);
    ck_assert_msg(strstr(msg, "cannot be read") != NULL, "%s", msg);
    ck_assert_int_eq(serial_zgate_allows(g, 1, F + 100 * H, msg, sizeof msg,
                                         &retry), 0);
    ck_assert_int_eq(serial_zgate_allows(g, 2, F, msg, sizeof msg, &retry), 1);
    ck_assert_ptr_null(serial_zgate_record(g, F + 1000));
    b.len = 0;
    ck_assert_int_eq(serial_zgate_json(g, F, &b), 2);
    free(b.p);
    serial_zgate_free(g);
    serials_free(s);
}
END_TEST

/* Issue 20, finding 3: codes whose serials could be the same text are
 * refused at start, naming both; codes that always differ somewhere pass. */
START_TEST(colliding_codes_refused)
{
    struct serials *s;

    load_bad("serial.A.prefix = P\nserial.B.prefix = P\n",
             "t.conf:2: serial.B.prefix: serial.A (line 1) and serial.B can print "
             "the same text");
    /* The default prefix is empty; the reset does not change the text. */
    load_bad("serial.A.digits = 6\nserial.B.reset = month\nserial.B.pattern = yyyyMMdd\n",
             "serial.A (line 1) and serial.B can print the same text");
    /* A prefix of digits can be a date: "2" + yyyyMMdd + 5 vs yyyyMMdd + 6. */
    load_bad("serial.A.digits = 6\nserial.B.prefix = 2\nserial.B.digits = 5\n",
             "serial.A (line 1) and serial.B");
    /* A segment code and a snowflake one of the same length. */
    load_bad("serial.A.pattern = yyyyMMddHHmmssSSS\nserial.A.reset = never\n"
             "serial.A.digits = 8\nserial.S.source = snowflake\n"
             "serial.S.pattern = yyyyMMddHHmmssSSS\n", "serial.A (line 1) and serial.S");
    s = load_ok("serial.A.prefix = PA\nserial.B.prefix = PB\n"
                "serial.C.prefix = PA\nserial.C.digits = 7\n"
                "serial.D.prefix = 3\nserial.D.digits = 5\n"        /* 3yyyy... */
                "serial.E.prefix = X-\n"
                "serial.F.prefix = X\nserial.F.digits = 7\n");
    ck_assert_int_eq(serials_count(s), 6);
    serials_free(s);
}
END_TEST

/* Issue 20, finding 7: yy with a snowflake layout that outlasts 100 years. */
START_TEST(snowflake_yy_layout)
{
    struct serials *s;

    load_bad("snowflake.timestamp_bits = 42\nsnowflake.sequence_bits = 11\n"
             "serial.S.source = snowflake\nserial.S.pattern = yyMMddHHmmssSSS\n",
             "t.conf:4: serial.S.pattern: yy repeats every 100 years, and the "
             "snowflake layout (snowflake.timestamp_bits = 42) lasts 139 years");
    s = load_ok("snowflake.timestamp_bits = 42\nsnowflake.sequence_bits = 11\n"
                "serial.S.source = snowflake\nserial.S.pattern = yyyyMMddHHmmssSSS\n");
    serials_free(s);
    s = load_ok("serial.S.source = snowflake\nserial.S.pattern = yyMMddHHmmssSSS\n");
    serials_free(s);
}
END_TEST

/* Issue 20, finding 5: the worker field is as wide as the layout's largest
 * worker ID (4 digits at least, as before). */
START_TEST(worker_digits)
{
    struct serials *s = load_ok("serial.W.worker_id = true\n");

    ck_assert_int_eq(serials_def(s, 0)->worker_digits, 4);
    serials_free(s);
    s = load_ok("snowflake.worker_bits = 14\nsnowflake.sequence_bits = 8\n"
                "serial.W.worker_id = true\nserial.N.prefix = N\n");
    ck_assert_int_eq(serials_def(s, 0)->worker_digits, 5);
    ck_assert_int_eq(serials_def(s, 1)->worker_digits, 0);
    serials_free(s);
}
END_TEST

static void
fmt(struct serials *s, uint64_t seq, const struct tzone_tm *tm, char *out)
{
    const struct serial_def *d = serials_def(s, 0);
    char *e = serial_format(d, tm, -1, 0, seq, d->digits, out);

    *e = '\0';
}

START_TEST(period_change)
{
    struct serials *s = load_ok("serial.PAY.prefix = PAY\n");
    uint64_t seq[4];
    struct tzone_tm tm;
    char text[64];

    /* Nothing loaded: wait, and one load is asked for, not two. */
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_WAIT);
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_WAIT);
    ck_assert_int_eq(loads[0], 1);

    /* The database said 23:59:59.000 on the 23rd when the load was sent
     * at fake_us. */
    serial_install(s, 0, D23 + 24 * HOUR - 1000, fake_us, 1001, 1000);
    ck_assert_int_eq(serial_take(s, 0, 2, seq, &tm), SERIAL_OK);
    ck_assert_uint_eq(seq[0], 1);
    ck_assert_uint_eq(seq[1], 2);
    fmt(s, seq[0], &tm, text);
    ck_assert_str_eq(text, "PAY20261123000001");

    /* 999 ms later by the node's monotonic clock: still the 23rd. */
    fake_us += 999000;
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_OK);
    ck_assert_uint_eq(seq[0], 3);
    ck_assert_int_eq(tm.day, 23);
    ck_assert_int_eq(tm.ms, 999);

    /* 1 ms more: the period is over; its 997 numbers left are dropped. */
    fake_us += 1000;
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_WAIT);
    ck_assert_int_eq(loads[0], 2);
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_WAIT);
    ck_assert_int_eq(loads[0], 2);

    /* The database is on the 24th: the sequence restarts. */
    serial_install(s, 0, D23 + 24 * HOUR + 5, fake_us, 1001, 1000);
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_OK);
    ck_assert_uint_eq(seq[0], 1);
    fmt(s, seq[0], &tm, text);
    ck_assert_str_eq(text, "PAY20261124000001");
    serials_free(s);
}
END_TEST

/* The node's clock runs slow: its estimate still says the 23rd, but a load
 * comes back from the database with the 24th: the 23rd's ranges go. */
START_TEST(database_decides)
{
    struct serials *s = load_ok("serial.PAY.prefix = PAY\nserial.PAY.step = 100\n");
    uint64_t seq[100];
    struct tzone_tm tm;

    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_WAIT);
    serial_install(s, 0, D23 + 23 * HOUR, fake_us, 501, 100);     /* [401, 501) */
    ck_assert_int_eq(serial_take(s, 0, 60, seq, &tm), SERIAL_OK);  /* prefetch */
    ck_assert_uint_eq(seq[0], 401);
    ck_assert_int_eq(loads[0], 2);
    serial_install(s, 0, D23 + 24 * HOUR + 1, fake_us, 101, 100);
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_OK);
    ck_assert_uint_eq(seq[0], 1);
    ck_assert_int_eq(tm.day, 24);
    /* A prefetched range of the same period goes after the current one. */
    ck_assert_int_eq(serial_take(s, 0, 60, seq, &tm), SERIAL_OK);
    ck_assert_int_eq(loads[0], 3);
    serial_install(s, 0, D23 + 24 * HOUR + 2, fake_us, 301, 100);  /* [201, 301) */
    ck_assert_int_eq(serial_take(s, 0, 40, seq, &tm), SERIAL_OK);
    ck_assert_uint_eq(seq[0], 62);
    ck_assert_uint_eq(seq[38], 100);
    ck_assert_uint_eq(seq[39], 201);
    serials_free(s);
}
END_TEST

START_TEST(exhausted)
{
    struct serials *s = load_ok("serial.count_max = 10\nserial.T.digits = 2\n"
                                "serial.T.step = 60\n");
    uint64_t seq[60];
    struct tzone_tm tm;

    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_WAIT);
    serial_install(s, 0, D23, fake_us, 61, 60);                    /* [1, 61) */
    for (int k = 0; k < 6; k++)
        ck_assert_int_eq(serial_take(s, 0, 10, seq, &tm), SERIAL_OK);
    ck_assert_int_eq(loads[0], 2);
    serial_install(s, 0, D23 + 1, fake_us, 121, 60);    /* [61, 121) cut to 99 */
    ck_assert_int_eq(serial_take(s, 0, 10, seq, &tm), SERIAL_OK);
    ck_assert_uint_eq(seq[0], 61);
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(serial_take(s, 0, 10, seq, &tm), SERIAL_OK);
    /* 91..99 are left: 10 is refused, 9 are given, then nothing. */
    ck_assert_int_eq(serial_take(s, 0, 10, seq, &tm), SERIAL_EXHAUSTED);
    ck_assert_int_eq(serial_take(s, 0, 9, seq, &tm), SERIAL_OK);
    ck_assert_uint_eq(seq[8], 99);
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_EXHAUSTED);
    ck_assert_int_eq(loads[0], 2);                     /* nothing more to load */
    /* The next day starts over. */
    fake_us += 24 * HOUR * 1000;
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_WAIT);
    ck_assert_int_eq(loads[0], 3);
    serials_free(s);
}
END_TEST

/* New York, 2026-11-01: 01:00-02:00 happens twice. The day's sequence goes
 * on through the repeated hour, so equal printed times get new numbers. */
START_TEST(dst_fall_back)
{
    struct serials *s = load_ok("serial.NY.zone = America/New_York\n"
                                "serial.NY.pattern = yyyyMMddHHmmss\n");
    int64_t t0 = ms_of(2026, 11, 1, 5, 30);             /* 01:30 EDT */
    uint64_t seq[2];
    struct tzone_tm tm;
    char a[64], b[64];

    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_WAIT);
    serial_install(s, 0, t0, fake_us, 1001, 1000);
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_OK);
    fmt(s, seq[0], &tm, a);
    ck_assert_int_eq(tm.hour, 1);
    fake_us += HOUR * 1000;                              /* 01:30 EST */
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_OK);
    fmt(s, seq[0], &tm, b);
    ck_assert_int_eq(tm.hour, 1);
    ck_assert_int_eq(tm.min, 30);
    ck_assert_str_eq(a, "20261101013000000001");
    ck_assert_str_eq(b, "20261101013000000002");
    serials_free(s);
}
END_TEST

/* A later load whose database time is behind what was printed: the printed
 * time never goes back. */
START_TEST(printed_time_never_back)
{
    struct serials *s = load_ok("serial.T.pattern = yyyyMMddHHmmssSSS\n"
                                "serial.T.step = 100\n");
    uint64_t seq[60];
    struct tzone_tm tm;

    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_WAIT);
    serial_install(s, 0, D23 + 1000, fake_us, 101, 100);
    fake_us += 500000;
    ck_assert_int_eq(serial_take(s, 0, 60, seq, &tm), SERIAL_OK);
    ck_assert_int_eq(tm.sec, 1);
    ck_assert_int_eq(tm.ms, 500);
    serial_install(s, 0, D23 + 1200, fake_us, 201, 100);
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_OK);
    ck_assert_int_eq(tm.ms, 500);
    serials_free(s);
}
END_TEST

/* store_serial_alloc on SQLite: the row of the clock's period is created
 * at 1 on first use, later loads continue it, another period gets its own
 * row, the time read is the database's (here the host's), and a refused
 * name changes nothing. */
static int
key_day(void *arg, int64_t db_ms, char *tag, size_t cap,
        struct store_serial_floor *floor)
{
    const char *what = arg;

    (void)floor;
    if (strcmp(what, "refuse") == 0)
        return -1;
    snprintf(tag, cap, "%s:%lld", what, (long long)(db_ms / 86400000));
    return 0;
}

/* One load of code 0 of the definitions text from st: the range's end. */
static int64_t
take_def(struct store *st, const char *text, char *tag)
{
    /* The database's clock read at noon of 2026-11-23 (UTC). */
    int64_t offset = D23 + 12 * HOUR - util_wall_ms();
    struct serials *s = load_ok(text);
    struct serial_key_arg ka = { s, 0 };
    int64_t db_ms = 0, max_id = 0;
    char *cause = NULL;

    ck_assert_int_eq(store_serial_alloc(st, offset, serial_row_name, &ka, 100,
                                        &db_ms, tag, 129, &max_id, &cause), STORE_OK);
    serials_free(s);
    return max_id;
}

/* A SQLite store in a new directory dir (a mkdtemp template). */
static struct store *
tmp_store(char *dir)
{
    char path[64], *cause = NULL;
    struct store *st;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/leaf.db", dir);
    config_free(&cfg);
    config_defaults(&cfg);
    free(cfg.sqlite_path);
    cfg.sqlite_path = strdup(path);
    cfg.store = STORE_SQLITE;
    ck_assert_int_eq(store_thread_init(), 0);
    st = store_open(&cfg, &cause);
    ck_assert_msg(st != NULL, "%s", cause ? cause : "");
    return st;
}

static void
tmp_store_close(struct store *st, const char *dir)
{
    static const char *const files[] = { "leaf.db", "leaf.db-wal", "leaf.db-shm" };
    char path[64];

    store_close(st);
    for (size_t k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[k]);
        unlink(path);
    }
    rmdir(dir);
}

START_TEST(store_sqlite_rows)
{
    char dir[] = "/tmp/check_serial.XXXXXX", tag[129], tag2[129];
    char *cause = NULL;
    int64_t db_ms = 0, max_id = 0, now = util_wall_ms();
    struct store_row row;
    struct store *st = tmp_store(dir);

    ck_assert_int_eq(store_serial_alloc(st, 0, key_day, "PAY", 50, &db_ms, tag,
                                        sizeof tag, &max_id, &cause), STORE_OK);
    ck_assert_int_eq(max_id, 51);                       /* [1, 51) */
    ck_assert_msg(db_ms > now - 5000 && db_ms < now + 5000, "db_ms %lld", (long long)db_ms);
    ck_assert_int_eq(store_serial_alloc(st, 0, key_day, "PAY", 50, &db_ms, tag2,
                                        sizeof tag2, &max_id, &cause), STORE_OK);
    ck_assert_str_eq(tag2, tag);
    ck_assert_int_eq(max_id, 101);                      /* [51, 101) */
    /* Two days on by the offset: a new row from 1. */
    ck_assert_int_eq(store_serial_alloc(st, 2 * 86400000LL, key_day, "PAY", 50, &db_ms,
                                        tag2, sizeof tag2, &max_id, &cause), STORE_OK);
    ck_assert_str_ne(tag2, tag);
    ck_assert_int_eq(max_id, 51);
    ck_assert_int_eq(store_get(st, tag, &row, &cause), STORE_OK);
    ck_assert_int_eq(row.max_id, 101);
    ck_assert_int_eq(store_serial_alloc(st, 0, key_day, "refuse", 50, &db_ms, tag2,
                                        sizeof tag2, &max_id, &cause), STORE_BAD_ARG);
    free(cause);
    cause = NULL;

    /* Issue 20, finding 3, on the real row keys. A row of the key format
     * before ("PAY:<today>"): the new row starts above it, not at 1. */
    {
        const char *old = "PAY:20261123";
        char day[129], other[129];

        ck_assert_int_eq(store_insert(st, old, 500, 100, NULL, &cause), STORE_OK);
        ck_assert_int_eq(take_def(st, "serial.PAY.prefix = PAY\n", day), 600);
        ck_assert_str_eq(day, "serial.pay.y4mod.0.6:20261123");
        /* reset day -> month: the month's row starts above the day's. */
        ck_assert_int_eq(take_def(st, "serial.PAY.prefix = PAY\nserial.PAY.reset = "
                                  "month\n", other), 700);
        ck_assert_str_ne(other, day);
        /* and back: the day's row starts above the month's. */
        ck_assert_int_eq(take_def(st, "serial.PAY.prefix = PAY\n", other), 800);
        ck_assert_str_eq(other, day);
        /* A new name with the same prefix: the same row. */
        ck_assert_int_eq(take_def(st, "serial.PAY2.prefix = PAY\n", other), 900);
        ck_assert_str_eq(other, day);
        /* never takes every row of its shape into account. */
        ck_assert_int_eq(take_def(st, "serial.PAY.prefix = PAY\nserial.PAY.reset = "
                                  "never\n", other), 1000);
        /* Another prefix prints other text: its own rows, from 1 (for
         * another code: PAY's rows of the format before are in PAY's). */
        ck_assert_int_eq(take_def(st, "serial.ORD.prefix = PAX\n", other), 101);
        ck_assert_str_eq(other, "serial.pax.y4mod.0.6:20261123");
    }
    tmp_store_close(st, dir);
}
END_TEST

/* Issue 20, finding 3, review hole 1: a rolling upgrade. A node of the
 * version before advances "PAY:20261123" alone (UPDATE max_id = max_id +
 * step, as store_alloc does); new nodes load from the new row, whose floor
 * reads the old one. Interleaved, no two ranges meet. */
START_TEST(old_node_interleaved)
{
    char dir[] = "/tmp/check_serial.XXXXXX", tag[129], *cause = NULL;
    struct store *st = tmp_store(dir);
    int64_t lo[8], hi[8], db_step = 0;
    int n = 0;

    ck_assert_int_eq(store_insert(st, "PAY:20261123", 1, 100, NULL, &cause),
                     STORE_OK);
    for (int round = 0; round < 4; round++) {
        /* the old node */
        ck_assert_int_eq(store_alloc(st, "PAY:20261123", 100, &hi[n], &db_step,
                                     &cause), STORE_OK);
        lo[n] = hi[n] - 100;
        n++;
        /* a new node (take_def loads 100 at noon of 2026-11-23) */
        hi[n] = take_def(st, "serial.PAY.prefix = PAY\n", tag);
        lo[n] = hi[n] - 100;
        n++;
    }
    for (int a = 0; a < n; a++)
        for (int b = 0; b < a; b++)
            ck_assert_msg(hi[a] <= lo[b] || hi[b] <= lo[a],
                          "ranges [%lld, %lld) and [%lld, %lld) meet",
                          (long long)lo[b], (long long)hi[b], (long long)lo[a],
                          (long long)hi[a]);
    tmp_store_close(st, dir);
}
END_TEST

/* Race: 4 takers and a loader thread that installs each asked-for range,
 * switching to the next day halfway. Every (day, sequence) is taken once,
 * and a taker never sees a day go back. */
#define RACE_TAKERS 4
#define RACE_EACH   20000

static struct serials *race_s;
static atomic_int race_want, race_done;

static void
race_load(void *arg, size_t i)
{
    (void)arg;
    (void)i;
    atomic_store(&race_want, 1);
}

static void *
race_loader(void *arg)
{
    int64_t max_id[2] = { 1, 1 }, nloads = 0;

    (void)arg;
    while (!atomic_load(&race_done)) {
        int day;

        if (!atomic_exchange(&race_want, 0)) {
            sched_yield();
            continue;
        }
        day = nloads++ < 40 ? 0 : 1;
        max_id[day] += 100;
        serial_install(race_s, 0, D23 + day * 24 * HOUR + 10, util_mono_us(),
                       max_id[day], 100);
    }
    return NULL;
}

struct race_out {
    int      n;
    uint64_t key[RACE_EACH + 3];            /* day << 32 | seq */
};

static void *
race_taker(void *arg)
{
    struct race_out *o = arg;
    struct tzone_tm tm;
    uint64_t seq[3];
    int k = 0, last_day = 0;

    while (o->n < RACE_EACH) {
        int n = 1 + k++ % 3;

        if (serial_take(race_s, 0, n, seq, &tm) != SERIAL_OK) {
            sched_yield();
            continue;
        }
        ck_assert_int_ge(tm.day, last_day);
        last_day = tm.day;
        for (int j = 0; j < n; j++)
            o->key[o->n++] = (uint64_t)tm.day << 32 | seq[j];
    }
    return NULL;
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

START_TEST(race_take_install)
{
    struct serial_hooks h = { .load = race_load };
    static struct race_out out[RACE_TAKERS];
    pthread_t lt, tt[RACE_TAKERS];
    uint64_t *all;
    size_t total = 0, k = 0;

    race_s = load_ok("serial.count_max = 3\nserial.R.step = 100\n");
    serials_set_hooks(race_s, &h);        /* real monotonic clock */
    atomic_store(&race_want, 0);
    atomic_store(&race_done, 0);
    pthread_create(&lt, NULL, race_loader, NULL);
    for (int i = 0; i < RACE_TAKERS; i++) {
        out[i].n = 0;
        pthread_create(&tt[i], NULL, race_taker, &out[i]);
    }
    for (int i = 0; i < RACE_TAKERS; i++)
        pthread_join(tt[i], NULL);
    atomic_store(&race_done, 1);
    pthread_join(lt, NULL);
    for (int i = 0; i < RACE_TAKERS; i++)
        total += (size_t)out[i].n;
    all = malloc(total * sizeof *all);
    for (int i = 0; i < RACE_TAKERS; i++)
        for (int j = 0; j < out[i].n; j++)
            all[k++] = out[i].key[j];
    qsort(all, total, sizeof *all, cmp_u64);
    for (size_t i = 1; i < total; i++)
        ck_assert_msg(all[i] != all[i - 1], "day %u seq %u taken twice",
                      (unsigned)(all[i] >> 32), (unsigned)(all[i] & 0xffffffff));
    ck_assert_uint_eq(all[0] & 0xffffffff, 1);            /* day 23 from 1 */
    ck_assert_uint_eq(all[total - 1] >> 32, 24);          /* reached the 24th */
    free(all);
    serials_free(race_s);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("serial");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, definitions);
    tcase_add_test(tc, demo_without_file);
    tcase_add_test(tc, period_ends);
    tcase_add_test(tc, row_names);
    tcase_add_test(tc, colliding_codes_refused);
    tcase_add_test(tc, snowflake_yy_layout);
    tcase_add_test(tc, worker_digits);
    tcase_add_test(tc, period_change);
    tcase_add_test(tc, database_decides);
    tcase_add_test(tc, exhausted);
    tcase_add_test(tc, dst_fall_back);
    tcase_add_test(tc, printed_time_never_back);
    tcase_add_test(tc, race_take_install);
    tcase_add_test(tc, store_sqlite_rows);
    tcase_add_test(tc, old_node_interleaved);
    tcase_add_test(tc, rows_of_other_shapes);
    tcase_add_test(tc, pattern_reorder_after_period);
    tcase_add_test(tc, snowflake_zone_behind);
    tcase_add_test(tc, zonerec_parse);
    tcase_add_test(tc, zone_gate_record);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    config_free(&cfg);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
