/* check_serial.c: serial definitions (start-up errors name file:line and
 * key), period ends in zones with and without DST, row names from the
 * database's time, and the allocator's period rules with an injected
 * monotonic clock: a range is never used past its period's end, a load that
 * brings a later period drops the earlier one, the sequence restarts once
 * per period, a repeated local hour (DST fall-back) keeps counting, and a
 * period whose digits are used up is refused, never wrapped. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "serial.h"
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
                                "serial.ALL.reset = never\n");
    struct serial_key_arg ka = { s, 0 };
    char tag[129];

    /* 03:00Z on the 24th is still the 23rd in New York. */
    ck_assert_int_eq(serial_row_name(&ka, D23 + 27 * HOUR, tag, sizeof tag), 0);
    ck_assert_str_eq(tag, "PAY:20261123");
    ck_assert_int_eq(serial_row_name(&ka, D23 + 29 * HOUR, tag, sizeof tag), 0);
    ck_assert_str_eq(tag, "PAY:20261124");
    ka.i = 1;
    ck_assert_int_eq(serial_row_name(&ka, D23, tag, sizeof tag), 0);
    ck_assert_str_eq(tag, "ALL:all");
    ck_assert_int_eq(serial_row_name(&ka, D23, tag, 5), -1);
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
key_day(void *arg, int64_t db_ms, char *tag, size_t cap)
{
    const char *what = arg;

    if (strcmp(what, "refuse") == 0)
        return -1;
    snprintf(tag, cap, "%s:%lld", what, (long long)(db_ms / 86400000));
    return 0;
}

START_TEST(store_sqlite_rows)
{
    char dir[] = "/tmp/check_serial.XXXXXX", path[64], tag[129], tag2[129];
    char *cause = NULL;
    struct store *st;
    int64_t db_ms = 0, max_id = 0, now = util_wall_ms();
    struct store_row row;

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
    store_close(st);
    unlink(path);
    snprintf(path, sizeof path, "%s/leaf.db-wal", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/leaf.db-shm", dir);
    unlink(path);
    rmdir(dir);
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
    tcase_add_test(tc, period_change);
    tcase_add_test(tc, database_decides);
    tcase_add_test(tc, exhausted);
    tcase_add_test(tc, dst_fall_back);
    tcase_add_test(tc, printed_time_never_back);
    tcase_add_test(tc, race_take_install);
    tcase_add_test(tc, store_sqlite_rows);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    config_free(&cfg);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
