/* check_serial_conceal.c: concealed serial numbers (serial.<code>.conceal).
 * The key file's checks at start; a period's whole 10^6 domain enciphered
 * through serial_take (every value distinct, none repeated, then
 * serial_exhausted); the tweak's period (two periods, two permutations);
 * the construction as docs/id-kinds.md gives it, recomputed with ff1.h
 * alone; serial_reveal (decoding a serial's text); and "the competitor's test": two probes with N =
 * 100 or 10,000 serials issued between them, 400 trials, an estimator that
 * sees only the probes' difference (accuracy printed: on a concealed code
 * at most 55%, on a plain code 100%). */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "ff1.h"
#include "serial.h"
#include "store.h"
#include "testfile.h"
#include "util.h"

/* 2026-11-23T00:00:00Z */
#define D23 INT64_C(1795392000000)
#define DAY INT64_C(86400000)

static const char KEY_HEX[] = "2b7e151628aed2a6abf7158809cf4f3c";
static const uint8_t KEY[16] = {
    0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6,
    0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c,
};

static int64_t fake_us;
static char dir[64], keyfile[96];
static struct config cfg;

static int64_t
fake_now(void)
{
    return fake_us;
}

static void
no_load(void *arg, size_t i)
{
    (void)arg;
    (void)i;
}

static void
write_file(const char *path, const void *data, size_t len, mode_t mode)
{
    ck_assert_int_eq(testfile_write(path, data, len, mode), 0);
}

static void
setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/check_conceal.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(keyfile, sizeof keyfile, "%s/serial.key", dir);
    write_file(keyfile, KEY_HEX, strlen(KEY_HEX), 0600);
}

static void
teardown(void)
{
    char p[128];

    for (int k = 0; k < 4; k++) {
        snprintf(p, sizeof p, "%s/k%d", dir, k);
        unlink(p);
    }
    unlink(keyfile);
    rmdir(dir);
    config_free(&cfg);
}

static struct serials *
load(const char *text, char **cause)
{
    struct serial_hooks h = { .load = no_load, .now_us = fake_now };
    struct serials *s;

    config_free(&cfg);
    config_defaults(&cfg);
    cfg.from_file = 1;
    cfg.snowflake_enable = 1;
    ck_assert_int_eq(config_load_string(&cfg, "t.conf", text, cause), 0);
    s = serials_new(&cfg, &h, cause);
    fake_us = 1000000;
    return s;
}

/* The code PAY (prefix PAY, yyyyMMdd, day reset, 6 digits), concealed
 * under keyfile when conceal. */
static struct serials *
load_pay(int conceal, const char *extra)
{
    char text[512], *cause = NULL;
    struct serials *s;

    snprintf(text, sizeof text, "serial.count_max = 10\n"
             "serial.PAY.prefix = PAY\nserial.PAY.step = 1000000\n%s%s%s%s",
             conceal ? "serial.PAY.conceal = true\nserial.PAY.key_file = " : "",
             conceal ? keyfile : "", conceal ? "\n" : "", extra);
    s = load(text, &cause);
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

START_TEST(key_file_checks)
{
    char text[512], path[128];
    uint8_t raw[32];
    struct serials *s;

    /* Refused: snowflake source, too few digits, no key file, a key file
     * without conceal, a missing file. */
    snprintf(text, sizeof text, "serial.S.source = snowflake\n"
             "serial.S.pattern = yyyyMMddHHmmssSSS\nserial.S.conceal = true\n"
             "serial.S.key_file = %s\n", keyfile);
    load_bad(text, "serial.S.conceal: source = snowflake cannot be concealed");
    snprintf(text, sizeof text, "serial.count_max = 10\nserial.S.digits = 5\n"
             "serial.S.conceal = true\nserial.S.key_file = %s\n", keyfile);
    load_bad(text, "needs serial.S.digits >= 6");
    load_bad("serial.S.conceal = true\n", "needs serial.S.key_file");
    snprintf(text, sizeof text, "serial.S.key_file = %s\n", keyfile);
    load_bad(text, "serial.S.conceal is not true");
    snprintf(text, sizeof text, "serial.S.conceal = true\n"
             "serial.S.key_file = %s/none\n", dir);
    load_bad(text, "/none: cannot open");
    /* Mode 644 and 640: refused, naming the file and chmod 600. */
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(chmod(keyfile, k ? 0640 : 0644), 0);
        snprintf(text, sizeof text, "serial.S.conceal = true\n"
                 "serial.S.key_file = %s\n", keyfile);
        load_bad(text, "lets group or others read or change the key");
        load_bad(text, "chmod 600 /tmp/check_conceal");
    }
    ck_assert_int_eq(chmod(keyfile, 0600), 0);
    /* Short, odd and non-hex contents. */
    snprintf(path, sizeof path, "%s/k0", dir);
    write_file(path, KEY_HEX, 30, 0600);
    snprintf(text, sizeof text, "serial.S.conceal = true\n"
             "serial.S.key_file = %s\n", path);
    load_bad(text, "expected 32, 48 or 64 hex digits");
    write_file(path, "zz7e151628aed2a6abf7158809cf4f3czz7e151628aed2a6", 48, 0600);
    load_bad(text, "got 48 characters");
    /* Two keys: a serial key file holds one. */
    write_file(path, "2B7E151628AED2A6ABF7158809CF4F3C\n"
               "2B7E151628AED2A6ABF7158809CF4F3D\n", 66, 0600);
    load_bad(text, "this file holds one key");
    /* Accepted: hex with a newline, and 16, 24 or 32 raw bytes; each key's
     * check value is kept. */
    write_file(path, "2B7E151628AED2A6ABF7158809CF4F3C\n", 33, 0600);
    s = load(text, &(char *){ NULL });
    ck_assert_ptr_nonnull(s);
    {
        struct ff1_key *k = ff1_key_new(KEY, 16, NULL);
        uint8_t kcv[16];

        ff1_key_check_value(k, kcv);
        ck_assert_mem_eq(serials_def(s, 0)->key_check, kcv, 16);
        ff1_key_free(k);
    }
    serials_free(s);
    for (size_t n = 16; n <= 32; n += 8) {
        memset(raw, 0x5a, sizeof raw);
        write_file(path, raw, n, 0400);
        s = load(text, &(char *){ NULL });
        ck_assert_msg(s != NULL, "raw key of %zu bytes", n);
        serials_free(s);
        unlink(path);
    }
}
END_TEST

/* serial_reveal of "PAY<day>" + seq: the day's period and the counter. */
static uint64_t
reveal(struct serials *s, const char *day, uint64_t seq)
{
    char text[32], period[16];
    const char *why = NULL;
    uint64_t n = UINT64_MAX;

    snprintf(text, sizeof text, "PAY%s%06" PRIu64, day, seq);
    ck_assert_msg(serial_reveal(s, 0, text, strlen(text), period, &n, &why) == 0,
                  "%s: %s", text, why);
    ck_assert_str_eq(period, day);
    return n;
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* A day's whole sequence space [1, 10^6) through serial_take: 999,999
 * distinct values below 10^6, the one left out is FF1(0), serial_reveal
 * gives each value's counter back, few neighbours differ by one, and then
 * serial_exhausted (never a repeat). */
START_TEST(whole_domain)
{
    struct serials *s = load_pay(1, "");
    const uint64_t dom = 1000000;
    uint64_t *all = malloc(dom * sizeof *all), *seq = malloc(10000 * sizeof *seq);
    uint8_t *seen = calloc(dom, 1);
    struct tzone_tm tm;
    size_t got = 0, plus_one = 0;
    uint64_t missing = dom;

    /* The range [1, 1000001) is cut at 10^6 - 1. */
    serial_install(s, 0, D23 + 1000, fake_us, 1000001, 1000000);
    while (got < dom - 1) {
        int64_t n = (int64_t)(dom - 1 - got < 10000 ? dom - 1 - got : 10000);

        ck_assert_int_eq(serial_take(s, 0, n, seq, &tm), SERIAL_OK);
        for (int64_t k = 0; k < n; k++) {
            ck_assert_uint_lt(seq[k], dom);
            ck_assert_msg(!seen[seq[k]], "%06" PRIu64 " handed out twice", seq[k]);
            seen[seq[k]] = 1;
            if ((got + (size_t)k) % 997 == 0) {
                ck_assert_uint_eq(reveal(s, "20261123", seq[k]),
                                  got + (size_t)k + 1);
            }
            all[got + (size_t)k] = seq[k];
        }
        got += (size_t)n;
    }
    for (size_t k = 1; k < got; k++)
        plus_one += all[k] == all[k - 1] + 1;
    ck_assert_uint_lt(plus_one, 20);    /* ~1 expected; plain: 999,998 */
    ck_assert_int_eq(serial_take(s, 0, 1, seq, &tm), SERIAL_EXHAUSTED);
    for (uint64_t v = 0; v < dom; v++)
        if (!seen[v]) {
            ck_assert_uint_eq(missing, dom);
            missing = v;
        }
    ck_assert_uint_eq(reveal(s, "20261123", missing), 0);
    qsort(all, got, sizeof *all, cmp_u64);
    for (size_t k = 1; k < got; k++)
        ck_assert_uint_ne(all[k], all[k - 1]);
    free(all);
    free(seq);
    free(seen);
    serials_free(s);
}
END_TEST

/* The construction as documented: FF1 with the file's AES key, radix 10,
 * 6 digits, tweak = the ASCII row name of the period. Two days, two
 * permutations; the same day on a plain code prints the counter. */
START_TEST(construction_and_periods)
{
    struct serials *s = load_pay(1, "");
    struct ff1_key *k = ff1_key_new(KEY, 16, NULL);
    struct ff1_domain d23, d24;
    const char *t23 = "serial.pay.y4mod.0.6:20261123";
    const char *t24 = "serial.pay.y4mod.0.6:20261124";
    char tweak[SERIAL_TWEAK_MAX], text[SERIAL_TEXT_MAX + 1], *end;
    uint64_t a[100], b[100], want;
    struct tzone_tm tm;
    int same = 0;

    serial_conceal_tweak(serials_def(s, 0), D23 + 5, tweak);
    ck_assert_str_eq(tweak, t23);
    ck_assert_int_eq(ff1_domain_init(&d23, k, 10, 6, t23, strlen(t23), NULL), 0);
    ck_assert_int_eq(ff1_domain_init(&d24, k, 10, 6, t24, strlen(t24), NULL), 0);
    serial_install(s, 0, D23 + 5, fake_us, 101, 100);
    ck_assert_int_eq(serial_take(s, 0, 100, a, &tm), SERIAL_OK);
    for (int j = 0; j < 100; j++) {
        ck_assert_int_eq(ff1_encrypt_u64(k, &d23, (uint64_t)j + 1, &want), 0);
        ck_assert_uint_eq(a[j], want);
    }
    end = serial_format(serials_def(s, 0), &tm, -1, 0, a[0], 6, text);
    *end = '\0';
    ck_assert_int_eq(strncmp(text, "PAY20261123", 11), 0);
    ck_assert_uint_eq(strlen(text), 17);
    /* The next day: the same counters, another permutation. */
    serial_install(s, 0, D23 + DAY + 5, fake_us, 101, 100);
    ck_assert_int_eq(serial_take(s, 0, 100, b, &tm), SERIAL_OK);
    for (int j = 0; j < 100; j++) {
        ck_assert_int_eq(ff1_encrypt_u64(k, &d24, (uint64_t)j + 1, &want), 0);
        ck_assert_uint_eq(b[j], want);
        same += a[j] == b[j];
    }
    ck_assert_int_le(same, 1);
    /* docs/id-kinds.md's check values (tests/lib/ff1_ref.py, another FF1):
     * 2026-11-28, counters 1 and 2. */
    serial_install(s, 0, D23 + 5 * DAY + 5, fake_us, 3, 2);
    ck_assert_int_eq(serial_take(s, 0, 2, b, &tm), SERIAL_OK);
    ck_assert_uint_eq(b[0], 797369);
    ck_assert_uint_eq(b[1], 584286);
    serial_install(s, 0, D23 + DAY + 5, fake_us, 101, 100);
    ck_assert_int_eq(serial_take(s, 0, 100, b, &tm), SERIAL_OK);
    /* Decoding: each day's own permutation; bad text refused. */
    ck_assert_uint_eq(reveal(s, "20261123", a[41]), 42);
    ck_assert_uint_eq(reveal(s, "20261124", b[41]), 42);
    {
        static const char *const bad[] = {
            "PAY20261123", "PAY2026112312345", "PAY202611231234567",
            "PAX20261123123456", "PAY2026112312345x", "PAY20261323123456",
            "PAY20261100123456",
        };
        char period[16];
        const char *why;

        for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++)
            ck_assert_msg(serial_reveal(s, 0, bad[j], strlen(bad[j]), period,
                                        &want, &why) == -1, "%s", bad[j]);
    }
    /* Not concealed: the digits are the counter. */
    serials_free(s);
    s = load_pay(0, "");
    ck_assert_uint_eq(reveal(s, "20261123", 5), 5);
    serials_free(s);
    ff1_key_free(k);
}
END_TEST

static void
row(struct store_row *r, const char *tag)
{
    memset(r, 0, sizeof *r);
    snprintf(r->biz_tag, sizeof r->biz_tag, "%s", tag);
    snprintf(r->description, sizeof r->description, "%s", STORE_SERIAL_DESCRIPTION);
    r->max_id = 1001;
}

/* Rows of one period under two keys, or plain and concealed, or a
 * concealed code's rows of two resets: refused with serial_key_changed
 * while the periods overlap, clear in the next period. The row's name
 * carries the key's check value. */
static void
expect_rows(struct serials *s, const char *tag, int64_t now_ms, int refused)
{
    struct store_row r;
    char *cause = NULL;
    int rc;

    row(&r, tag);
    rc = serial_rows_check(s, 0, &r, 1, now_ms, &cause);
    ck_assert_msg(rc == (refused ? -1 : 0), "%s at %lld: %s", tag,
                  (long long)now_ms, cause ? cause : "clear");
    if (refused)
        ck_assert_msg(strncmp(cause, SERIAL_KEY_CHANGED,
                              strlen(SERIAL_KEY_CHANGED)) == 0, "%s", cause);
    free(cause);
}

START_TEST(key_changed_rows)
{
    struct serials *s = load_pay(1, "");
    const uint8_t *kcv = serials_def(s, 0)->key_check;
    struct serial_key_arg ka = { s, 0 };
    struct store_serial_floor f;
    char tag[TAG_MAX + 1], own[TAG_MAX + 1], want[TAG_MAX + 1], hex[17];

    for (int k = 0; k < 8; k++)
        snprintf(hex + 2 * k, 3, "%02x", kcv[k]);
    snprintf(want, sizeof want, "serial.pay.y4mod.0.6.k%s:20261123", hex);
    ck_assert_int_eq(serial_row_name(&ka, D23 + 5, tag, sizeof tag, &f), 0);
    ck_assert_str_eq(tag, want);
    ck_assert_str_eq(f.row[0].tag, want);   /* its floor: its own key's rows */
    snprintf(own, sizeof own, "%s", want);
    expect_rows(s, own, D23 + 5, 0);                        /* its own row */
    expect_rows(s, "serial.pay.y4mod.0.6:20261123", D23 + 5, 1);  /* plain */
    expect_rows(s, "serial.pay.y4mod.0.6.k00112233445566ff:20261123", D23 + 5, 1);
    /* The next day: yesterday's rows stand in nobody's way. */
    expect_rows(s, "serial.pay.y4mod.0.6:20261123", D23 + DAY + 5, 0);
    expect_rows(s, "serial.pay.y4mod.0.6.k00112233445566ff:20261123",
                D23 + DAY + 5, 0);
    /* Its own rows of a month (another reset): other tweaks, refused. */
    snprintf(own, sizeof own, "serial.pay.y4mod.0.6.k%s:202611", hex);
    expect_rows(s, own, D23 + 5, 1);
    expect_rows(s, own, D23 + 5 * DAY, 1);
    expect_rows(s, own, D23 + 8 * DAY, 0);           /* December */
    serials_free(s);
    /* A plain code meets a concealed row of its day: refused, not the next
     * day. A row name that does not parse is not a key row. */
    s = load_pay(0, "");
    expect_rows(s, want, D23 + 5, 1);
    expect_rows(s, want, D23 + DAY + 5, 0);
    expect_rows(s, "serial.pay.y4mod.0.6:20261123", D23 + 5, 0);
    serials_free(s);
}
END_TEST

/* The positive control for serial_key_changed: one period's counters
 * carried on under another key (1..100,000 under one, 100,001..200,000
 * under the next, as a node restarted with a new key mid-period would)
 * print serials already printed. */
START_TEST(key_change_would_repeat)
{
    static const uint8_t other[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                       13, 14, 15, 16 };
    const char *t = "serial.pay.y4mod.0.6:20261128";
    struct ff1_key *ka = ff1_key_new(KEY, 16, NULL), *kb = ff1_key_new(other, 16, NULL);
    struct ff1_domain da, db;
    uint8_t *seen = calloc(1000000, 1);
    uint64_t v;
    int repeats = 0;

    ck_assert_int_eq(ff1_domain_init(&da, ka, 10, 6, t, strlen(t), NULL), 0);
    ck_assert_int_eq(ff1_domain_init(&db, kb, 10, 6, t, strlen(t), NULL), 0);
    for (uint64_t c = 1; c <= 100000; c++) {
        ck_assert_int_eq(ff1_encrypt_u64(ka, &da, c, &v), 0);
        seen[v] = 1;
    }
    for (uint64_t c = 100001; c <= 200000; c++) {
        ck_assert_int_eq(ff1_encrypt_u64(kb, &db, c, &v), 0);
        repeats += seen[v];
    }
    printf("a key changed mid-period (100,000 + 100,000 serials): %d repeats\n",
           repeats);
    ck_assert_int_gt(repeats, 1000);        /* ~10,000 expected */
    free(seen);
    ff1_key_free(ka);
    ff1_key_free(kb);
}
END_TEST

/* xorshift64*, seeded: the trials are the same every run. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t
rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

/* 400 trials: a day (its own permutation), a counter a in [1, 980,000), a
 * secret N in {100, 10000}; the competitor takes a serial, N are issued,
 * it takes another, through serial_install and serial_take as the API
 * does. Two estimators that see only d = second - first: "N = 10000 when
 * |d| > 5050" (the midpoint, perfect on plain codes) and "N = 10000 when
 * d < 0 or d > 5050". Returns the better one's accuracy in percent. */
static double
competitor(int conceal)
{
    struct serials *s = load_pay(conceal, "");
    uint64_t *seq = malloc(10000 * sizeof *seq), p1, p2;
    struct tzone_tm tm;
    int right[2] = { 0, 0 };
    const int trials = 400;

    rng_state = 0x9e3779b97f4a7c15ULL;
    for (int t = 0; t < trials; t++) {
        int64_t n = rng() & 1 ? 10000 : 100;
        int64_t a = 1 + (int64_t)(rng() % 980000), d;
        int64_t db_ms = D23 + t * DAY + 1000;
        int big;

        /* The period's range [a, a + n + 2). */
        serial_install(s, 0, db_ms, fake_us, a + n + 2, n + 2);
        ck_assert_int_eq(serial_take(s, 0, 1, &p1, &tm), SERIAL_OK);
        ck_assert_int_eq(serial_take(s, 0, n, seq, &tm), SERIAL_OK);
        ck_assert_int_eq(serial_take(s, 0, 1, &p2, &tm), SERIAL_OK);
        d = (int64_t)p2 - (int64_t)p1;
        big = n == 10000;
        right[0] += ((d > 5050 || d < -5050) == big);
        right[1] += ((d < 0 || d > 5050) == big);
    }
    free(seq);
    serials_free(s);
    return 100.0 * (right[0] > right[1] ? right[0] : right[1]) / trials;
}

START_TEST(competitors_test)
{
    double plain = competitor(0), concealed = competitor(1);

    printf("competitor's test (400 trials, N = 100 or 10,000): plain %.1f%%, "
           "concealed %.1f%%\n", plain, concealed);
    ck_assert_msg(plain == 100.0, "plain %.1f%%", plain);
    ck_assert_msg(concealed <= 55.0, "concealed %.1f%%", concealed);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("serial_conceal");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, key_file_checks);
    tcase_add_test(tc, whole_domain);
    tcase_add_test(tc, construction_and_periods);
    tcase_add_test(tc, competitors_test);
    tcase_add_test(tc, key_changed_rows);
    tcase_add_test(tc, key_change_would_repeat);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
