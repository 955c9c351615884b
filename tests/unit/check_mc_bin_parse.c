/* check_mc_bin_parse.c: the memcached binary protocol frame parser: each
 * served opcode's frame (key as token 1, whole frame consumed), quiet and
 * key-carrying gets, refused and unknown opcodes (header consumed, body to
 * skip), frames split at every byte, every length check (the status to
 * answer with, or none after a bad magic byte), and the response header. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "mc_bin_parse.h"

static const struct mc_limits lim = { 128, 4, 1024 };

/* A request frame into out; its length. */
static size_t
req(unsigned char *out, uint8_t op, const char *key, size_t extlen,
    size_t vlen, uint32_t opaque)
{
    size_t klen = strlen(key), body = extlen + klen + vlen;

    memset(out, 0, 24 + body);
    out[0] = 0x80;
    out[1] = op;
    out[2] = (unsigned char)(klen >> 8);
    out[3] = (unsigned char)klen;
    out[4] = (unsigned char)extlen;
    out[8] = (unsigned char)(body >> 24);
    out[9] = (unsigned char)(body >> 16);
    out[10] = (unsigned char)(body >> 8);
    out[11] = (unsigned char)body;
    out[12] = (unsigned char)(opaque >> 24);
    out[13] = (unsigned char)(opaque >> 16);
    out[14] = (unsigned char)(opaque >> 8);
    out[15] = (unsigned char)opaque;
    memcpy(out + 24 + extlen, key, klen);
    memset(out + 24 + extlen + klen, 'v', vlen);
    return 24 + body;
}

static enum mc_parse_result
parse(const unsigned char *b, size_t n, struct mc_cmd *cmd, size_t *used,
      uint16_t *st, const char **err)
{
    return mc_bin_parse((const char *)b, n, &lim, cmd, used, st, err);
}

START_TEST(gets)
{
    static const struct { uint8_t op; unsigned char quiet, with_key; } g[] = {
        { 0x00, 0, 0 }, { 0x09, 1, 0 }, { 0x0c, 0, 1 }, { 0x0d, 1, 1 },
    };
    unsigned char b[600];
    struct mc_cmd cmd;
    size_t n, used;
    uint16_t st;
    const char *err;

    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        n = req(b, g[i].op, "@snowflake", 0, 0, 0x01020304u);
        ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_OK);
        ck_assert_int_eq(cmd.kind, MC_GET);
        ck_assert_int_eq(cmd.binary, 1);
        ck_assert_int_eq(cmd.opcode, g[i].op);
        ck_assert_int_eq(cmd.quiet, g[i].quiet);
        ck_assert_int_eq(cmd.with_key, g[i].with_key);
        ck_assert_uint_eq(cmd.opaque, 0x01020304u);
        ck_assert_uint_eq(cmd.nkeys, 1);
        ck_assert_uint_eq(cmd.ntok, 2);
        ck_assert_uint_eq(cmd.off[1], 24);
        ck_assert_uint_eq(cmd.len[1], 10);
        ck_assert(memcmp(b + cmd.off[1], "@snowflake", 10) == 0);
        ck_assert_uint_eq(used, n);
        ck_assert_uint_eq(cmd.data_len, 0);
        ck_assert_ptr_nonnull(cmd.name);
        /* Every proper prefix needs more; so a frame split anywhere waits. */
        for (size_t k = 0; k < n; k++)
            ck_assert_int_eq(parse(b, k, &cmd, &used, &st, &err), MC_PARSE_MORE);
    }
    /* Two frames back to back: the first one's bytes only. */
    n = req(b, 0x0d, "a", 0, 0, 1);
    n += req(b + n, 0x0a, "", 0, 0, 2);
    ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_OK);
    ck_assert_uint_eq(used, 25);
    ck_assert_int_eq(parse(b + used, n - used, &cmd, &used, &st, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_NOOP);
    ck_assert_uint_eq(cmd.opaque, 2);
    /* A key of 250 bytes (memcached's limit), any bytes. */
    {
        char key[251];

        memset(key, 0x01, 250);
        key[250] = '\0';
        n = req(b, 0x00, key, 0, 0, 0);
        ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_OK);
        ck_assert_uint_eq(cmd.len[1], 250);
    }
}
END_TEST

START_TEST(others)
{
    unsigned char b[600];
    struct mc_cmd cmd;
    size_t n, used;
    uint16_t st;
    const char *err;

    n = req(b, 0x0b, "", 0, 0, 9);
    ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_VERSION);
    ck_assert_uint_eq(cmd.ntok, 1);
    ck_assert_uint_eq(used, 24);
    n = req(b, 0x07, "", 0, 0, 9);
    ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_QUIT);
    ck_assert_int_eq(cmd.quiet, 0);
    n = req(b, 0x17, "", 0, 0, 9);
    ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_QUIT);
    ck_assert_int_eq(cmd.quiet, 1);
    n = req(b, 0x10, "", 0, 0, 9);
    ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_STATS);
    ck_assert_uint_eq(cmd.ntok, 1);
    n = req(b, 0x10, "settings", 0, 0, 9);
    ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_OK);
    ck_assert_uint_eq(cmd.ntok, 2);
    ck_assert(memcmp(b + cmd.off[1], "settings", 8) == 0);
    ck_assert_uint_eq(used, n);
    /* Refused: the header only; the body (extras, key, value) to skip,
     * whether it has come or not. */
    n = req(b, 0x01, "k", 8, 100, 7);
    ck_assert_int_eq(parse(b, 24, &cmd, &used, &st, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_REFUSED);
    ck_assert_str_eq(cmd.name, "set");
    ck_assert_uint_eq(used, 24);
    ck_assert_uint_eq(cmd.data_len, 109);
    ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_OK);
    ck_assert_uint_eq(used, 24);
    /* Every storage opcode and quiet form is refused, never served. */
    {
        static const uint8_t refused[] = {
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x08, 0x0e, 0x0f, 0x11, 0x12,
            0x13, 0x14, 0x15, 0x16, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e,
            0x23, 0x24 };

        for (size_t i = 0; i < sizeof refused; i++) {
            n = req(b, refused[i], "k", 4, 3, 0);
            ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_OK);
            ck_assert_msg(cmd.kind == MC_REFUSED, "opcode 0x%02x", refused[i]);
            ck_assert_ptr_nonnull(cmd.name);
            ck_assert_uint_eq(cmd.data_len, 8);
        }
    }
    /* Unknown (SASL, range operations, anything else): answered, skipped. */
    n = req(b, 0x21, "PLAIN", 0, 20, 0);
    ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_UNKNOWN);
    ck_assert_ptr_null(cmd.name);
    ck_assert_uint_eq(cmd.data_len, 25);
    n = req(b, 0xff, "", 0, 0, 0);
    ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_UNKNOWN);
}
END_TEST

START_TEST(bad_frames)
{
    unsigned char b[600];
    struct mc_cmd cmd;
    size_t n, used;
    uint16_t st;
    const char *err;
    char key[252];

    /* A bad magic byte: close with no answer, from the first byte on. */
    b[0] = 0x81;
    ck_assert_int_eq(parse(b, 1, &cmd, &used, &st, &err), MC_PARSE_ERROR);
    ck_assert_uint_eq(st, 0);
    ck_assert_ptr_nonnull(err);
    memcpy(b, "get demo\r\n", 10);
    ck_assert_int_eq(parse(b, 10, &cmd, &used, &st, &err), MC_PARSE_ERROR);
    ck_assert_uint_eq(st, 0);
    ck_assert_int_eq(parse(b, 0, &cmd, &used, &st, &err), MC_PARSE_MORE);
    /* A key over 250 bytes. */
    memset(key, 'k', 251);
    key[251] = '\0';
    req(b, 0x00, key, 0, 0, 5);
    ck_assert_int_eq(parse(b, 24, &cmd, &used, &st, &err), MC_PARSE_ERROR);
    ck_assert_uint_eq(st, MC_BIN_EINVAL);
    ck_assert_uint_eq(cmd.opaque, 5);       /* for the answer */
    ck_assert_int_eq(cmd.opcode, 0x00);
    /* Extras and key over the body. */
    n = req(b, 0x01, "key", 8, 0, 0);
    b[11] = 10;                             /* body 10 < 8 + 3 */
    ck_assert_int_eq(parse(b, n, &cmd, &used, &st, &err), MC_PARSE_ERROR);
    ck_assert_uint_eq(st, MC_BIN_EINVAL);
    /* A value over max_data (1024 here): too large, answered and closed,
     * even for a refused opcode (no body is skipped without bound); one of
     * exactly max_data is skipped. */
    req(b, 0x01, "k", 8, 0, 0);
    b[10] = 0x04;
    b[11] = 9;                              /* 1024 + 9 */
    ck_assert_int_eq(parse(b, 24, &cmd, &used, &st, &err), MC_PARSE_OK);
    ck_assert_uint_eq(cmd.data_len, 1033);
    b[11] = 10;
    ck_assert_int_eq(parse(b, 24, &cmd, &used, &st, &err), MC_PARSE_ERROR);
    ck_assert_uint_eq(st, MC_BIN_E2BIG);
    b[8] = b[9] = b[10] = b[11] = 0xff;     /* 4 GiB */
    ck_assert_int_eq(parse(b, 24, &cmd, &used, &st, &err), MC_PARSE_ERROR);
    ck_assert_uint_eq(st, MC_BIN_E2BIG);
    /* The shapes of served opcodes. */
    {
        static const struct { uint8_t op; const char *key; size_t ext, val; } bad[] = {
            { 0x00, "", 0, 0 },             /* get without a key */
            { 0x00, "k", 4, 0 },            /* with extras */
            { 0x0d, "k", 0, 1 },            /* with a value */
            { 0x0a, "", 0, 1 },             /* noop with a body */
            { 0x0b, "k", 0, 0 },            /* version with a key */
            { 0x07, "", 1, 0 },             /* quit with extras */
            { 0x10, "", 1, 0 },             /* stat with extras */
            { 0x10, "k", 0, 2 },            /* stat with a value */
        };

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            n = req(b, bad[i].op, bad[i].key, bad[i].ext, bad[i].val, 3);
            ck_assert_msg(parse(b, n, &cmd, &used, &st, &err) == MC_PARSE_ERROR,
                          "case %zu accepted", i);
            ck_assert_uint_eq(st, MC_BIN_EINVAL);
            ck_assert_uint_eq(cmd.opaque, 3);
            ck_assert_ptr_nonnull(err);
        }
    }
}
END_TEST

START_TEST(response_header)
{
    unsigned char h[24];
    static const unsigned char want[24] = {
        0x81, 0x0c, 0x00, 0x04, 0x04, 0x00, 0x00, 0x86, 0x00, 0x00, 0x01, 0x02,
        0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08 };

    mc_bin_header(h, 0x0c, 0xdeadbeefu, MC_BIN_ETMPFAIL, 4, 4, 0x102,
                  0x0102030405060708ull);
    ck_assert(memcmp(h, want, 24) == 0);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("mc_bin_parse");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, gets);
    tcase_add_test(tc, others);
    tcase_add_test(tc, bad_frames);
    tcase_add_test(tc, response_header);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
