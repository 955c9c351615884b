/* check_idstr.c: IDs as strings (idstr.c): the alphabets' order, round
 * trips over edge and random values, string order against numeric order,
 * every refusal; the prefixes of the config (segment.prefix.*,
 * snowflake.prefix) and decode.c's reading of them; snowflake.layout = js53
 * in the config. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "decode.h"
#include "idstr.h"
#include "sfcodec.h"
#include "util.h"

#define MAXID ((uint64_t)INT64_MAX)
#define JS_MAX ((UINT64_C(1) << 53) - 1)     /* Number.MAX_SAFE_INTEGER */

static const enum idstr_enc encs[] = { IDSTR_BASE62, IDSTR_BASE32 };

/* xorshift64*: a fixed seed, so a failure repeats. */
static uint64_t
rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

/* A random ID of a random magnitude (1 to 63 bits), so that small IDs
 * (segment mode's) are as common as large ones. */
static uint64_t
rnd_id(uint64_t *s)
{
    unsigned bits = 1 + (unsigned)(rnd(s) % 63);

    return rnd(s) >> (64 - bits);
}

static size_t
enc_str(enum idstr_enc e, const char *prefix, uint64_t id, char *out)
{
    size_t n = idstr_encode(e, prefix, prefix ? strlen(prefix) : 0, id, out);

    out[n] = '\0';
    return n;
}

static uint64_t
dec_ok(const char *s, enum idstr_enc want)
{
    struct idstr_parsed p;
    enum idstr_result r = idstr_decode(s, strlen(s), want, &p);

    ck_assert_msg(r == IDSTR_OK, "\"%s\": %s", s, idstr_result_text(r));
    return p.id;
}

static enum idstr_result
dec_err(const char *s, enum idstr_enc want)
{
    struct idstr_parsed p;

    return idstr_decode(s, strlen(s), want, &p);
}

START_TEST(alphabets_in_ascii_order)
{
    char a[16], b[16];

    /* Each digit value's character is above the one before it: the
     * alphabets are 0-9A-Za-z and 0-9A-HJKMNP-TV-Z, in ASCII order. */
    for (int e = 0; e < 2; e++) {
        unsigned base = encs[e] == IDSTR_BASE62 ? 62 : 32;

        for (uint64_t v = 1; v < base; v++) {
            size_t n = enc_str(encs[e], NULL, v, b);

            enc_str(encs[e], NULL, v - 1, a);
            ck_assert_msg((unsigned char)a[n - 1] < (unsigned char)b[n - 1],
                          "%s: digit %" PRIu64 " '%c' not above '%c'",
                          idstr_enc_name(encs[e]), v, b[n - 1], a[n - 1]);
        }
    }
    enc_str(IDSTR_BASE62, NULL, 61, a);
    ck_assert_str_eq(a, "0000000000z");
    enc_str(IDSTR_BASE32, NULL, 31, a);
    ck_assert_str_eq(a, "000000000000Z");
    enc_str(IDSTR_BASE32, NULL, 18, a);         /* I and L are skipped */
    ck_assert_str_eq(a, "000000000000J");
}
END_TEST

START_TEST(edge_values)
{
    static const struct { uint64_t id; const char *b62, *b32; } v[] = {
        { 0, "00000000000", "0000000000000" },
        { 1, "00000000001", "0000000000001" },
        { 62, "00000000010", "000000000001Y" },
        { JS_MAX, "00fFgnDxSe7", "007ZZZZZZZZZZ" },
        { JS_MAX + 1, "00fFgnDxSe8", "0080000000000" },
        { MAXID, "AzL8n0Y58m7", "7ZZZZZZZZZZZZ" },
    };
    char s[IDSTR_TEXT_MAX + 1];

    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ck_assert_uint_eq(enc_str(IDSTR_BASE62, NULL, v[i].id, s), IDSTR_B62_LEN);
        ck_assert_str_eq(s, v[i].b62);
        ck_assert_uint_eq(dec_ok(s, IDSTR_DEC), v[i].id);
        ck_assert_uint_eq(dec_ok(s, IDSTR_BASE62), v[i].id);
        ck_assert_uint_eq(enc_str(IDSTR_BASE32, NULL, v[i].id, s), IDSTR_B32_LEN);
        ck_assert_str_eq(s, v[i].b32);
        ck_assert_uint_eq(dec_ok(s, IDSTR_DEC), v[i].id);
        ck_assert_uint_eq(dec_ok(s, IDSTR_BASE32), v[i].id);
        enc_str(IDSTR_BASE62, "ord", v[i].id, s);
        ck_assert_uint_eq(dec_ok(s, IDSTR_DEC), v[i].id);
        ck_assert_int_eq(strncmp(s, "ord_", 4), 0);
    }
}
END_TEST

START_TEST(random_round_trips)
{
    static const char *const prefixes[] = { NULL, "ord", "a", "user_account",
        "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk" };
    char s[IDSTR_TEXT_MAX + 1];
    uint64_t seed = UINT64_C(0x9e3779b97f4a7c15);

    ck_assert_uint_eq(strlen(prefixes[4]), IDSTR_PREFIX_MAX);
    for (int i = 0; i < 1000000; i++) {
        uint64_t id = rnd_id(&seed);
        enum idstr_enc e = encs[i & 1];
        const char *pf = prefixes[(i >> 1) % 5];
        struct idstr_parsed p;
        size_t n = enc_str(e, pf, id, s);

        /* plain ifs: check writes to a pipe on every ck_assert */
        if (idstr_decode(s, n, IDSTR_DEC, &p) != IDSTR_OK || p.id != id ||
            p.enc != e || (pf == NULL ? p.prefix != NULL :
                           p.prefix_len != strlen(pf) ||
                           memcmp(p.prefix, pf, p.prefix_len) != 0))
            ck_abort_msg("%" PRIu64 " as \"%s\" read back as %" PRIu64, id, s, p.id);
    }
}
END_TEST

/* Random pairs: memcmp of the strings orders them as the numbers. Half
 * the pairs are close (the neighbours sort decides on the last digits). */
START_TEST(string_order_is_numeric_order)
{
    char a[IDSTR_TEXT_MAX + 1], b[IDSTR_TEXT_MAX + 1];
    uint64_t seed = 42;
    long checked = 0;

    for (int i = 0; i < 1000000; i++) {
        uint64_t x = rnd_id(&seed), y;
        enum idstr_enc e = encs[i & 1];
        const char *pf = i & 2 ? "ord" : NULL;
        size_t na, nb;
        int c;

        y = i & 4 ? rnd_id(&seed) : x + (rnd(&seed) % 100);
        if (y > MAXID)
            y = MAXID;
        na = enc_str(e, pf, x, a);
        nb = enc_str(e, pf, y, b);
        c = memcmp(a, b, na);
        if (na != nb || (c < 0) != (x < y) || (c == 0) != (x == y))   /* fixed width */
            ck_abort_msg("%" PRIu64 " %s vs %" PRIu64 " %s", x, a, y, b);
        checked++;
    }
    ck_assert_int_eq(checked, 1000000);
}
END_TEST

START_TEST(crockford_reading)
{
    /* any case; I, L read as 1, O as 0 */
    ck_assert_uint_eq(dec_ok("000000000000i", IDSTR_DEC), 1);
    ck_assert_uint_eq(dec_ok("000000000000I", IDSTR_DEC), 1);
    ck_assert_uint_eq(dec_ok("000000000000l", IDSTR_DEC), 1);
    ck_assert_uint_eq(dec_ok("000000000000L", IDSTR_DEC), 1);
    ck_assert_uint_eq(dec_ok("oooooooooooo0", IDSTR_DEC), 0);
    ck_assert_uint_eq(dec_ok("7zzzzzzzzzzzz", IDSTR_DEC), MAXID);
    ck_assert_uint_eq(dec_ok("ord_7zzzzzzzzzzzz", IDSTR_BASE32), MAXID);
    /* base62 is case-sensitive: a and A differ */
    ck_assert_uint_eq(dec_ok("0000000000a", IDSTR_DEC), 36);
    ck_assert_uint_eq(dec_ok("0000000000A", IDSTR_DEC), 10);
}
END_TEST

START_TEST(refusals)
{
    char p64[80];

    /* lengths */
    ck_assert_int_eq(dec_err("", IDSTR_DEC), IDSTR_BAD_LENGTH);
    ck_assert_int_eq(dec_err("0000000000", IDSTR_DEC), IDSTR_BAD_LENGTH);
    ck_assert_int_eq(dec_err("000000000000", IDSTR_DEC), IDSTR_BAD_LENGTH);
    ck_assert_int_eq(dec_err("00000000000000", IDSTR_DEC), IDSTR_BAD_LENGTH);
    ck_assert_int_eq(dec_err("ord_", IDSTR_DEC), IDSTR_BAD_LENGTH);
    ck_assert_int_eq(dec_err("0000000000000", IDSTR_BASE62), IDSTR_BAD_LENGTH);
    ck_assert_int_eq(dec_err("00000000000", IDSTR_BASE32), IDSTR_BAD_LENGTH);
    /* characters */
    ck_assert_int_eq(dec_err("0000000000-", IDSTR_DEC), IDSTR_BAD_CHAR);
    ck_assert_int_eq(dec_err("0000000000 ", IDSTR_DEC), IDSTR_BAD_CHAR);
    ck_assert_int_eq(dec_err("000000-000000", IDSTR_DEC), IDSTR_BAD_CHAR); /* no hyphens */
    ck_assert_int_eq(dec_err("000000000000U", IDSTR_DEC), IDSTR_BAD_CHAR);
    ck_assert_int_eq(dec_err("000000000000u", IDSTR_DEC), IDSTR_BAD_CHAR);
    ck_assert_int_eq(dec_err("00000000000\xc3\xa9", IDSTR_DEC), IDSTR_BAD_CHAR);
    {
        struct idstr_parsed p;

        ck_assert_int_eq(idstr_decode("0000000000\0000", 13, IDSTR_DEC, &p),
                         IDSTR_BAD_CHAR);
    }
    /* overflow past 2^63-1 */
    ck_assert_int_eq(dec_err("AzL8n0Y58m8", IDSTR_DEC), IDSTR_OVERFLOW);
    ck_assert_int_eq(dec_err("zzzzzzzzzzz", IDSTR_DEC), IDSTR_OVERFLOW);
    ck_assert_int_eq(dec_err("8000000000000", IDSTR_DEC), IDSTR_OVERFLOW);
    ck_assert_int_eq(dec_err("ZZZZZZZZZZZZZ", IDSTR_DEC), IDSTR_OVERFLOW);
    /* prefixes */
    ck_assert_int_eq(dec_err("Ord_00000000001", IDSTR_DEC), IDSTR_BAD_PREFIX);
    ck_assert_int_eq(dec_err("_00000000001", IDSTR_DEC), IDSTR_BAD_PREFIX);
    ck_assert_int_eq(dec_err("ord__00000000001", IDSTR_DEC), IDSTR_BAD_PREFIX);
    ck_assert_int_eq(dec_err("1rd_00000000001", IDSTR_DEC), IDSTR_BAD_PREFIX);
    ck_assert_int_eq(dec_err("or-d_00000000001", IDSTR_DEC), IDSTR_BAD_PREFIX);
    ck_assert_uint_eq(dec_ok("o_r_d_00000000001", IDSTR_DEC), 1);
    memset(p64, 'a', 64);
    memcpy(p64 + 64, "_00000000001", 13);
    ck_assert_int_eq(dec_err(p64, IDSTR_DEC), IDSTR_BAD_PREFIX);
    ck_assert_uint_eq(dec_ok(p64 + 1, IDSTR_DEC), 1);      /* 63: the most */
    for (int r = IDSTR_OK; r <= IDSTR_BAD_PREFIX; r++)
        ck_assert_ptr_nonnull(idstr_result_text((enum idstr_result)r));
}
END_TEST

START_TEST(encoding_names)
{
    enum idstr_enc e;

    ck_assert_int_eq(idstr_enc_parse("base62", 6, &e), 0);
    ck_assert_int_eq(e, IDSTR_BASE62);
    ck_assert_int_eq(idstr_enc_parse("base32", 6, &e), 0);
    ck_assert_int_eq(e, IDSTR_BASE32);
    ck_assert_int_eq(idstr_enc_parse("dec", 3, &e), 0);
    ck_assert_int_eq(e, IDSTR_DEC);
    ck_assert_int_eq(idstr_enc_parse("BASE62", 6, &e), -1);
    ck_assert_int_eq(idstr_enc_parse("base6", 5, &e), -1);
    ck_assert_int_eq(idstr_enc_parse("", 0, &e), -1);
    ck_assert(idstr_prefix_valid("ord", 3));
    ck_assert(!idstr_prefix_valid("ord_", 4));
    ck_assert(!idstr_prefix_valid("", 0));
}
END_TEST

/* ---- the config's prefixes and decode.c ---- */

static int
load(struct config *c, const char *text, char **cause)
{
    config_defaults(c);
    *cause = NULL;
    if (config_load_string(c, "t.conf", text, cause) == -1)
        return -1;
    c->from_file = 1;
    return config_validate(c, cause);
}

static void
load_bad(const char *text, const char *want)
{
    struct config c;
    char *cause = NULL;

    ck_assert_int_eq(load(&c, text, &cause), -1);
    ck_assert_msg(strstr(cause, want) != NULL, "\"%s\" not in \"%s\"", want, cause);
    free(cause);
    config_free(&c);
}

START_TEST(config_prefixes)
{
    struct config c;
    char *cause = NULL, why[256];
    const char *code;
    struct decode_idstr d;

    ck_assert_msg(load(&c, "leaf.segment.enable = true\n"
                       "segment.prefix.ord = orders\n"
                       "segment.prefix.usr = user:accounts.v2\n"
                       "snowflake.prefix = evt\n", &cause) == 0, "%s", cause);
    ck_assert_str_eq(decode_prefix_of(&c, "orders"), "ord");
    ck_assert_str_eq(decode_prefix_of(&c, "user:accounts.v2"), "usr");
    ck_assert_str_eq(decode_prefix_of(&c, "other"), "");
    ck_assert_str_eq(decode_prefix_of(&c, NULL), "evt");
    /* segment: the prefix names the tag */
    ck_assert_int_eq(decode_id_string(&c, DECODE_SEGMENT, "usr_0000000000A", 15,
                                      IDSTR_DEC, &d, &code, why, sizeof why), 0);
    ck_assert_str_eq(d.tag, "user:accounts.v2");
    ck_assert_uint_eq(d.p.id, 10);
    ck_assert_int_eq(decode_id_string(&c, DECODE_SEGMENT, "0000000000A", 11,
                                      IDSTR_DEC, &d, &code, why, sizeof why), 0);
    ck_assert_ptr_null(d.tag);
    ck_assert_int_eq(decode_id_string(&c, DECODE_SEGMENT, "evt_0000000000A", 15,
                                      IDSTR_DEC, &d, &code, why, sizeof why), 400);
    ck_assert_str_eq(code, "unknown_prefix");
    ck_assert_int_eq(decode_id_string(&c, DECODE_SNOWFLAKE, "ord_0000000000A", 15,
                                      IDSTR_DEC, &d, &code, why, sizeof why), 400);
    ck_assert_str_eq(code, "unknown_prefix");
    ck_assert_int_eq(decode_id_string(&c, DECODE_SNOWFLAKE, "evt_0000000000A", 15,
                                      IDSTR_DEC, &d, &code, why, sizeof why), 0);
    ck_assert_int_eq(d.kind, DECODE_SNOWFLAKE);
    /* both kinds (LEAF.DECODE): the prefix tells */
    ck_assert_int_eq(decode_id_string(&c, DECODE_SEGMENT | DECODE_SNOWFLAKE,
                                      "ord_0000000000A", 15, IDSTR_DEC, &d,
                                      &code, why, sizeof why), 0);
    ck_assert_int_eq(d.kind, DECODE_SEGMENT);
    ck_assert_int_eq(decode_id_string(&c, DECODE_SNOWFLAKE, "evt_000000000A", 14,
                                      IDSTR_DEC, &d, &code, why, sizeof why), 400);
    ck_assert_str_eq(code, "invalid_id");
    config_free(&c);

    load_bad("segment.prefix.Ord = orders\n", "a prefix is");
    load_bad("segment.prefix.ord_ = orders\n", "a prefix is");
    load_bad("segment.prefix.ord = bad tag\n", "is not a biz_tag");
    load_bad("segment.prefix.ord = a\nsegment.prefix.ord = b\n", "one tag per prefix");
    load_bad("segment.prefix.a = t\nsegment.prefix.b = t\n", "one prefix per tag");
    load_bad("snowflake.prefix = 9x\n", "snowflake.prefix: a prefix is");
    load_bad("segment.prefix.evt = t\nsnowflake.prefix = evt\n",
             "a prefix names one kind of ID");
}
END_TEST

START_TEST(config_js53)
{
    struct config c;
    char *cause = NULL;
    struct sfcodec_layout l;

    ck_assert_msg(load(&c, "leaf.snowflake.enable = true\n"
                       "snowflake.layout = js53\n", &cause) == 0, "%s", cause);
    ck_assert_int_eq(c.timestamp_bits, 41);
    ck_assert_int_eq(c.datacenter_bits, 0);
    ck_assert_int_eq(c.worker_bits, 5);
    ck_assert_int_eq(c.sequence_bits, 7);
    ck_assert_int_eq(sfcodec_layout_init(&l, c.epoch_ms, 41, 0, 5, 7, -1, 0, &cause), 0);
    ck_assert_uint_eq(l.max_id, JS_MAX);
    /* the largest ID the layout can pack is Number.MAX_SAFE_INTEGER */
    ck_assert_uint_eq(sfcodec_pack(&l, l.epoch_ms + (int64_t)l.max_timestamp, 0,
                                   l.max_worker, l.max_sequence), JS_MAX);
    {
        struct sfcodec_decoded d;

        ck_assert_int_eq(sfcodec_decode_id(&l, JS_MAX, &d), 0);
        ck_assert_int_eq(sfcodec_decode_id(&l, JS_MAX + 1, &d), -1);
    }
    config_free(&c);
    load_bad("snowflake.layout = js53\nsnowflake.worker_bits = 6\n",
             "remove the snowflake.*_bits keys");
    load_bad("snowflake.layout = js54\n", "not one of the allowed values");
    load_bad("snowflake.worker_bits = 9\n", "must be 63 (or 53");
}
END_TEST

static Suite *
idstr_suite(void)
{
    Suite *s = suite_create("idstr");
    TCase *tc = tcase_create("idstr");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, alphabets_in_ascii_order);
    tcase_add_test(tc, edge_values);
    tcase_add_test(tc, random_round_trips);
    tcase_add_test(tc, string_order_is_numeric_order);
    tcase_add_test(tc, crockford_reading);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, encoding_names);
    tcase_add_test(tc, config_prefixes);
    tcase_add_test(tc, config_js53);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(idstr_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
