/* api_grpc_msg.h: the gRPC service's messages without the server: which
 * method a path names, a request message unpacked (protobuf-c, the schema
 * in proto/) and checked as the HTTP routes check their query, the replies
 * packed, and leafd's refusals as gRPC status codes. Pure (no I/O, no
 * global state), so fuzz/fuzz_grpc_msg.c and the unit tests take it alone.
 * Any thread.
 */
#ifndef LEAFD_API_GRPC_MSG_H
#define LEAFD_API_GRPC_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "grpc_frame.h"
#include "idstr.h"
#include "util.h"

enum api_grpc_method {
    AGM_SEGMENT, AGM_SNOWFLAKE, AGM_UUID, AGM_ULID, AGM_SERIAL, AGM_LEASE,
    AGM_DECODE, AGM_DECODE_SEGMENT, AGM_HEALTH_CHECK, AGM_HEALTH_WATCH, AGM_UNKNOWN
};

/* The largest counts a request may ask for (the config's *.count_max and
 * segment.lease_max). */
struct api_grpc_limits {
    int64_t count_max, sf_count_max, uuid_count_max, ulid_count_max;
    int64_t serial_count_max, lease_max;
};

/* A request, unpacked and checked. */
struct api_grpc_args {
    enum api_grpc_method method;
    char    name[TAG_MAX + 1];   /* biz_tag or serial code (valid, NUL-ended) */
    size_t  name_len;
    int64_t n;                   /* count >= 1, or lease size (0: the step) */
    int64_t id;                  /* Decode: >= 0 */
    int     known_service;       /* Health: "" or "leafd.v1.IdService" */
    enum idstr_enc enc;          /* NextSegment, NextSnowflake: the encoding */
    /* Decode, DecodeSegment: the ID as a string (NUL-ended; no NUL
     * inside), unread; text_len 0: none (Decode reads id) */
    char    text[IDSTR_TEXT_MAX + 1];
    size_t  text_len;
};

/* The method "/<package>.<Service>/<Method>" names (exact), or AGM_UNKNOWN. */
enum api_grpc_method api_grpc_method_find(const char *path, size_t len);
const char *api_grpc_method_name(enum api_grpc_method m);

/* Unpack body (len bytes, the message without its 5-byte prefix) as m's
 * request and check it. Unknown fields are skipped, as protobuf does; a
 * count of 0 means 1. Returns 0 with *out filled, or 400 with *code (a
 * static string: invalid_message, invalid_biz_tag, invalid_count, ...)
 * and the reason in why. */
int api_grpc_args_parse(enum api_grpc_method m, const void *body, size_t len,
                        const struct api_grpc_limits *lim, struct api_grpc_args *out,
                        const char **code, char *why, size_t whylen);

/* A refusal as a gRPC status: leafd's HTTP status and error code; the
 * request's grpc-timeout has run out (a 503 then is DEADLINE_EXCEEDED). */
enum grpc_status api_grpc_status_of(int http_status, const char *code,
                                    int deadline_passed);

/* Replies, packed into out (cap bytes; the *_bound functions give a cap
 * that always suffices). Each returns the packed length. */
size_t api_grpc_ids_bound(size_t n);
size_t api_grpc_pack_ids(const int64_t *ids, size_t n, uint8_t *out, size_t cap);
/* IDs as strings: an IdsReply's strings (strs[i] NUL-ended; the bound is
 * api_grpc_strings_bound's). */
size_t api_grpc_pack_id_strings(char **strs, size_t n, uint8_t *out, size_t cap);
/* DecodeSegment's reply: tag NULL for none. */
#define API_GRPC_SEGMENT_ID_MAX (32 + TAG_MAX)
size_t api_grpc_pack_segment_id(uint64_t id, const char *tag, enum idstr_enc enc,
                                uint8_t *out, size_t cap);
/* strs[i], lens given by the texts (each NUL-ended). */
size_t api_grpc_strings_bound(size_t n, size_t textlen);
size_t api_grpc_pack_strings(char **strs, size_t n, uint8_t *out, size_t cap);
/* Ranges [starts[i], ends[i]), n <= API_GRPC_LEASE_MAX. */
#define API_GRPC_LEASE_MAX 64
size_t api_grpc_lease_bound(size_t n);
size_t api_grpc_pack_lease(const char *tag, const int64_t *starts,
                           const int64_t *ends, size_t n, uint8_t *out, size_t cap);
struct sfcodec_decoded;
#define API_GRPC_DECODE_MAX 128
size_t api_grpc_pack_decode(const struct sfcodec_decoded *d, uint8_t *out, size_t cap);
#define API_GRPC_HEALTH_MAX 8
size_t api_grpc_pack_health(int serving, uint8_t *out, size_t cap);

#endif
