/* grpc_frame.h: the gRPC-over-HTTP/2 wire pieces that are not HTTP/2: the
 * 5-byte length prefix of a message, the grpc-timeout header, the
 * percent-encoding of grpc-message and the status codes of grpc-status.
 *
 * Pure: no allocation, no I/O, no global state. Safe on any bytes (a
 * libFuzzer target drives it).
 */
#ifndef LEAFD_GRPC_FRAME_H
#define LEAFD_GRPC_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define GRPC_FRAME_PREFIX 5

/* The gRPC status codes leafd answers (grpc/doc/statuscodes.md): the
 * transport's refusals (http_h2.c) and the API's (api_grpc_msg.c). */
enum grpc_status {
    GRPC_OK                 = 0,
    GRPC_UNKNOWN            = 2,
    GRPC_INVALID_ARGUMENT   = 3,
    GRPC_DEADLINE_EXCEEDED  = 4,
    GRPC_NOT_FOUND          = 5,
    GRPC_PERMISSION_DENIED  = 7,
    GRPC_RESOURCE_EXHAUSTED = 8,
    GRPC_FAILED_PRECONDITION = 9,
    GRPC_UNIMPLEMENTED      = 12,
    GRPC_INTERNAL           = 13,
    GRPC_UNAVAILABLE        = 14,
    GRPC_UNAUTHENTICATED    = 16
};

enum grpc_frame_result {
    GRPC_FRAME_OK = 0,       /* a whole message: *msg, *msg_len, *used */
    GRPC_FRAME_MORE,         /* need more bytes (len < 5 or < 5 + length) */
    GRPC_FRAME_COMPRESSED,   /* the compressed flag is set */
    GRPC_FRAME_BAD_FLAG,     /* a flag byte other than 0 or 1 */
    GRPC_FRAME_TOO_LARGE,    /* the prefix announces more than max bytes */
};

/* One length-prefixed message at buf[0..len): a flag byte, a 4-byte
 * big-endian length, then the message. The prefix alone decides
 * COMPRESSED, BAD_FLAG and TOO_LARGE, so a caller can refuse a message
 * before it arrives. On OK, *msg points into buf, and *used =
 * GRPC_FRAME_PREFIX + *msg_len. */
enum grpc_frame_result grpc_frame_parse(const unsigned char *buf, size_t len,
                                        size_t max, const unsigned char **msg,
                                        size_t *msg_len, size_t *used);

/* The prefix of an uncompressed message of len bytes (len < 2^32). */
void grpc_frame_prefix(unsigned char out[GRPC_FRAME_PREFIX], size_t len);

/* GRPC_TIMEOUT_MAX_US caps a parsed timeout (99999999 hours would not fit
 * in microseconds). */
#define GRPC_TIMEOUT_MAX_US (INT64_C(100000000) * 1000000)

/* grpc-timeout: 1 to 8 ASCII digits, then one unit (H M S m u n). Sets
 * *us (at least 1: a timeout of 0 or of under a microsecond has passed
 * already, and 0 means "no timeout" to callers), capped at
 * GRPC_TIMEOUT_MAX_US. 0, or -1 when malformed. */
int grpc_timeout_parse(const char *s, size_t len, int64_t *us);

/* grpc-message: percent-encode msg (bytes outside 0x20..0x7e, and '%') into
 * out[0..cap), NUL-terminated, cutting it at a whole character when it does
 * not fit. Returns the length written. cap >= 1. */
size_t grpc_message_encode(char *out, size_t cap, const char *msg);

#endif
