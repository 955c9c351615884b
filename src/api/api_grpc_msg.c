/* api_grpc_msg.c: the gRPC service's messages (see api_grpc_msg.h). The C
 * of the messages is protoc-c's, generated from proto/ into build/gen/ at
 * build time.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_grpc_msg.h"
#include "grpc/health/v1/health.pb-c.h"
#include "leafd/v1/leafd.pb-c.h"
#include "serial.h"
#include "sfcodec.h"
#include "util.h"

#define SERVICE "leafd.v1.IdService"

/* One row per method: its path and the message its request is. */
static const struct {
    const char                       *path;
    const ProtobufCMessageDescriptor *request;
} methods[AGM_UNKNOWN] = {
    [AGM_SEGMENT]      = { "/" SERVICE "/NextSegment", &leafd__v1__segment_request__descriptor },
    [AGM_SNOWFLAKE]    = { "/" SERVICE "/NextSnowflake", &leafd__v1__count_request__descriptor },
    [AGM_UUID]         = { "/" SERVICE "/NextUuid", &leafd__v1__count_request__descriptor },
    [AGM_ULID]         = { "/" SERVICE "/NextUlid", &leafd__v1__count_request__descriptor },
    [AGM_SERIAL]       = { "/" SERVICE "/NextSerial", &leafd__v1__serial_request__descriptor },
    [AGM_LEASE]        = { "/" SERVICE "/Lease", &leafd__v1__lease_request__descriptor },
    [AGM_DECODE]       = { "/" SERVICE "/Decode", &leafd__v1__decode_request__descriptor },
    [AGM_DECODE_SEGMENT] = { "/" SERVICE "/DecodeSegment",
                             &leafd__v1__decode_segment_request__descriptor },
    [AGM_HEALTH_CHECK] = { "/grpc.health.v1.Health/Check",
                           &grpc__health__v1__health_check_request__descriptor },
    [AGM_HEALTH_WATCH] = { "/grpc.health.v1.Health/Watch",
                           &grpc__health__v1__health_check_request__descriptor },
};

enum api_grpc_method
api_grpc_method_find(const char *path, size_t len)
{
    for (int m = 0; m < AGM_UNKNOWN; m++)
        if (strlen(methods[m].path) == len && memcmp(methods[m].path, path, len) == 0)
            return (enum api_grpc_method)m;
    return AGM_UNKNOWN;
}

const char *
api_grpc_method_name(enum api_grpc_method m)
{
    return m < AGM_UNKNOWN ? methods[m].path : "unknown";
}

/* ---- unpacking ---- */

/* protobuf-c's allocator for one unpack: a small arena on the caller's
 * stack (a request message is a few dozen bytes), then malloc for what does
 * not fit (large unknown fields, which protobuf-c keeps). */
struct arena {
    unsigned char buf[1024] __attribute__((aligned(16)));
    size_t        used;
};

static void *
arena_alloc(void *data, size_t size)
{
    struct arena *ar = data;
    size_t need = (size + 15) & ~(size_t)15;

    if (need >= size && need <= sizeof ar->buf - ar->used) {
        void *p = ar->buf + ar->used;

        ar->used += need;
        return p;
    }
    return malloc(size);
}

static void
arena_free(void *data, void *p)
{
    struct arena *ar = data;

    if ((unsigned char *)p < ar->buf || (unsigned char *)p >= ar->buf + sizeof ar->buf)
        free(p);
}

/* Does string field `field` of the (well-formed: protobuf-c unpacked it)
 * message hold a NUL? protobuf-c hands strings over NUL-terminated, so
 * "a\0b" would read as "a": refuse it instead. */
static int
field_has_nul(const uint8_t *p, size_t len, uint64_t field)
{
    size_t i = 0;

    while (i < len) {
        uint64_t key = 0, v = 0;
        int shift = 0;

        while (i < len && shift < 64) {          /* the key */
            key |= (uint64_t)(p[i] & 0x7f) << shift;
            shift += 7;
            if (!(p[i++] & 0x80))
                break;
        }
        switch (key & 7) {
        case 0:                                 /* varint */
            while (i < len && (p[i++] & 0x80))
                ;
            break;
        case 1:
            i += 8;
            break;
        case 5:
            i += 4;
            break;
        case 2:                                 /* length-delimited */
            shift = 0;
            while (i < len && shift < 64) {
                v |= (uint64_t)(p[i] & 0x7f) << shift;
                shift += 7;
                if (!(p[i++] & 0x80))
                    break;
            }
            if (v > len - i)
                return 0;
            if (key >> 3 == field && memchr(p + i, '\0', (size_t)v) != NULL)
                return 1;
            i += (size_t)v;
            break;
        default:                                /* groups: not in proto3 */
            return 0;
        }
    }
    return 0;
}

/* count as the request gave it: 0 means 1; at most max. */
static int
take_count(uint32_t count, int64_t max, struct api_grpc_args *out,
           const char **code, char *why, size_t whylen)
{
    out->n = count == 0 ? 1 : (int64_t)count;
    if (out->n <= max)
        return 0;
    *code = "invalid_count";
    snprintf(why, whylen, "count must be from 1 to %lld (0 means 1)", (long long)max);
    return 400;
}

static int
take_tag(const char *s, struct api_grpc_args *out, const char **code, char *why,
         size_t whylen)
{
    size_t len = strlen(s);

    if (len >= 1 && len <= TAG_MAX && util_tag_valid(s, len)) {
        memcpy(out->name, s, len + 1);
        out->name_len = len;
        return 0;
    }
    *code = "invalid_biz_tag";
    snprintf(why, whylen, "biz_tag must be 1 to %d characters of [A-Za-z0-9._:-]",
             TAG_MAX);
    return 400;
}

/* The IdEncoding e of a request; strings: the method serves them. */
static int
take_enc(int e, int strings, struct api_grpc_args *out, const char **code,
         char *why, size_t whylen)
{
    _Static_assert(LEAFD__V1__ID_ENCODING__ID_ENCODING_DEC == (int)IDSTR_DEC &&
                   LEAFD__V1__ID_ENCODING__ID_ENCODING_BASE62 == (int)IDSTR_BASE62 &&
                   LEAFD__V1__ID_ENCODING__ID_ENCODING_BASE32 == (int)IDSTR_BASE32,
                   "IdEncoding and enum idstr_enc differ");
    if (e == IDSTR_DEC || (strings && (e == IDSTR_BASE62 || e == IDSTR_BASE32))) {
        out->enc = (enum idstr_enc)e;
        return 0;
    }
    *code = "invalid_encoding";
    snprintf(why, whylen, strings ? "encoding %d is not ID_ENCODING_DEC, "
             "ID_ENCODING_BASE62 or ID_ENCODING_BASE32" : "encoding %d: only "
             "NextSegment and NextSnowflake answer strings", e);
    return 400;
}

/* An ID string of Decode or DecodeSegment, kept unread (api_grpc.c reads
 * it with the config's prefixes). */
static int
take_text(const char *s, struct api_grpc_args *out, const char **code,
          char *why, size_t whylen)
{
    size_t len = strlen(s);

    if (len >= 1 && len <= IDSTR_TEXT_MAX) {
        memcpy(out->text, s, len + 1);
        out->text_len = len;
        return 0;
    }
    *code = "invalid_id";
    snprintf(why, whylen, "text must be an ID string of 1 to %d characters",
             IDSTR_TEXT_MAX);
    return 400;
}

static int
take_code(const char *s, struct api_grpc_args *out, const char **code, char *why,
          size_t whylen)
{
    size_t len = strlen(s);

    if (len >= 1 && len <= SERIAL_CODE_MAX &&
        strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == len) {
        memcpy(out->name, s, len + 1);
        out->name_len = len;
        return 0;
    }
    *code = "invalid_serial_code";
    snprintf(why, whylen, "a serial code is 1 to %d characters of [A-Za-z0-9_-]",
             SERIAL_CODE_MAX);
    return 400;
}

/* The fields of an unpacked request into out: 0, or 400. */
static int
take_fields(enum api_grpc_method m, const ProtobufCMessage *msg,
            const struct api_grpc_limits *lim, struct api_grpc_args *out,
            const char **code, char *why, size_t whylen)
{
    switch (m) {
    case AGM_SEGMENT: {
        const Leafd__V1__SegmentRequest *q = (const Leafd__V1__SegmentRequest *)msg;

        if (take_tag(q->biz_tag, out, code, why, whylen) != 0 ||
            take_enc((int)q->encoding, 1, out, code, why, whylen) != 0)
            return 400;
        return take_count(q->count, lim->count_max, out, code, why, whylen);
    }
    case AGM_SNOWFLAKE:
    case AGM_UUID:
    case AGM_ULID: {
        const Leafd__V1__CountRequest *q = (const Leafd__V1__CountRequest *)msg;

        if (take_enc((int)q->encoding, m == AGM_SNOWFLAKE, out, code, why,
                     whylen) != 0)
            return 400;
        return take_count(q->count, m == AGM_SNOWFLAKE ? lim->sf_count_max :
                          m == AGM_UUID ? lim->uuid_count_max : lim->ulid_count_max,
                          out, code, why, whylen);
    }
    case AGM_SERIAL: {
        const Leafd__V1__SerialRequest *q = (const Leafd__V1__SerialRequest *)msg;

        if (take_code(q->code, out, code, why, whylen) != 0)
            return 400;
        return take_count(q->count, lim->serial_count_max, out, code, why, whylen);
    }
    case AGM_LEASE: {
        const Leafd__V1__LeaseRequest *q = (const Leafd__V1__LeaseRequest *)msg;

        if (take_tag(q->biz_tag, out, code, why, whylen) != 0)
            return 400;
        out->n = q->size;
        if (out->n <= lim->lease_max)
            return 0;
        *code = "invalid_size";
        snprintf(why, whylen, "size must be from 0 (the row's step) to %lld "
                 "(segment.lease_max)", (long long)lim->lease_max);
        return 400;
    }
    case AGM_DECODE: {
        const Leafd__V1__DecodeRequest *q = (const Leafd__V1__DecodeRequest *)msg;

        out->id = q->id;
        if (q->text[0] != '\0') {
            if (q->id == 0)
                return take_text(q->text, out, code, why, whylen);
            *code = "invalid_message";
            snprintf(why, whylen, "give id or text, not both");
            return 400;
        }
        if (q->id >= 0)
            return 0;
        *code = "invalid_id";
        snprintf(why, whylen, "not a snowflake ID: %lld is negative (bit 63 is "
                 "never set)", (long long)q->id);
        return 400;
    }
    case AGM_DECODE_SEGMENT: {
        const Leafd__V1__DecodeSegmentRequest *q =
            (const Leafd__V1__DecodeSegmentRequest *)msg;

        return take_text(q->text, out, code, why, whylen);
    }
    case AGM_HEALTH_CHECK:
    case AGM_HEALTH_WATCH: {
        const Grpc__Health__V1__HealthCheckRequest *q =
            (const Grpc__Health__V1__HealthCheckRequest *)msg;

        out->known_service = q->service[0] == '\0' || strcmp(q->service, SERVICE) == 0;
        return 0;
    }
    case AGM_UNKNOWN:
        break;
    }
    assert(0 && "no such method");
    return 400;
}

int
api_grpc_args_parse(enum api_grpc_method m, const void *body, size_t len,
                    const struct api_grpc_limits *lim, struct api_grpc_args *out,
                    const char **code, char *why, size_t whylen)
{
    struct arena ar;
    ProtobufCAllocator alloc = { arena_alloc, arena_free, &ar };
    ProtobufCMessage *msg;
    int rc;

    assert(m < AGM_UNKNOWN);
    ar.used = 0;
    memset(out, 0, sizeof *out);
    out->method = m;
    msg = protobuf_c_message_unpack(methods[m].request, &alloc, len,
                                    body != NULL ? body : (const void *)"");
    if (msg == NULL) {
        *code = "invalid_message";
        snprintf(why, whylen, "the request is not a valid %s message",
                 methods[m].request->name);
        return 400;
    }
    if ((methods[m].request->n_fields > 0 &&
         methods[m].request->fields[0].id == 1 &&
         methods[m].request->fields[0].type == PROTOBUF_C_TYPE_STRING &&
         field_has_nul(body, len, 1)) ||
        (m == AGM_DECODE && field_has_nul(body, len, 2))) {
        protobuf_c_message_free_unpacked(msg, &alloc);
        *code = "invalid_message";
        snprintf(why, whylen, "a string of the %s message holds a NUL byte",
                 methods[m].request->name);
        return 400;
    }
    rc = take_fields(m, msg, lim, out, code, why, whylen);
    protobuf_c_message_free_unpacked(msg, &alloc);
    return rc;
}

/* ---- status codes ---- */

enum grpc_status
api_grpc_status_of(int http_status, const char *code, int deadline_passed)
{
    switch (http_status) {
    case 200:
        return GRPC_OK;
    case 400:
        return GRPC_INVALID_ARGUMENT;
    case 401:
        return GRPC_UNAUTHENTICATED;
    case 403:
        return GRPC_PERMISSION_DENIED;
    case 404:
        /* A mode this node does not run is a method it does not serve. */
        return strcmp(code, "mode_disabled") == 0 ? GRPC_UNIMPLEMENTED : GRPC_NOT_FOUND;
    case 405:
        return GRPC_UNIMPLEMENTED;
    case 409:
        /* lease_concealed: the request can never succeed for this tag */
        return GRPC_FAILED_PRECONDITION;
    case 413:
        return GRPC_RESOURCE_EXHAUSTED;
    case 503:
        return deadline_passed ? GRPC_DEADLINE_EXCEEDED : GRPC_UNAVAILABLE;
    default:
        return GRPC_INTERNAL;
    }
}

/* ---- packing ---- */

static size_t
pack(const ProtobufCMessage *msg, uint8_t *out, size_t cap)
{
    size_t n = protobuf_c_message_get_packed_size(msg);

    assert(n <= cap);
    (void)cap;
    return protobuf_c_message_pack(msg, out);
}

/* A field: a tag byte and a length or value varint (at most 10 bytes). */
size_t
api_grpc_ids_bound(size_t n)
{
    return 16 + 11 * n;
}

size_t
api_grpc_pack_ids(const int64_t *ids, size_t n, uint8_t *out, size_t cap)
{
    Leafd__V1__IdsReply r = LEAFD__V1__IDS_REPLY__INIT;

    r.n_ids = n;
    r.ids = (int64_t *)ids;                 /* read only by pack */
    return pack(&r.base, out, cap);
}

size_t
api_grpc_strings_bound(size_t n, size_t textlen)
{
    return 16 + 11 * n + textlen;
}

size_t
api_grpc_pack_strings(char **strs, size_t n, uint8_t *out, size_t cap)
{
    Leafd__V1__StringsReply r = LEAFD__V1__STRINGS_REPLY__INIT;

    r.n_ids = n;
    r.ids = strs;
    return pack(&r.base, out, cap);
}

size_t
api_grpc_pack_id_strings(char **strs, size_t n, uint8_t *out, size_t cap)
{
    Leafd__V1__IdsReply r = LEAFD__V1__IDS_REPLY__INIT;

    r.n_strings = n;
    r.strings = strs;
    return pack(&r.base, out, cap);
}

size_t
api_grpc_pack_segment_id(uint64_t id, const char *tag, enum idstr_enc enc,
                         uint8_t *out, size_t cap)
{
    Leafd__V1__SegmentIdReply r = LEAFD__V1__SEGMENT_ID_REPLY__INIT;

    assert(id <= (uint64_t)INT64_MAX);
    r.id = (int64_t)id;
    r.biz_tag = (char *)(tag != NULL ? tag : "");
    r.encoding = (Leafd__V1__IdEncoding)enc;
    return pack(&r.base, out, cap);
}

size_t
api_grpc_lease_bound(size_t n)
{
    return 16 + TAG_MAX + 32 * n;
}

size_t
api_grpc_pack_lease(const char *tag, const int64_t *starts, const int64_t *ends,
                    size_t n, uint8_t *out, size_t cap)
{
    Leafd__V1__LeaseReply r = LEAFD__V1__LEASE_REPLY__INIT;
    Leafd__V1__Range rs[API_GRPC_LEASE_MAX], *ptrs[API_GRPC_LEASE_MAX];

    assert(n <= API_GRPC_LEASE_MAX);
    for (size_t i = 0; i < n; i++) {
        leafd__v1__range__init(&rs[i]);
        rs[i].start = starts[i];
        rs[i].end = ends[i];
        ptrs[i] = &rs[i];
    }
    r.biz_tag = (char *)tag;
    r.n_ranges = n;
    r.ranges = ptrs;
    return pack(&r.base, out, cap);
}

size_t
api_grpc_pack_decode(const struct sfcodec_decoded *d, uint8_t *out, size_t cap)
{
    Leafd__V1__DecodeReply r = LEAFD__V1__DECODE_REPLY__INIT;

    r.id = (int64_t)d->id;
    r.timestamp_ms = d->timestamp_ms;
    r.time = (char *)d->time;
    r.worker_id = d->worker_id;
    r.sequence = d->sequence;
    r.datacenter_id = d->datacenter_id;
    r.has_datacenter = d->has_datacenter != 0;
    return pack(&r.base, out, cap);
}

size_t
api_grpc_pack_health(int serving, uint8_t *out, size_t cap)
{
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;

    r.status = serving ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                       : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    return pack(&r.base, out, cap);
}
