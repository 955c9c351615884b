/* grpc_frame.c: gRPC message framing, grpc-timeout and grpc-message (see
 * grpc_frame.h).
 */
#include <assert.h>
#include <string.h>

#include "grpc_frame.h"

enum grpc_frame_result
grpc_frame_parse(const unsigned char *buf, size_t len, size_t max,
                 const unsigned char **msg, size_t *msg_len, size_t *used)
{
    uint32_t n;

    if (len < GRPC_FRAME_PREFIX)
        return GRPC_FRAME_MORE;
    if (buf[0] == 1)
        return GRPC_FRAME_COMPRESSED;
    if (buf[0] != 0)
        return GRPC_FRAME_BAD_FLAG;
    n = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 |
        (uint32_t)buf[3] << 8 | buf[4];
    if (n > max)
        return GRPC_FRAME_TOO_LARGE;
    if (len - GRPC_FRAME_PREFIX < n)
        return GRPC_FRAME_MORE;
    *msg = buf + GRPC_FRAME_PREFIX;
    *msg_len = n;
    *used = GRPC_FRAME_PREFIX + (size_t)n;
    return GRPC_FRAME_OK;
}

void
grpc_frame_prefix(unsigned char out[GRPC_FRAME_PREFIX], size_t len)
{
    assert(len <= UINT32_MAX);
    out[0] = 0;
    out[1] = (unsigned char)(len >> 24);
    out[2] = (unsigned char)(len >> 16);
    out[3] = (unsigned char)(len >> 8);
    out[4] = (unsigned char)len;
}

int
grpc_timeout_parse(const char *s, size_t len, int64_t *us)
{
    int64_t v = 0, r;
    size_t i;

    if (len < 2 || len > 9)
        return -1;
    for (i = 0; i + 1 < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    /* v < 10^8, so none of these overflow before the cap. */
    switch (s[len - 1]) {
    case 'H': r = v * 3600 * 1000000; break;
    case 'M': r = v * 60 * 1000000; break;
    case 'S': r = v * 1000000; break;
    case 'm': r = v * 1000; break;
    case 'u': r = v; break;
    case 'n': r = (v + 999) / 1000; break;
    default: return -1;
    }
    if (r > GRPC_TIMEOUT_MAX_US)
        r = GRPC_TIMEOUT_MAX_US;
    *us = r < 1 ? 1 : r;
    return 0;
}

size_t
grpc_message_encode(char *out, size_t cap, const char *msg)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    unsigned char ch;

    assert(cap >= 1);
    for (; *msg != '\0'; msg++) {
        ch = (unsigned char)*msg;
        if (ch >= 0x20 && ch <= 0x7e && ch != '%') {
            if (n + 1 >= cap)
                break;
            out[n++] = (char)ch;
        } else {
            if (n + 3 >= cap)
                break;
            out[n++] = '%';
            out[n++] = hex[ch >> 4];
            out[n++] = hex[ch & 15];
        }
    }
    out[n] = '\0';
    return n;
}
