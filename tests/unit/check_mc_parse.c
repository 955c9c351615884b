/* check_mc_parse.c: the memcached text protocol parser: get/gets with many
 * keys, "\n" and "\r\n" line ends, lines split at every byte, storage
 * commands and the data block to skip, and every limit and malformed form
 * (answered and kept in step, or refused and closed). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "mc_parse.h"

static const struct mc_limits lim = { 128, 4, 1024 };

static enum mc_parse_result
parse(const char *s, struct mc_cmd *cmd, size_t *used, const char **err)
{
    return mc_parse(s, strlen(s), &lim, cmd, used, err);
}

static int
tok(const char *line, const struct mc_cmd *cmd, size_t i, const char *want)
{
    return cmd->len[i] == strlen(want) &&
           memcmp(line + cmd->off[i], want, cmd->len[i]) == 0;
}

START_TEST(get_keys)
{
    const char *s = "gets  a  @snowflake b\r\nget x\nversion\r\n";
    struct mc_cmd cmd;
    size_t used, pos;
    const char *err;

    ck_assert_int_eq(parse(s, &cmd, &used, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_GET);
    ck_assert_int_eq(cmd.cas, 1);
    ck_assert_uint_eq(cmd.nkeys, 3);
    ck_assert(tok(s, &cmd, 1, "a") && tok(s, &cmd, 2, "@snowflake") &&
              tok(s, &cmd, 3, "b"));
    ck_assert_uint_eq(used, 23);
    pos = used;
    ck_assert_int_eq(parse(s + pos, &cmd, &used, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_GET);
    ck_assert_int_eq(cmd.cas, 0);
    ck_assert_uint_eq(cmd.nkeys, 1);
    ck_assert(tok(s + pos, &cmd, 1, "x"));
    ck_assert_uint_eq(used, 6);
    pos += used;
    ck_assert_int_eq(parse(s + pos, &cmd, &used, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_VERSION);
    ck_assert_uint_eq(pos + used, strlen(s));
    /* Every proper prefix of a line needs more. */
    for (size_t k = 0; k < 23; k++)
        ck_assert_int_eq(mc_parse(s, k, &lim, &cmd, &used, &err), MC_PARSE_MORE);
    /* A key named noreply is a key. */
    ck_assert_int_eq(parse("get noreply\r\n", &cmd, &used, &err), MC_PARSE_OK);
    ck_assert_uint_eq(cmd.nkeys, 1);
    ck_assert_int_eq(cmd.noreply, 0);
}
END_TEST

START_TEST(commands)
{
    static const struct { const char *line; enum mc_kind kind; } cases[] = {
        { "stats\r\n", MC_STATS }, { "stats settings\r\n", MC_STATS },
        { "quit\r\n", MC_QUIT }, { "verbosity 1\r\n", MC_VERBOSITY },
        { "flush_all\r\n", MC_FLUSH_ALL }, { "incr a 1\r\n", MC_REFUSED },
        { "decr a 1\r\n", MC_REFUSED }, { "touch a 10\r\n", MC_REFUSED },
        { "delete a\r\n", MC_REFUSED }, { "mg a v\r\n", MC_REFUSED },
        { "\r\n", MC_UNKNOWN }, { "GET a\r\n", MC_GET },
        { "bogus 1 2\r\n", MC_UNKNOWN }, { "   \n", MC_UNKNOWN },
    };
    struct mc_cmd cmd;
    size_t used;
    const char *err;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(parse(cases[i].line, &cmd, &used, &err), MC_PARSE_OK);
        ck_assert_msg(cmd.kind == cases[i].kind, "case %zu: kind %d", i, cmd.kind);
        ck_assert_uint_eq(used, strlen(cases[i].line));
        ck_assert_uint_eq(cmd.data_len, 0);
    }
    ck_assert_int_eq(parse("flush_all noreply\r\n", &cmd, &used, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.noreply, 1);
}
END_TEST

START_TEST(storage)
{
    const char *s = "set k 0 0 5\r\nhello\r\ncas k 1 2 3 99 noreply\r\nabc\r\n";
    struct mc_cmd cmd;
    size_t used, pos;
    const char *err;

    ck_assert_int_eq(parse(s, &cmd, &used, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_STORE);
    ck_assert_uint_eq(used, 13);
    ck_assert_uint_eq(cmd.data_len, 7);
    ck_assert_int_eq(cmd.noreply, 0);
    pos = used + (size_t)cmd.data_len;
    ck_assert_int_eq(parse(s + pos, &cmd, &used, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_STORE);
    ck_assert_uint_eq(cmd.data_len, 5);
    ck_assert_int_eq(cmd.noreply, 1);
    ck_assert_uint_eq(pos + used + cmd.data_len, strlen(s));
    ck_assert_int_eq(parse("ms k 2 T0\r\nab\r\n", &cmd, &used, &err), MC_PARSE_OK);
    ck_assert_int_eq(cmd.kind, MC_STORE);
    ck_assert_uint_eq(cmd.data_len, 4);
    ck_assert_int_eq(parse("set k 0 0 1024\r\n", &cmd, &used, &err), MC_PARSE_OK);
    ck_assert_uint_eq(cmd.data_len, 1026);
}
END_TEST

START_TEST(answered_errors)
{
    static const char *lines[] = {
        "get\r\n", "gets \r\n", "get a b c d e\r\n", "get a\tb\r\n",
    };
    struct mc_cmd cmd;
    size_t used;
    const char *err;
    char line[400];

    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        ck_assert_int_eq(parse(lines[i], &cmd, &used, &err), MC_PARSE_OK);
        ck_assert_msg(cmd.kind == MC_BAD, "case %zu: kind %d", i, cmd.kind);
        ck_assert_ptr_nonnull(cmd.err);
        ck_assert_uint_eq(used, strlen(lines[i]));
    }
    /* A 251-byte key: refused; 250 bytes is memcached's limit (a longer
     * line limit than the suite's, so it fits). */
    {
        static const struct mc_limits wide = { 1024, 4, 1024 };

        memcpy(line, "get ", 4);
        memset(line + 4, 'k', 251);
        memcpy(line + 255, "\r\n", 3);
        ck_assert_int_eq(mc_parse(line, strlen(line), &wide, &cmd, &used, &err),
                         MC_PARSE_OK);
        ck_assert_int_eq(cmd.kind, MC_BAD);
        ck_assert_str_eq(cmd.err, "key longer than 250 bytes");
        memcpy(line + 254, "\r\n", 3);
        ck_assert_int_eq(mc_parse(line, strlen(line), &wide, &cmd, &used, &err),
                         MC_PARSE_OK);
        ck_assert_int_eq(cmd.kind, MC_GET);
        ck_assert_uint_eq(cmd.len[1], 250);
    }
}
END_TEST

START_TEST(closing_errors)
{
    static const char *lines[] = {
        "set k 0 0\r\n", "set k 0 0 x\r\n", "set k 0 0 -1\r\n",
        "set k 0 0 1025\r\n", "set k 0 0 5 noreply extra\r\n",
        "cas k 0 0 5\r\n", "ms k\r\n", "set k 0 0 99999999999999999999\r\n",
    };
    struct mc_cmd cmd;
    size_t used;
    const char *err;
    char big[300];

    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        ck_assert_msg(parse(lines[i], &cmd, &used, &err) == MC_PARSE_ERROR,
                      "case %zu accepted", i);
        ck_assert_ptr_nonnull(err);
    }
    /* A line longer than max_line, with or without its newline. */
    memset(big, 'a', sizeof big);
    ck_assert_int_eq(mc_parse(big, sizeof big, &lim, &cmd, &used, &err),
                     MC_PARSE_ERROR);
    ck_assert_str_eq(err, "line too long");
    big[200] = '\n';
    ck_assert_int_eq(mc_parse(big, sizeof big, &lim, &cmd, &used, &err),
                     MC_PARSE_ERROR);
    /* max_line - 1 bytes without a newline may still become a line. */
    ck_assert_int_eq(mc_parse(big, 127, &lim, &cmd, &used, &err), MC_PARSE_MORE);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("mc_parse");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, get_keys);
    tcase_add_test(tc, commands);
    tcase_add_test(tc, storage);
    tcase_add_test(tc, answered_errors);
    tcase_add_test(tc, closing_errors);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
