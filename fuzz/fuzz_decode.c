/* fuzz_decode.c: libFuzzer target for the snowflake ID decoder
 * (sfcodec_layout_init + sfcodec_decode and the two JSON renderings,
 * sfcodec.h). It links sfcodec.o and util.o only: no ZooKeeper, no config.
 *
 * Input: 8 bytes pick a layout the config accepts (timestamp 30..61 bits,
 * datacenter 0..16, worker 1..22, sequence what is left, which may make the
 * layout invalid: then only the refusal is checked), an epoch in
 * snowflake.epoch_ms's range and the output format; the rest is the ID text
 * as it would arrive in GET /snowflake/decode/<id> or `leafd decode <id>`.
 *
 * Checked: sfcodec_decode accepts exactly the strict decimal numbers below 2^63
 * without leading zeros (compared with a reference parser); a decoded ID
 * packs back to itself with sfcodec_pack; every field fits its width; the JSON
 * answers parse (jansson) and carry the same numbers; the path the HTTP
 * handlers and `leafd decode` share (sfcodec_decode_to_json, the ID as a C
 * string there) agrees with the direct one.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "sfcodec.h"
#include "util.h"

#define EPOCH_MAX 4102444800000LL   /* snowflake.epoch_ms's upper bound */

/* The contract, written out independently: 1 and *v if s is a valid ID. */
static int
ref_parse(const char *s, size_t len, uint64_t *v)
{
    uint64_t x = 0;

    if (len == 0 || len > 19 || (len > 1 && s[0] == '0'))
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        x = x * 10 + (uint64_t)(s[i] - '0');   /* 19 digits fit in 64 bits */
    }
    if (x > (uint64_t)INT64_MAX)
        return 0;
    *v = x;
    return 1;
}

static void
check_json(const struct sbuf *b, const struct sfcodec_decoded *d, int leaf_format)
{
    json_error_t err;
    json_t *j = json_loadb(b->p, b->len, 0, &err);
    char want[32];

    if (j == NULL) {
        fprintf(stderr, "fuzz_decode: bad JSON (%s): %.*s\n", err.text,
                (int)b->len, b->p);
        abort();
    }
    FUZZ_ASSERT(json_is_object(j));
    if (leaf_format) {
        const char *seq = json_string_value(json_object_get(j, "sequenceId"));
        const char *ts = json_string_value(json_object_get(j, "timestamp"));

        FUZZ_ASSERT(seq != NULL && ts != NULL);
        snprintf(want, sizeof want, "%llu", (unsigned long long)d->sequence);
        FUZZ_ASSERT(strcmp(seq, want) == 0);
        snprintf(want, sizeof want, "%lld(", (long long)d->timestamp_ms);
        FUZZ_ASSERT(strncmp(ts, want, strlen(want)) == 0);
    } else {
        const char *id = json_string_value(json_object_get(j, "id"));

        FUZZ_ASSERT(id != NULL);
        snprintf(want, sizeof want, "%llu", (unsigned long long)d->id);
        FUZZ_ASSERT(strcmp(id, want) == 0);
        FUZZ_ASSERT(json_integer_value(json_object_get(j, "timestamp")) ==
                    d->timestamp_ms);
        FUZZ_ASSERT((uint64_t)json_integer_value(json_object_get(j, "sequence")) ==
                    d->sequence);
        FUZZ_ASSERT((uint64_t)json_integer_value(json_object_get(j, "worker_id")) ==
                    d->worker_id);
        FUZZ_ASSERT(json_string_value(json_object_get(j, "time")) != NULL);
    }
    json_decref(j);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sfcodec_layout l;
    struct sfcodec_decoded d;
    struct sbuf out = { 0 };
    char *cause = NULL, *id;
    int ts_bits, dc_bits, w_bits, seq_bits, leaf_format, ok;
    int64_t epoch;
    uint64_t e = 0, want;
    size_t len;

    if (size < 8)
        return 0;
    ts_bits = 30 + data[0] % 32;
    dc_bits = data[1] % 17;
    w_bits = 1 + data[2] % 22;
    seq_bits = 63 - ts_bits - dc_bits - w_bits;
    for (int i = 3; i < 8; i++)
        e = e << 8 | data[i];
    e = e << 8 | (data[0] >> 5);
    epoch = (int64_t)(e % (uint64_t)(EPOCH_MAX + 1));
    leaf_format = data[1] >> 7;
    data += 8;
    size -= 8;

    if (sfcodec_layout_init(&l, epoch, ts_bits, dc_bits, w_bits, seq_bits, -1, 0,
                       &cause) == -1) {
        FUZZ_ASSERT(seq_bits < 1 || seq_bits > 22);
        FUZZ_ASSERT(cause != NULL);
        free(cause);
        return 0;
    }
    FUZZ_ASSERT(seq_bits >= 1);
    FUZZ_ASSERT(l.timestamp_shift + ts_bits == 63);
    FUZZ_ASSERT(sfcodec_layout_end_ms(&l) > epoch);

    /* The ID text, exactly size bytes on the heap. */
    len = size;
    id = malloc(len + 1);
    if (id == NULL)
        return 0;
    memcpy(id, data, len);
    id[len] = '\0';

    ok = sfcodec_decode(&l, id, len, &d, &cause) == 0;
    FUZZ_ASSERT(ok == ref_parse(id, len, &want));
    if (!ok) {
        FUZZ_ASSERT(cause != NULL);
        free(cause);
        cause = NULL;
    } else {
        FUZZ_ASSERT(cause == NULL);
        FUZZ_ASSERT(d.id == want);
        FUZZ_ASSERT(d.sequence <= l.max_sequence);
        FUZZ_ASSERT(d.worker_id <= l.max_worker);
        FUZZ_ASSERT(d.datacenter_id <= l.max_datacenter);
        FUZZ_ASSERT(d.has_datacenter == (dc_bits > 0));
        FUZZ_ASSERT(d.timestamp_ms >= epoch);
        FUZZ_ASSERT(d.timestamp_ms <= sfcodec_layout_end_ms(&l));
        FUZZ_ASSERT(memchr(d.time, '\0', sizeof d.time) != NULL);
        FUZZ_ASSERT(sfcodec_pack(&l, d.timestamp_ms, d.datacenter_id, d.worker_id,
                            d.sequence) == d.id);
        if (leaf_format)
            sfcodec_decoded_leaf_json(&l, &d, &out);
        else
            sfcodec_decoded_json(&d, &out);
        check_json(&out, &d, leaf_format);
    }

    /* `leafd decode <id>` and the HTTP handlers: the ID as a C string (an
     * embedded NUL ends it, as on a command line). */
    {
        struct sbuf cli = { 0 };
        size_t clen = strlen(id);
        int cok;

        cok = sfcodec_decode_to_json(&l, id, clen, leaf_format, &cli,
                                     &cause) == 0;
        FUZZ_ASSERT(cok == ref_parse(id, clen, &want));
        if (!cok) {
            FUZZ_ASSERT(cause != NULL);
            free(cause);
            cause = NULL;
        } else if (clen == len) {
            /* The same text as above: the same answer (the local-time Leaf
             * form too: same process, same TZ). */
            FUZZ_ASSERT(cli.len == out.len && memcmp(cli.p, out.p, out.len) == 0);
        }
        sbuf_free(&cli);
    }

    sbuf_free(&out);
    free(id);
    return 0;
}
