/* check_conceal.c: concealed segment tags (src/segment/conceal.c).
 * The construction against tests/lib/ff1_ref.py's values (docs/id-kinds.md
 * gives the same check values); a whole block enciphered (every ID
 * distinct, inside its block, and revealed back to its counter); the
 * block arithmetic of a load; the key records' verdicts (a new tag, the
 * same key, another key, a rotation, a key superseded, a key reused,
 * other bits); the configuration's refusals; two threads enciphering one
 * block at once (each with its own key copy: TSan); and "the competitor's
 * test": two probes with N = 100 or 10,000 IDs issued between them, 400
 * trials, estimators that see only the probes (their difference, and the
 * German-tank estimator over 8 probes): accuracy printed, at most 55% on a
 * concealed tag, 100% on a plain one. */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conceal.h"
#include "config.h"
#include "store.h"
#include "testfile.h"
#include "util.h"

#define K1_HEX "2b7e151628aed2a6abf7158809cf4f3c"
#define K2_HEX "000102030405060708090a0b0c0d0e0f"

static char dir[64], k1file[96], ringfile[96], k2file[96];
static struct config cfg;

static void
write_file(const char *path, const char *text, mode_t mode)
{
    ck_assert_int_eq(testfile_write(path, text, strlen(text), mode), 0);
}

static void
setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/check_conceal_tag.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(k1file, sizeof k1file, "%s/k1", dir);
    snprintf(k2file, sizeof k2file, "%s/k2", dir);
    snprintf(ringfile, sizeof ringfile, "%s/ring", dir);
    write_file(k1file, K1_HEX "\n", 0600);
    write_file(k2file, K2_HEX "\n", 0600);
    /* The rotation's file: the new key first, the retired one after it. */
    write_file(ringfile, "# order's keys\n" K2_HEX "\n\n" K1_HEX "\n", 0600);
}

static void
teardown(void)
{
    char p[128];

    unlink(k1file);
    unlink(k2file);
    unlink(ringfile);
    snprintf(p, sizeof p, "%s/bad", dir);
    unlink(p);
    rmdir(dir);
    config_free(&cfg);
}

static struct conceal *
load(const char *text, char **cause)
{
    config_free(&cfg);
    config_defaults(&cfg);
    cfg.from_file = 1;
    ck_assert_int_eq(config_load_string(&cfg, "t.conf", text, cause), 0);
    return conceal_new(&cfg, cause);
}

/* "order" (and "plain_no" listed nowhere) concealed under keyfile. */
static struct conceal *
load_order(const char *keyfile, int bits)
{
    char text[512], *cause = NULL;
    struct conceal *c;

    snprintf(text, sizeof text, "segment.conceal = order, pay.v2\n"
             "segment.conceal_key_file = %s\nsegment.conceal_bits = %d\n",
             keyfile, bits);
    c = load(text, &cause);
    ck_assert_msg(c != NULL, "%s", cause ? cause : "no tags");
    return c;
}

START_TEST(construction)
{
    struct conceal *c = load_order(k1file, 20);
    struct conceal_tag *t = conceal_find(c, "order", 5);
    char tweak[TAG_MAX + 32];
    /* tests/lib/ff1_ref.py: FF1(K1, "tag:order:<block>", radix 2, 20
     * digits) of the offset; the ID is block << 20 | that. */
    static const struct { uint64_t block, offset, id; } v[] = {
        { 2, 0, 2331555 }, { 2, 1, 2522015 }, { 2, 5, 2932742 },
        { 7, 123456, 8029870 },
    };

    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(conceal_find(c, "pay.v2", 6));
    ck_assert_ptr_null(conceal_find(c, "orde", 4));
    ck_assert_ptr_null(conceal_find(NULL, "order", 5));
    ck_assert_uint_eq(conceal_count(c), 2);
    ck_assert_uint_eq(conceal_tweak(t, 2, tweak), 11);
    ck_assert_str_eq(tweak, "tag:order:2");
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        ck_assert_uint_eq(conceal_id(c, t, v[i].block << 20 | v[i].offset), v[i].id);
    /* Another tag, the same counter: another permutation. */
    ck_assert_uint_ne(conceal_id(c, conceal_find(c, "pay.v2", 6), 2 << 20), 2331555);
    conceal_free(c);
}
END_TEST

START_TEST(whole_block)
{
    struct conceal *c = load_order(k1file, 20);
    struct conceal_tag *t = conceal_find(c, "order", 5);
    const uint64_t n = 1 << 20, block = 12345;
    uint64_t *v = malloc(n * sizeof *v);
    uint8_t *seen = calloc(n, 1);
    size_t in_order = 0;

    for (uint64_t i = 0; i < n; i++)
        v[i] = block << 20 | i;
    conceal_ids(c, t, v, n);
    for (uint64_t i = 0; i < n; i++) {
        ck_assert_uint_eq(v[i] >> 20, block);
        ck_assert_msg(!seen[v[i] & (n - 1)], "ID %" PRIu64 " twice", v[i]);
        seen[v[i] & (n - 1)] = 1;
        in_order += i > 0 && v[i] > v[i - 1];
    }
    /* A permutation, and not the identity nor a near one. */
    ck_assert_uint_lt(in_order, n * 6 / 10);
    ck_assert_uint_gt(in_order, n * 4 / 10);
    for (uint64_t i = 0; i < n; i += 997) {
        struct conceal_reveal rv;
        const char *why = NULL;

        ck_assert_int_eq(conceal_reveal(c, t, v[i], &rv, &why), 0);
        ck_assert_int_eq(rv.concealed, 1);
        ck_assert_uint_eq(rv.counter, block << 20 | i);
        ck_assert_uint_eq(rv.block, block);
        ck_assert_uint_eq(rv.offset, i);
        ck_assert_str_eq(rv.key, conceal_key_name(c));
    }
    free(v);
    free(seen);
    conceal_free(c);
}
END_TEST

START_TEST(block_arithmetic)
{
    struct conceal *c = load_order(k1file, 20);
    const int64_t one = 1 << 20;
    int64_t b = -1;

    /* Aligned: [2^21, 3 * 2^20) is block 2. */
    ck_assert_int_eq(conceal_block(c, 3 * one, one, &b), 0);
    ck_assert_int_eq(b, 2);
    /* Not aligned and too short: no whole block. */
    ck_assert_int_eq(conceal_block(c, one + 1, one, &b), -1);
    /* A row at max_id 1 (a new tag): the step that ends on a boundary
     * and holds a whole block. */
    ck_assert_int_eq(conceal_step(c, 1), 2 * one - 1);
    ck_assert_int_eq(conceal_block(c, 1 + 2 * one - 1, 2 * one - 1, &b), 0);
    ck_assert_int_eq(b, 1);
    ck_assert_int_eq(conceal_step(c, 5 * one), one);
    ck_assert_int_eq(conceal_step(c, 5 * one + 7), 2 * one - 7);
    /* A longer range holds the first whole block in it. */
    ck_assert_int_eq(conceal_block(c, 10 * one, 3 * one + 5, &b), 0);
    ck_assert_int_eq(b, 7);
    conceal_free(c);
}
END_TEST

/* A key record row of tag "order" for key name k from block first (of
 * 2^bits: the row holds its first counter). */
static void
record(struct store_row *r, const char *k, int64_t first, int64_t bits)
{
    memset(r, 0, sizeof *r);
    snprintf(r->biz_tag, sizeof r->biz_tag, "order:%s", k);
    r->max_id = first << bits;
    r->step = bits;
    snprintf(r->description, sizeof r->description, "%s", CONCEAL_DESCRIPTION);
}

START_TEST(key_records)
{
    struct conceal *c1 = load_order(k1file, 20), *c2 = load_order(ringfile, 20);
    struct conceal *c2alone = load_order(k2file, 20), *c1b = load_order(k1file, 24);
    struct conceal_tag *t1 = conceal_find(c1, "order", 5);
    struct conceal_tag *t2 = conceal_find(c2, "order", 5);
    struct conceal_tag *t2a = conceal_find(c2alone, "order", 5);
    struct conceal_tag *t1b = conceal_find(c1b, "order", 5);
    char k1[20], k2[20], why[768], name[TAG_MAX + 1];
    struct store_row rows[4];

    snprintf(k1, sizeof k1, "%s", conceal_key_name(c1));
    snprintf(k2, sizeof k2, "%s", conceal_key_name(c2));
    ck_assert_str_ne(k1, k2);
    ck_assert_str_eq(conceal_key_name(c2alone), k2);
    conceal_record_name(c1, t1, name);
    ck_assert_str_eq(name + 6, k1);
    ck_assert_int_eq(strncmp(name, "order:k", 7), 0);

    /* No record: write one. A row with the record's name but another
     * description is not a record. */
    ck_assert_int_eq(conceal_check(c1, t1, NULL, 0, 0, why, sizeof why), CONCEAL_RECORD);
    record(&rows[0], k1, 3, 20);
    ck_assert_int_eq(conceal_row_is_record(&rows[0]), 1);
    snprintf(rows[0].description, sizeof rows[0].description, "by hand");
    ck_assert_int_eq(conceal_row_is_record(&rows[0]), 0);
    ck_assert_int_eq(conceal_check(c1, t1, rows, 1, 0, why, sizeof why), CONCEAL_RECORD);

    /* Its own key: OK. Another key, not in the key file: refused, naming
     * both keys. */
    record(&rows[0], k1, 3, 20);
    ck_assert_int_eq(conceal_check(c1, t1, rows, 1, 0, why, sizeof why), CONCEAL_OK);
    ck_assert_int_eq(conceal_check(c2alone, t2a, rows, 1, 0, why, sizeof why),
                     CONCEAL_REFUSED);
    ck_assert_ptr_nonnull(strstr(why, k1));
    ck_assert_ptr_nonnull(strstr(why, k2));
    ck_assert_ptr_nonnull(strstr(why, "needs the same segment.conceal_key_file"));

    /* Other bits under the same key: refused (a new key changes them). */
    ck_assert_int_eq(conceal_check(c1b, t1b, rows, 1, 0, why, sizeof why), CONCEAL_REFUSED);
    ck_assert_ptr_nonnull(strstr(why, "2^20"));
    ck_assert_ptr_nonnull(strstr(why, "rotate to a new key"));
    {
        /* A rotation may change them: k2 first, k1 retired, bits 24. */
        struct conceal *c24 = load_order(ringfile, 24);

        ck_assert_int_eq(conceal_check(c24, conceal_find(c24, "order", 5), rows, 1,
                                       0, why, sizeof why), CONCEAL_RECORD);
        conceal_free(c24);
    }

    /* A rotation: the key file lists k1 as retired. */
    ck_assert_int_eq(conceal_check(c2, t2, rows, 1, 0, why, sizeof why), CONCEAL_RECORD);
    record(&rows[1], k2, 9, 20);
    ck_assert_int_eq(conceal_check(c2, t2, rows, 2, 0, why, sizeof why), CONCEAL_OK);
    /* The node still on k1 alone: superseded, told to install the key. */
    ck_assert_int_eq(conceal_check(c1, t1, rows, 2, 0, why, sizeof why), CONCEAL_REFUSED);
    ck_assert_ptr_nonnull(strstr(why, "moved from this node's key"));
    ck_assert_ptr_nonnull(strstr(why, "from ID 9437184"));

    /* Intents: k2's without its record makes k1's node wait (pending);
     * with its record it is history. k1's own intent without its record:
     * complete it. */
    {
        struct store_row r3[3];

        memcpy(r3, rows, sizeof rows[0]);
        record(&r3[1], k2, 0, 20);
        snprintf(r3[1].biz_tag, sizeof r3[1].biz_tag, "order:%s:p", k2);
        snprintf(r3[1].description, sizeof r3[1].description, "%s",
                 CONCEAL_INTENT_DESCRIPTION);
        ck_assert_int_eq(conceal_row_is_record(&r3[1]), 1);
        ck_assert_int_eq(conceal_check(c1, t1, r3, 2, 1000, why, sizeof why),
                         CONCEAL_PENDING);
        ck_assert_ptr_nonnull(strstr(why, "another node is recording key"));
        /* Still pending just before CONCEAL_ORPHAN_MS from when it was
         * first seen; an orphan after that: passed over (k1's OK). */
        ck_assert_int_eq(conceal_check(c1, t1, r3, 2, 1000 + CONCEAL_ORPHAN_MS - 1,
                                       why, sizeof why), CONCEAL_PENDING);
        ck_assert_int_eq(conceal_check(c1, t1, r3, 2, 1000 + CONCEAL_ORPHAN_MS,
                                       why, sizeof why), CONCEAL_OK);
        ck_assert_int_eq(conceal_check(c2alone, t2a, r3, 2, 0, why, sizeof why),
                         CONCEAL_RECORD);
        memcpy(&r3[2], &rows[1], sizeof rows[1]);       /* k2's record, done */
        ck_assert_int_eq(conceal_check(c2, t2, r3, 3, 0, why, sizeof why), CONCEAL_OK);
        ck_assert_int_eq(conceal_check(c1, t1, r3, 3, 0, why, sizeof why), CONCEAL_REFUSED);
    }

    /* Back to k1 after k2 (k1's record exists, k1 first in a file that
     * lists k2 as retired): refused, a key is used once. */
    {
        char ring2[128], text[512], *cause = NULL;
        struct conceal *cb;

        snprintf(ring2, sizeof ring2, "%s/bad", dir);
        write_file(ring2, K1_HEX "\n" K2_HEX "\n", 0600);
        snprintf(text, sizeof text, "segment.conceal = order\n"
                 "segment.conceal_key_file = %s\n", ring2);
        cb = load(text, &cause);
        ck_assert_ptr_nonnull(cb);
        ck_assert_int_eq(conceal_check(cb, conceal_find(cb, "order", 5), rows, 2,
                                       0, why, sizeof why), CONCEAL_REFUSED);
        ck_assert_ptr_nonnull(strstr(why, "going back to a key"));
        conceal_free(cb);
    }
    conceal_free(c1);
    conceal_free(c2);
    conceal_free(c2alone);
    conceal_free(c1b);
}
END_TEST

START_TEST(reveal_history)
{
    struct conceal *c2 = load_order(ringfile, 20), *c1 = load_order(k1file, 20);
    struct conceal_tag *t2 = conceal_find(c2, "order", 5);
    struct conceal_tag *t1 = conceal_find(c1, "order", 5);
    struct conceal_reveal rv;
    struct store_row rows[2];
    const char *why = NULL;
    uint64_t id1, id2;

    /* Block 5 under k1 (issued by c1), block 9 under k2 (by c2). */
    record(&rows[0], conceal_key_name(c1), 4, 20);
    record(&rows[1], conceal_key_name(c2), 9, 20);
    id1 = conceal_id(c1, t1, 5 << 20 | 77);
    id2 = conceal_id(c2, t2, 9 << 20 | 78);
    conceal_refresh(c2, rows, 2);
    ck_assert_int_eq(conceal_reveal(c2, t2, id1, &rv, &why), 0);
    ck_assert_uint_eq(rv.counter, 5 << 20 | 77);
    ck_assert_str_eq(rv.key, conceal_key_name(c1));
    ck_assert_int_eq(conceal_reveal(c2, t2, id2, &rv, &why), 0);
    ck_assert_uint_eq(rv.counter, 9 << 20 | 78);
    ck_assert_str_eq(rv.key, conceal_key_name(c2));
    /* Before the first record: issued in plain. */
    ck_assert_int_eq(conceal_reveal(c2, t2, 3 << 20 | 5, &rv, &why), 0);
    ck_assert_int_eq(rv.concealed, 0);
    ck_assert_uint_eq(rv.counter, 3 << 20 | 5);
    /* c1 has no k2: it says so. */
    conceal_refresh(c1, rows, 2);
    ck_assert_int_eq(conceal_reveal(c1, t1, id2, &rv, &why), -1);
    ck_assert_str_eq(rv.key, conceal_key_name(c2));
    ck_assert_ptr_nonnull(why);
    conceal_free(c1);
    conceal_free(c2);
}
END_TEST

START_TEST(reveal_other_bits)
{
    /* k1 in blocks of 2^20 from block 4, then k2 (rotated in with bits 22)
     * from block 3 of 2^22 (counter 12582912): each ID is revealed with the
     * bits and key of its record. */
    struct conceal *c1 = load_order(k1file, 20), *c2 = load_order(ringfile, 22);
    struct conceal_tag *t1 = conceal_find(c1, "order", 5);
    struct conceal_tag *t2 = conceal_find(c2, "order", 5);
    struct conceal_reveal rv;
    struct store_row rows[2];
    const char *why = NULL;
    uint64_t id1 = conceal_id(c1, t1, 5 << 20 | 99), id2 = conceal_id(c2, t2, 3 << 22 | 5);

    record(&rows[0], conceal_key_name(c1), 4, 20);
    record(&rows[1], conceal_key_name(c2), 3, 22);
    conceal_refresh(c2, rows, 2);
    ck_assert_int_eq(conceal_reveal(c2, t2, id1, &rv, &why), 0);
    ck_assert_uint_eq(rv.bits, 20);
    ck_assert_uint_eq(rv.counter, 5 << 20 | 99);
    ck_assert_int_eq(conceal_reveal(c2, t2, id2, &rv, &why), 0);
    ck_assert_uint_eq(rv.bits, 22);
    ck_assert_uint_eq(rv.block, 3);
    ck_assert_uint_eq(rv.counter, 3 << 22 | 5);
    conceal_free(c1);
    conceal_free(c2);
}
END_TEST

static void
load_bad(const char *text, const char *want)
{
    char *cause = NULL;
    struct conceal *c = load(text, &cause);

    ck_assert_msg(c == NULL, "accepted: %s", text);
    ck_assert_ptr_nonnull(cause);
    ck_assert_msg(strstr(cause, want) != NULL, "\"%s\" lacks \"%s\"", cause, want);
    free(cause);
}

START_TEST(config_refusals)
{
    char text[600], bad[128], *cause = NULL;
    char tag[CONCEAL_TAG_MAX + 2];

    /* Nothing concealed: NULL and no cause. */
    ck_assert_ptr_null(load("", &cause));
    ck_assert_ptr_null(cause);
    load_bad("segment.conceal = order\n", "needs segment.conceal_key_file");
    snprintf(text, sizeof text, "segment.conceal_key_file = %s\n", k1file);
    load_bad(text, "segment.conceal names no biz_tag");
    snprintf(text, sizeof text, "segment.conceal = a,b,a\n"
             "segment.conceal_key_file = %s\n", k1file);
    load_bad(text, "a is listed twice");
    snprintf(text, sizeof text, "segment.conceal = or/der\n"
             "segment.conceal_key_file = %s\n", k1file);
    load_bad(text, "is not a biz_tag that can be concealed");
    memset(tag, 'x', sizeof tag - 1);
    tag[sizeof tag - 1] = '\0';
    snprintf(text, sizeof text, "segment.conceal = %s\n"
             "segment.conceal_key_file = %s\n", tag, k1file);
    load_bad(text, "its key record's name adds 20");
    snprintf(bad, sizeof bad, "%s/bad", dir);
    snprintf(text, sizeof text, "segment.conceal = order\n"
             "segment.conceal_key_file = %s\n", bad);
    write_file(bad, K1_HEX "\n", 0644);
    load_bad(text, "chmod 600");
    write_file(bad, K1_HEX "\n" K1_HEX "\n", 0600);
    load_bad(text, "line 2 is also on an earlier line");
    write_file(bad, "not a key\n", 0600);
    load_bad(text, "line 1 is not a key");
    unlink(bad);
    load_bad(text, "cannot open");
    /* bits outside 20..30: the config refuses it. */
    config_free(&cfg);
    config_defaults(&cfg);
    cfg.from_file = 1;
    ck_assert_int_eq(config_load_string(&cfg, "t.conf", "segment.conceal_bits = 19\n",
                                        &cause), -1);
    free(cause);
}
END_TEST

struct thread_arg {
    struct conceal     *c;
    struct conceal_tag *t;
    uint64_t           *out;
};

static void *
encipher_block(void *p)
{
    struct thread_arg *a = p;

    for (uint64_t i = 0; i < 50000; i++)
        a->out[i] = 40 << 20 | i;
    conceal_ids(a->c, a->t, a->out, 50000);
    return NULL;
}

START_TEST(two_threads)
{
    struct conceal *c = load_order(k1file, 20);
    struct thread_arg a[2];
    pthread_t th[2];

    for (int i = 0; i < 2; i++) {
        a[i].c = c;
        a[i].t = conceal_find(c, "order", 5);
        a[i].out = malloc(50000 * sizeof *a[i].out);
        ck_assert_int_eq(pthread_create(&th[i], NULL, encipher_block, &a[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ck_assert_mem_eq(a[0].out, a[1].out, 50000 * sizeof *a[0].out);
    ck_assert_uint_eq(a[0].out[0], conceal_id(c, a[0].t, 40 << 20));
    free(a[0].out);
    free(a[1].out);
    conceal_free(c);
}
END_TEST

static uint64_t rng_state;

static uint64_t
rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#define PROBES 8

/* 400 trials, each with a secret N in {100, 10000}: the competitor takes
 * an ID, N are issued (the probes in between are PROBES - 2 of those, at
 * random), it takes another, from a counter anywhere in the tag's blocks
 * (so a few trials cross a block). The counters become IDs through
 * conceal_ids, what every front end calls on the counters segment_take
 * gives (or stay as they are for a plain tag). Estimators: "N = 10000
 * when the difference d of the two probes has |d| > 5050"; "N = 10000
 * when d < 0 or d > 5050"; and the German-tank estimate of the span from
 * the 8 probes, (max - min) * (1 + 1/(k-1)), against 1,000 (between 100
 * and 10,000 geometrically). Returns each one's accuracy in percent. */
static void
competitor(struct conceal *c, struct conceal_tag *t, double acc[3])
{
    int right[3] = { 0, 0, 0 };
    const int trials = 400;

    rng_state = 0x243f6a8885a308d3ULL;
    for (int i = 0; i < trials; i++) {
        int64_t n = rng() & 1 ? 10000 : 100;
        uint64_t start = (1000 + rng() % 100000) << 20 | (rng() & ((1 << 20) - 1));
        uint64_t p[PROBES], lo = UINT64_MAX, hi = 0;
        int64_t d;
        double span;
        int big = n == 10000;

        p[0] = start;
        p[1] = start + (uint64_t)n + 1;
        for (int k = 2; k < PROBES; k++)
            p[k] = start + 1 + rng() % (uint64_t)n;
        if (t != NULL)
            conceal_ids(c, t, p, PROBES);
        d = (int64_t)p[1] - (int64_t)p[0];
        right[0] += (llabs(d) > 5050) == big;
        right[1] += (d < 0 || d > 5050) == big;
        for (int k = 0; k < PROBES; k++) {
            lo = p[k] < lo ? p[k] : lo;
            hi = p[k] > hi ? p[k] : hi;
        }
        span = (double)(hi - lo) * (1.0 + 1.0 / (PROBES - 1));
        right[2] += (span > 1000.0) == big;
    }
    for (int k = 0; k < 3; k++)
        acc[k] = 100.0 * right[k] / trials;
}

START_TEST(competitors_test)
{
    struct conceal *c = load_order(k1file, 20);
    double plain[3], hidden[3];

    competitor(c, NULL, plain);
    competitor(c, conceal_find(c, "order", 5), hidden);
    printf("the competitor's test, 400 trials, N = 100 or 10,000 between two "
           "probes: difference |d| > 5050: plain %.1f%%, concealed %.1f%%; "
           "d < 0 or d > 5050: plain %.1f%%, concealed %.1f%%; German tank "
           "over %d probes: plain %.1f%%, concealed %.1f%%\n", plain[0],
           hidden[0], plain[1], hidden[1], PROBES, plain[2], hidden[2]);
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(plain[k] == 100.0, "plain estimator %d: %.1f%%", k, plain[k]);
        ck_assert_msg(hidden[k] <= 55.0, "concealed estimator %d: %.1f%%", k,
                      hidden[k]);
    }
    conceal_free(c);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("conceal");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, construction);
    tcase_add_test(tc, whole_block);
    tcase_add_test(tc, block_arithmetic);
    tcase_add_test(tc, key_records);
    tcase_add_test(tc, reveal_history);
    tcase_add_test(tc, reveal_other_bits);
    tcase_add_test(tc, config_refusals);
    tcase_add_test(tc, two_threads);
    tcase_add_test(tc, competitors_test);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
