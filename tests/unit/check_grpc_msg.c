/* check_grpc_msg.c: the gRPC service's messages without a server
 * (api_grpc_msg.c): method paths, requests unpacked and checked (messages
 * packed here by protobuf-c from the same schema, plus hand-made bytes a
 * client could send), leafd's refusals as gRPC status codes, and replies
 * packed and unpacked again. The service over the wire is
 * tests/blackbox/bb_grpc.py's (python3-grpcio). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_grpc_msg.h"
#include "grpc/health/v1/health.pb-c.h"
#include "leafd/v1/leafd.pb-c.h"
#include "sfcodec.h"
#include "util.h"

static const struct api_grpc_limits lim = { 1000, 500, 100, 200, 50, 100000 };

static int
parse(enum api_grpc_method m, const void *body, size_t len, struct api_grpc_args *g,
      const char **code)
{
    char why[256];

    *code = NULL;
    return api_grpc_args_parse(m, body, len, &lim, g, code, why, sizeof why);
}

static size_t
segment_req(const char *tag, uint32_t count, uint8_t *out)
{
    Leafd__V1__SegmentRequest q = LEAFD__V1__SEGMENT_REQUEST__INIT;

    q.biz_tag = (char *)tag;
    q.count = count;
    return leafd__v1__segment_request__pack(&q, out);
}

START_TEST(test_method_paths)
{
    static const char *const paths[] = {
        "/leafd.v1.IdService/NextSegment", "/leafd.v1.IdService/NextSnowflake",
        "/leafd.v1.IdService/NextUuid", "/leafd.v1.IdService/NextUlid",
        "/leafd.v1.IdService/NextSerial", "/leafd.v1.IdService/Lease",
        "/leafd.v1.IdService/Decode", "/leafd.v1.IdService/DecodeSegment",
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
    };

    for (int m = 0; m < AGM_UNKNOWN; m++) {
        ck_assert_int_eq(api_grpc_method_find(paths[m], strlen(paths[m])), m);
        ck_assert_str_eq(api_grpc_method_name((enum api_grpc_method)m), paths[m]);
    }
    ck_assert_int_eq(api_grpc_method_find("/leafd.v1.IdService/nextsegment", 31),
                     AGM_UNKNOWN);
    ck_assert_int_eq(api_grpc_method_find("/leafd.v1.IdService/NextSegmen", 30),
                     AGM_UNKNOWN);
    ck_assert_int_eq(api_grpc_method_find("/leafd.v1.IdService/NextSegmentX", 32),
                     AGM_UNKNOWN);
    ck_assert_int_eq(api_grpc_method_find("", 0), AGM_UNKNOWN);
}
END_TEST

START_TEST(test_segment_request)
{
    uint8_t buf[512];
    struct api_grpc_args g;
    const char *code;
    char tag[TAG_MAX + 2];

    ck_assert_int_eq(parse(AGM_SEGMENT, buf, segment_req("orders", 7, buf), &g, &code), 0);
    ck_assert_str_eq(g.name, "orders");
    ck_assert_uint_eq(g.name_len, 6);
    ck_assert_int_eq(g.n, 7);
    /* count 0 (absent on the wire) means 1; the limit is count_max. */
    ck_assert_int_eq(parse(AGM_SEGMENT, buf, segment_req("orders", 0, buf), &g, &code), 0);
    ck_assert_int_eq(g.n, 1);
    ck_assert_int_eq(parse(AGM_SEGMENT, buf, segment_req("orders", 1000, buf), &g, &code), 0);
    ck_assert_int_eq(parse(AGM_SEGMENT, buf, segment_req("orders", 1001, buf), &g, &code), 400);
    ck_assert_str_eq(code, "invalid_count");
    ck_assert_int_eq(parse(AGM_SEGMENT, buf, segment_req("orders", UINT32_MAX, buf), &g,
                           &code), 400);
    ck_assert_str_eq(code, "invalid_count");
    /* Tags: empty, a space, too long; the longest valid one. */
    ck_assert_int_eq(parse(AGM_SEGMENT, buf, segment_req("", 1, buf), &g, &code), 400);
    ck_assert_str_eq(code, "invalid_biz_tag");
    ck_assert_int_eq(parse(AGM_SEGMENT, buf, segment_req("a b", 1, buf), &g, &code), 400);
    ck_assert_str_eq(code, "invalid_biz_tag");
    memset(tag, 'x', TAG_MAX + 1);
    tag[TAG_MAX + 1] = '\0';
    ck_assert_int_eq(parse(AGM_SEGMENT, buf, segment_req(tag, 1, buf), &g, &code), 400);
    tag[TAG_MAX] = '\0';
    ck_assert_int_eq(parse(AGM_SEGMENT, buf, segment_req(tag, 1, buf), &g, &code), 0);
    ck_assert_uint_eq(g.name_len, TAG_MAX);
}
END_TEST

START_TEST(test_wire_bytes)
{
    struct api_grpc_args g;
    const char *code;
    /* biz_tag "ab" (field 1), then unknown fields 9 (varint) and 15 (bytes),
     * then count 3: unknown fields are skipped as protobuf does. */
    static const uint8_t unknown[] = { 0x0a, 2, 'a', 'b', 0x48, 0x96, 0x01,
                                       0x7a, 3, 'x', 'y', 'z', 0x10, 3 };
    static const uint8_t nul_tag[] = { 0x0a, 3, 'a', 0, 'b' };
    static const uint8_t truncated[] = { 0x0a, 9, 'a', 'b' };
    static const uint8_t bad_utf8[] = { 0x0a, 2, 0xff, 0xfe };
    static const uint8_t wrong_type[] = { 0x0d, 1, 2, 3, 4 };   /* field 1 fixed32 */
    uint8_t big[4096];

    ck_assert_int_eq(parse(AGM_SEGMENT, unknown, sizeof unknown, &g, &code), 0);
    ck_assert_str_eq(g.name, "ab");
    ck_assert_int_eq(g.n, 3);
    ck_assert_int_eq(parse(AGM_SEGMENT, nul_tag, sizeof nul_tag, &g, &code), 400);
    ck_assert_str_eq(code, "invalid_message");
    ck_assert_int_eq(parse(AGM_SEGMENT, truncated, sizeof truncated, &g, &code), 400);
    ck_assert_str_eq(code, "invalid_message");
    ck_assert_int_eq(parse(AGM_SEGMENT, bad_utf8, sizeof bad_utf8, &g, &code), 400);
    ck_assert_int_eq(parse(AGM_SEGMENT, wrong_type, sizeof wrong_type, &g, &code), 400);
    /* An empty message: every field at its default. */
    ck_assert_int_eq(parse(AGM_SNOWFLAKE, NULL, 0, &g, &code), 0);
    ck_assert_int_eq(g.n, 1);
    ck_assert_int_eq(parse(AGM_SEGMENT, NULL, 0, &g, &code), 400);
    ck_assert_str_eq(code, "invalid_biz_tag");
    /* A large unknown field (past the unpack arena): still skipped. */
    big[0] = 0x7a;                          /* field 15, bytes */
    big[1] = 0x80 | (4000 & 0x7f);
    big[2] = 4000 >> 7;
    memset(big + 3, 'q', 4000);
    big[4003] = 0x08;                       /* CountRequest.count = 5 */
    big[4004] = 5;
    ck_assert_int_eq(parse(AGM_SNOWFLAKE, big, 4005, &g, &code), 0);
    ck_assert_int_eq(g.n, 5);
}
END_TEST

START_TEST(test_other_requests)
{
    uint8_t buf[256];
    struct api_grpc_args g;
    const char *code;
    Leafd__V1__CountRequest cq = LEAFD__V1__COUNT_REQUEST__INIT;
    Leafd__V1__SerialRequest sq = LEAFD__V1__SERIAL_REQUEST__INIT;
    Leafd__V1__LeaseRequest lq = LEAFD__V1__LEASE_REQUEST__INIT;
    Leafd__V1__DecodeRequest dq = LEAFD__V1__DECODE_REQUEST__INIT;
    Grpc__Health__V1__HealthCheckRequest hq = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    size_t n;

    /* Each kind's own count_max. */
    cq.count = 100;
    n = leafd__v1__count_request__pack(&cq, buf);
    ck_assert_int_eq(parse(AGM_UUID, buf, n, &g, &code), 0);
    ck_assert_int_eq(parse(AGM_ULID, buf, n, &g, &code), 0);
    ck_assert_int_eq(parse(AGM_SNOWFLAKE, buf, n, &g, &code), 0);
    cq.count = 101;
    n = leafd__v1__count_request__pack(&cq, buf);
    ck_assert_int_eq(parse(AGM_UUID, buf, n, &g, &code), 400);
    ck_assert_int_eq(parse(AGM_ULID, buf, n, &g, &code), 0);
    cq.count = 501;
    n = leafd__v1__count_request__pack(&cq, buf);
    ck_assert_int_eq(parse(AGM_SNOWFLAKE, buf, n, &g, &code), 400);

    sq.code = "PAY_1-x";
    sq.count = 50;
    n = leafd__v1__serial_request__pack(&sq, buf);
    ck_assert_int_eq(parse(AGM_SERIAL, buf, n, &g, &code), 0);
    ck_assert_str_eq(g.name, "PAY_1-x");
    ck_assert_int_eq(g.n, 50);
    sq.code = "PAY.1";
    n = leafd__v1__serial_request__pack(&sq, buf);
    ck_assert_int_eq(parse(AGM_SERIAL, buf, n, &g, &code), 400);
    ck_assert_str_eq(code, "invalid_serial_code");
    sq.code = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456";            /* 33 */
    n = leafd__v1__serial_request__pack(&sq, buf);
    ck_assert_int_eq(parse(AGM_SERIAL, buf, n, &g, &code), 400);

    lq.biz_tag = "orders";
    n = leafd__v1__lease_request__pack(&lq, buf);
    ck_assert_int_eq(parse(AGM_LEASE, buf, n, &g, &code), 0);
    ck_assert_int_eq(g.n, 0);                       /* the row's step */
    lq.size = 100001;
    n = leafd__v1__lease_request__pack(&lq, buf);
    ck_assert_int_eq(parse(AGM_LEASE, buf, n, &g, &code), 400);
    ck_assert_str_eq(code, "invalid_size");

    dq.id = INT64_MAX;
    n = leafd__v1__decode_request__pack(&dq, buf);
    ck_assert_int_eq(parse(AGM_DECODE, buf, n, &g, &code), 0);
    ck_assert_int_eq(g.id, INT64_MAX);
    dq.id = -1;
    n = leafd__v1__decode_request__pack(&dq, buf);
    ck_assert_int_eq(parse(AGM_DECODE, buf, n, &g, &code), 400);
    ck_assert_str_eq(code, "invalid_id");

    n = grpc__health__v1__health_check_request__pack(&hq, buf);
    ck_assert_int_eq(parse(AGM_HEALTH_CHECK, buf, n, &g, &code), 0);
    ck_assert_int_eq(g.known_service, 1);
    hq.service = "leafd.v1.IdService";
    n = grpc__health__v1__health_check_request__pack(&hq, buf);
    ck_assert_int_eq(parse(AGM_HEALTH_CHECK, buf, n, &g, &code), 0);
    ck_assert_int_eq(g.known_service, 1);
    hq.service = "leafd.v1.Other";
    n = grpc__health__v1__health_check_request__pack(&hq, buf);
    ck_assert_int_eq(parse(AGM_HEALTH_WATCH, buf, n, &g, &code), 0);
    ck_assert_int_eq(g.known_service, 0);
}
END_TEST

START_TEST(test_status_codes)
{
    ck_assert_int_eq(api_grpc_status_of(200, "", 0), GRPC_OK);
    ck_assert_int_eq(api_grpc_status_of(400, "invalid_count", 0), GRPC_INVALID_ARGUMENT);
    ck_assert_int_eq(api_grpc_status_of(400, "batch_too_large", 1), GRPC_INVALID_ARGUMENT);
    ck_assert_int_eq(api_grpc_status_of(401, "token_required", 0), GRPC_UNAUTHENTICATED);
    ck_assert_int_eq(api_grpc_status_of(403, "token_forbidden", 0), GRPC_PERMISSION_DENIED);
    ck_assert_int_eq(api_grpc_status_of(404, "unknown_biz_tag", 0), GRPC_NOT_FOUND);
    ck_assert_int_eq(api_grpc_status_of(404, "unknown_serial_code", 0), GRPC_NOT_FOUND);
    ck_assert_int_eq(api_grpc_status_of(404, "mode_disabled", 0), GRPC_UNIMPLEMENTED);
    ck_assert_int_eq(api_grpc_status_of(405, "unknown_method", 0), GRPC_UNIMPLEMENTED);
    ck_assert_int_eq(api_grpc_status_of(409, "lease_concealed", 0), GRPC_FAILED_PRECONDITION);
    ck_assert_int_eq(api_grpc_status_of(503, "ids_exhausted", 0), GRPC_UNAVAILABLE);
    ck_assert_int_eq(api_grpc_status_of(503, "serial_exhausted", 0), GRPC_UNAVAILABLE);
    ck_assert_int_eq(api_grpc_status_of(503, "clock_moved_backwards", 0), GRPC_UNAVAILABLE);
    ck_assert_int_eq(api_grpc_status_of(503, "ids_exhausted", 1), GRPC_DEADLINE_EXCEEDED);
    ck_assert_int_eq(api_grpc_status_of(500, "x", 0), GRPC_INTERNAL);
}
END_TEST

START_TEST(test_replies)
{
    int64_t ids[1000];
    char *strs[3] = { "0192f3c1-0000-7000-8000-000000000000", "01J", "" };
    int64_t starts[2] = { 1, 1000 }, ends[2] = { 11, 2000 };
    uint8_t *out = malloc(api_grpc_ids_bound(1000));
    uint8_t small[API_GRPC_DECODE_MAX];
    Leafd__V1__IdsReply *ir;
    Leafd__V1__StringsReply *sr;
    Leafd__V1__LeaseReply *lr;
    Leafd__V1__DecodeReply *dr;
    Grpc__Health__V1__HealthCheckResponse *hr;
    struct sfcodec_decoded d = { 0 };
    size_t n;

    /* The largest IDs fill the bound's ten bytes each. */
    for (int i = 0; i < 1000; i++)
        ids[i] = INT64_MAX - i;
    n = api_grpc_pack_ids(ids, 1000, out, api_grpc_ids_bound(1000));
    ck_assert_uint_le(n, api_grpc_ids_bound(1000));
    ir = leafd__v1__ids_reply__unpack(NULL, n, out);
    ck_assert_ptr_nonnull(ir);
    ck_assert_uint_eq(ir->n_ids, 1000);
    ck_assert_int_eq(ir->ids[999], INT64_MAX - 999);
    leafd__v1__ids_reply__free_unpacked(ir, NULL);
    /* No IDs: an empty message. */
    ck_assert_uint_eq(api_grpc_pack_ids(ids, 0, out, api_grpc_ids_bound(0)), 0);

    n = api_grpc_pack_strings(strs, 3, out, api_grpc_strings_bound(3, 40));
    sr = leafd__v1__strings_reply__unpack(NULL, n, out);
    ck_assert_ptr_nonnull(sr);
    ck_assert_uint_eq(sr->n_ids, 3);
    ck_assert_str_eq(sr->ids[0], strs[0]);
    ck_assert_str_eq(sr->ids[2], "");
    leafd__v1__strings_reply__free_unpacked(sr, NULL);

    n = api_grpc_pack_lease("orders", starts, ends, 2, out, api_grpc_lease_bound(2));
    lr = leafd__v1__lease_reply__unpack(NULL, n, out);
    ck_assert_ptr_nonnull(lr);
    ck_assert_str_eq(lr->biz_tag, "orders");
    ck_assert_uint_eq(lr->n_ranges, 2);
    ck_assert_int_eq(lr->ranges[1]->start, 1000);
    ck_assert_int_eq(lr->ranges[1]->end, 2000);
    leafd__v1__lease_reply__free_unpacked(lr, NULL);

    d.id = UINT64_C(0x7fffffffffffffff);
    d.timestamp_ms = INT64_MAX;
    strcpy(d.time, "2019-09-06T01:35:00.834Z");
    d.worker_id = UINT64_MAX;
    d.sequence = UINT64_MAX;
    d.datacenter_id = UINT64_MAX;
    d.has_datacenter = 1;
    n = api_grpc_pack_decode(&d, small, sizeof small);
    dr = leafd__v1__decode_reply__unpack(NULL, n, small);
    ck_assert_ptr_nonnull(dr);
    ck_assert_int_eq(dr->id, INT64_MAX);
    ck_assert_str_eq(dr->time, "2019-09-06T01:35:00.834Z");
    ck_assert_uint_eq(dr->worker_id, UINT64_MAX);
    ck_assert(dr->has_datacenter);
    leafd__v1__decode_reply__free_unpacked(dr, NULL);

    for (int serving = 0; serving <= 1; serving++) {
        n = api_grpc_pack_health(serving, small, API_GRPC_HEALTH_MAX);
        hr = grpc__health__v1__health_check_response__unpack(NULL, n, small);
        ck_assert_ptr_nonnull(hr);
        ck_assert_int_eq(hr->status, serving ? 1 : 2);    /* SERVING, NOT_SERVING */
        grpc__health__v1__health_check_response__free_unpacked(hr, NULL);
    }
    free(out);
}
END_TEST

/* IdEncoding on NextSegment and NextSnowflake only; ID strings in Decode
 * and DecodeSegment, NUL-free; IdsReply.strings packed and read back. */
START_TEST(test_id_strings)
{
    Leafd__V1__SegmentRequest sq = LEAFD__V1__SEGMENT_REQUEST__INIT;
    Leafd__V1__CountRequest cq = LEAFD__V1__COUNT_REQUEST__INIT;
    Leafd__V1__DecodeRequest dq = LEAFD__V1__DECODE_REQUEST__INIT;
    Leafd__V1__DecodeSegmentRequest gq = LEAFD__V1__DECODE_SEGMENT_REQUEST__INIT;
    Leafd__V1__IdsReply *ir;
    struct api_grpc_args g;
    const char *code;
    uint8_t buf[256];
    size_t n;
    char a[] = "ord_00000000001", b[] = "ord_0000000000000";
    char *strs[2] = { a, b };

    sq.biz_tag = (char *)"demo";
    sq.encoding = LEAFD__V1__ID_ENCODING__ID_ENCODING_BASE32;
    n = leafd__v1__segment_request__pack(&sq, buf);
    ck_assert_int_eq(parse(AGM_SEGMENT, buf, n, &g, &code), 0);
    ck_assert_int_eq(g.enc, IDSTR_BASE32);
    sq.encoding = (Leafd__V1__IdEncoding)9;
    n = leafd__v1__segment_request__pack(&sq, buf);
    ck_assert_int_eq(parse(AGM_SEGMENT, buf, n, &g, &code), 400);
    ck_assert_str_eq(code, "invalid_encoding");

    cq.encoding = LEAFD__V1__ID_ENCODING__ID_ENCODING_BASE62;
    n = leafd__v1__count_request__pack(&cq, buf);
    ck_assert_int_eq(parse(AGM_SNOWFLAKE, buf, n, &g, &code), 0);
    ck_assert_int_eq(g.enc, IDSTR_BASE62);
    ck_assert_int_eq(parse(AGM_UUID, buf, n, &g, &code), 400);
    ck_assert_str_eq(code, "invalid_encoding");

    dq.text = a;
    n = leafd__v1__decode_request__pack(&dq, buf);
    ck_assert_int_eq(parse(AGM_DECODE, buf, n, &g, &code), 0);
    ck_assert_str_eq(g.text, a);
    ck_assert_uint_eq(g.text_len, strlen(a));
    dq.id = 3;
    n = leafd__v1__decode_request__pack(&dq, buf);
    ck_assert_int_eq(parse(AGM_DECODE, buf, n, &g, &code), 400);
    ck_assert_str_eq(code, "invalid_message");
    {
        /* field 2, "ab\0c": a NUL in the text */
        static const uint8_t nul[] = { 0x12, 4, 'a', 'b', 0, 'c' };

        ck_assert_int_eq(parse(AGM_DECODE, nul, sizeof nul, &g, &code), 400);
        ck_assert_str_eq(code, "invalid_message");
    }
    gq.text = (char *)"";
    n = leafd__v1__decode_segment_request__pack(&gq, buf);
    ck_assert_int_eq(parse(AGM_DECODE_SEGMENT, buf, n, &g, &code), 400);
    ck_assert_str_eq(code, "invalid_id");
    gq.text = b;
    n = leafd__v1__decode_segment_request__pack(&gq, buf);
    ck_assert_int_eq(parse(AGM_DECODE_SEGMENT, buf, n, &g, &code), 0);
    ck_assert_str_eq(g.text, b);

    n = api_grpc_pack_id_strings(strs, 2, buf, api_grpc_strings_bound(2, 40));
    ir = leafd__v1__ids_reply__unpack(NULL, n, buf);
    ck_assert_ptr_nonnull(ir);
    ck_assert_uint_eq(ir->n_ids, 0);
    ck_assert_uint_eq(ir->n_strings, 2);
    ck_assert_str_eq(ir->strings[1], b);
    leafd__v1__ids_reply__free_unpacked(ir, NULL);
}
END_TEST

static Suite *
grpc_msg_suite(void)
{
    Suite *s = suite_create("grpc_msg");
    TCase *tc = tcase_create("msg");

    tcase_add_test(tc, test_method_paths);
    tcase_add_test(tc, test_segment_request);
    tcase_add_test(tc, test_wire_bytes);
    tcase_add_test(tc, test_other_requests);
    tcase_add_test(tc, test_status_codes);
    tcase_add_test(tc, test_replies);
    tcase_add_test(tc, test_id_strings);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(grpc_msg_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
