/* check_api_route.c: the HTTP route table (api_routes.h, api_route.c):
 * every path the API documents reaches its row with the right rest, the
 * patterns' edges, and the table's own invariants (one metrics name per
 * row, a handler exactly where there is a path). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"

static enum route
find(const char *path, const char **rest, size_t *rlen)
{
    return api_route_find(path, strlen(path), rest, rlen);
}

/* path reaches route want, with rest want_rest. */
static void
reaches(const char *path, enum route want, const char *want_rest)
{
    const char *rest = NULL;
    size_t rlen = 99;
    enum route r = find(path, &rest, &rlen);

    ck_assert_msg(r == want, "%s: row %s, wanted %s", path, api_routes[r].name,
                  api_routes[want].name);
    if (want == R_OTHER)
        return;
    ck_assert_msg(rlen == strlen(want_rest) && memcmp(rest, want_rest, rlen) == 0,
                  "%s: rest '%.*s', wanted '%s'", path, (int)rlen, rest, want_rest);
}

START_TEST(test_documented_paths)
{
    reaches("/segment/demo", R_SEGMENT, "demo");
    reaches("/segment/a%2Fb", R_SEGMENT, "a%2Fb");
    reaches("/segment/demo/lease", R_LEASE, "demo");
    reaches("/segment/a/b/lease", R_LEASE, "a/b");
    reaches("/api/segment/get/demo", R_SEGMENT_LEAF, "demo");
    reaches("/snowflake", R_SNOWFLAKE, "");
    reaches("/api/snowflake/get/k", R_SNOWFLAKE_LEAF, "k");
    reaches("/snowflake/decode/123", R_DECODE, "123");
    reaches("/decodeSnowflakeId", R_DECODE_LEAF, "");
    reaches("/snowflake/state", R_SF_STATE, "");
    reaches("/uuid", R_UUID, "");
    reaches("/ulid", R_ULID, "");
    reaches("/uuid/decode/x", R_UUID_DECODE, "x");
    reaches("/ulid/decode/x", R_ULID_DECODE, "x");
    reaches("/serial/PAY", R_SERIAL, "PAY");
    reaches("/serial/decode", R_SERIAL, "decode");     /* a code named decode */
    reaches("/serial/decode/PAY/PAY20261128797369", R_SERIAL_DECODE,
            "PAY/PAY20261128797369");
    reaches("/tinyid/id/nextId", R_TINYID, "nextId");
    reaches("/health", R_HEALTH, "");
    reaches("/metrics", R_METRICS, "");
    reaches("/cache", R_CACHE, "");
    reaches("/db", R_DB, "");
}
END_TEST

START_TEST(test_pattern_edges)
{
    /* "/x/<star>" with RT_BARE takes "/x" too (the handler refuses the
     * empty tag with 400); without RT_BARE it does not. */
    reaches("/segment", R_SEGMENT, "");
    reaches("/segment/", R_SEGMENT, "");
    reaches("/serial", R_OTHER, "");
    reaches("/uuid/decode", R_OTHER, "");
    /* "/segment/<star>/lease" needs a tag: "/segment/lease" is the tag
     * "lease"; "/segment//lease" is no lease of the tag "" but the segment
     * tag "/lease", which the handler refuses with 400. */
    reaches("/segment/lease", R_SEGMENT, "lease");
    reaches("/segment//lease", R_SEGMENT, "/lease");
    /* Exact patterns match exactly. */
    reaches("/healthz", R_OTHER, "");
    reaches("/snowflakes", R_OTHER, "");
    reaches("/uuid/", R_OTHER, "");
    reaches("", R_OTHER, "");
    reaches("/", R_OTHER, "");
}
END_TEST

START_TEST(test_table_invariants)
{
    for (int i = 0; i < R_COUNT; i++) {
        const struct api_route *rt = &api_routes[i];

        ck_assert_msg(rt->name != NULL && rt->name[0] != '\0', "row %d has no name", i);
        ck_assert_msg((rt->path == NULL) == (rt->handler == NULL),
                      "row %s: a path needs a handler and a handler a path", rt->name);
        ck_assert_msg(rt->path == NULL || rt->path[0] == '/', "row %s", rt->name);
        ck_assert_msg(!(rt->flags & RT_BARE) || (rt->path && strchr(rt->path, '*')),
                      "row %s: RT_BARE needs a '*'", rt->name);
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(rt->name, api_routes[j].name) != 0,
                          "two rows are named %s", rt->name);
    }
    /* The ID routes are never cached. */
    ck_assert(api_routes[R_SEGMENT].flags & RT_IDS);
    ck_assert(api_routes[R_SNOWFLAKE].flags & RT_IDS);
    ck_assert(api_routes[R_SERIAL].flags & RT_IDS);
    ck_assert(!(api_routes[R_HEALTH].flags & RT_IDS));
}
END_TEST

static Suite *
route_suite(void)
{
    Suite *s = suite_create("api_route");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_documented_paths);
    tcase_add_test(tc, test_pattern_edges);
    tcase_add_test(tc, test_table_invariants);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(route_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
