/* fuzz_grpc_msg.c: libFuzzer target for the gRPC service's request
 * messages (api_grpc_msg.c): what a client puts in the one message of a
 * call, unpacked by protobuf-c and checked as the api checks a request.
 *
 * Checked on every input, for the method the first byte picks:
 *  - a refusal is a 400 with one of the api's codes and a reason;
 *  - an accepted request is within the limits: a biz_tag or serial code
 *    valid and NUL-free, a count in [1, max], a lease size in [0, max], a
 *    decode ID >= 0;
 *  - a reply made of what was accepted packs within its bound and unpacks
 *    to the same values.
 *
 * Input: one byte (the method), then the message bytes.
 */
#include <stdint.h>
#include <string.h>

#include "api_grpc_msg.h"
#include "fuzz.h"
#include "leafd/v1/leafd.pb-c.h"
#include "util.h"

static const struct api_grpc_limits lim = { 1000, 500, 100, 200, 50, 100000 };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum api_grpc_method m;
    struct api_grpc_args g;
    const char *code = NULL;
    char why[256] = "";
    int rc;

    if (size < 1)
        return 0;
    m = (enum api_grpc_method)(data[0] % AGM_UNKNOWN);
    rc = api_grpc_args_parse(m, data + 1, size - 1, &lim, &g, &code, why, sizeof why);
    if (rc != 0) {
        FUZZ_ASSERT(rc == 400 && code != NULL && why[0] != '\0');
        FUZZ_ASSERT(strcmp(code, "invalid_message") == 0 ||
                    strcmp(code, "invalid_biz_tag") == 0 ||
                    strcmp(code, "invalid_count") == 0 ||
                    strcmp(code, "invalid_serial_code") == 0 ||
                    strcmp(code, "invalid_size") == 0 ||
                    strcmp(code, "invalid_encoding") == 0 ||
                    strcmp(code, "invalid_id") == 0);
        return 0;
    }
    FUZZ_ASSERT(g.method == m);
    FUZZ_ASSERT(g.enc == IDSTR_DEC || g.enc == IDSTR_BASE62 || g.enc == IDSTR_BASE32);
    switch (m) {
    case AGM_SEGMENT:
    case AGM_LEASE:
        FUZZ_ASSERT(g.name_len >= 1 && g.name_len <= TAG_MAX &&
                    strlen(g.name) == g.name_len && util_tag_valid(g.name, g.name_len));
        if (m == AGM_SEGMENT)
            FUZZ_ASSERT(g.n >= 1 && g.n <= lim.count_max);
        else
            FUZZ_ASSERT(g.n >= 0 && g.n <= lim.lease_max);
        break;
    case AGM_SERIAL:
        FUZZ_ASSERT(g.name_len >= 1 && g.name_len <= 32 && strlen(g.name) == g.name_len);
        FUZZ_ASSERT(g.n >= 1 && g.n <= lim.serial_count_max);
        break;
    case AGM_SNOWFLAKE:
    case AGM_UUID:
    case AGM_ULID:
        FUZZ_ASSERT(g.n >= 1 && g.n <= lim.sf_count_max);
        FUZZ_ASSERT(g.enc == IDSTR_DEC || m == AGM_SNOWFLAKE);
        break;
    case AGM_DECODE:
    case AGM_DECODE_SEGMENT:
        FUZZ_ASSERT(g.id >= 0 && g.text_len <= IDSTR_TEXT_MAX &&
                    strlen(g.text) == g.text_len);
        FUZZ_ASSERT(g.text_len == 0 ? m == AGM_DECODE : g.id == 0);
        break;
    default:
        FUZZ_ASSERT(g.known_service == 0 || g.known_service == 1);
        break;
    }
    /* A reply of what was accepted, packed and read back. */
    {
        int64_t ids[2] = { g.n, g.id };
        int64_t ends[1] = { g.id };
        char *strs[1] = { g.name };
        uint8_t out[512];
        size_t n;
        Leafd__V1__IdsReply *ir;
        Leafd__V1__StringsReply *sr;
        Leafd__V1__LeaseReply *lr;

        n = api_grpc_pack_ids(ids, 2, out, api_grpc_ids_bound(2));
        FUZZ_ASSERT(n <= api_grpc_ids_bound(2));
        ir = leafd__v1__ids_reply__unpack(NULL, n, out);
        FUZZ_ASSERT(ir != NULL && ir->n_ids == 2 && ir->ids[0] == g.n && ir->ids[1] == g.id);
        leafd__v1__ids_reply__free_unpacked(ir, NULL);
        n = api_grpc_pack_strings(strs, 1, out, api_grpc_strings_bound(1, g.name_len));
        sr = leafd__v1__strings_reply__unpack(NULL, n, out);
        FUZZ_ASSERT(sr != NULL && sr->n_ids == 1 && strcmp(sr->ids[0], g.name) == 0);
        leafd__v1__strings_reply__free_unpacked(sr, NULL);
        strs[0] = g.text;
        n = api_grpc_pack_id_strings(strs, 1, out, api_grpc_strings_bound(1, g.text_len));
        ir = leafd__v1__ids_reply__unpack(NULL, n, out);
        FUZZ_ASSERT(ir != NULL && ir->n_ids == 0 && ir->n_strings == 1 &&
                    strcmp(ir->strings[0], g.text) == 0);
        leafd__v1__ids_reply__free_unpacked(ir, NULL);
        n = api_grpc_pack_lease(g.name, ids, ends, 1, out, api_grpc_lease_bound(1));
        lr = leafd__v1__lease_reply__unpack(NULL, n, out);
        FUZZ_ASSERT(lr != NULL && lr->n_ranges == 1 && lr->ranges[0]->end == g.id);
        leafd__v1__lease_reply__free_unpacked(lr, NULL);
    }
    return 0;
}
