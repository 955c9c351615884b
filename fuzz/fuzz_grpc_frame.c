/* fuzz_grpc_frame.c: libFuzzer target for grpc_frame.c, which reads what a
 * gRPC client sends: the length-prefixed request message and the
 * grpc-timeout header, and encodes grpc-message.
 *
 * Checked on every input:
 *  - a parsed message lies within the input, is at most max bytes, and its
 *    prefix written again is the input's; MORE means the input is short;
 *  - a parsed timeout is 1..GRPC_TIMEOUT_MAX_US and came from 1-8 digits
 *    and a unit;
 *  - an encoded message is printable ASCII, fits, and decodes to a prefix
 *    of the input.
 *
 * Input: the first two bytes pick the message limit; the rest is the bytes.
 */
#include <string.h>

#include "fuzz.h"
#include "grpc_frame.h"

static int
hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    FUZZ_ASSERT(ch >= 'A' && ch <= 'F');
    return ch - 'A' + 10;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const unsigned char *m = NULL;
    unsigned char pre[GRPC_FRAME_PREFIX];
    size_t max, mlen = 0, used = 0, n, i, j;
    enum grpc_frame_result r;
    char out[64], *s;
    int64_t us = 0;

    if (size < 2)
        return 0;
    max = (size_t)data[0] << 8 | data[1];
    data += 2;
    size -= 2;

    r = grpc_frame_parse(data, size, max, &m, &mlen, &used);
    switch (r) {
    case GRPC_FRAME_OK:
        FUZZ_ASSERT(mlen <= max && used == GRPC_FRAME_PREFIX + mlen);
        FUZZ_ASSERT(used <= size && m == data + GRPC_FRAME_PREFIX);
        grpc_frame_prefix(pre, mlen);
        FUZZ_ASSERT(memcmp(pre, data, GRPC_FRAME_PREFIX) == 0);
        break;
    case GRPC_FRAME_MORE:
        FUZZ_ASSERT(size < GRPC_FRAME_PREFIX || data[0] == 0);
        break;
    case GRPC_FRAME_COMPRESSED:
        FUZZ_ASSERT(size >= GRPC_FRAME_PREFIX && data[0] == 1);
        break;
    case GRPC_FRAME_BAD_FLAG:
        FUZZ_ASSERT(size >= GRPC_FRAME_PREFIX && data[0] > 1);
        break;
    case GRPC_FRAME_TOO_LARGE:
        FUZZ_ASSERT(size >= GRPC_FRAME_PREFIX && data[0] == 0);
        break;
    }

    if (grpc_timeout_parse((const char *)data, size, &us) == 0) {
        FUZZ_ASSERT(us >= 1 && us <= GRPC_TIMEOUT_MAX_US);
        FUZZ_ASSERT(size >= 2 && size <= 9);
        for (i = 0; i + 1 < size; i++)
            FUZZ_ASSERT(data[i] >= '0' && data[i] <= '9');
        FUZZ_ASSERT(strchr("HMSmun", data[size - 1]) != NULL &&
                    data[size - 1] != '\0');
    }

    s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    n = grpc_message_encode(out, sizeof out, s);
    FUZZ_ASSERT(n < sizeof out && out[n] == '\0' && strlen(out) == n);
    for (i = 0, j = 0; i < n; j++) {
        FUZZ_ASSERT(out[i] >= 0x20 && out[i] <= 0x7e);
        if (out[i] == '%') {
            FUZZ_ASSERT(i + 2 < n);
            FUZZ_ASSERT((unsigned char)s[j] ==
                        (hexval(out[i + 1]) << 4 | hexval(out[i + 2])));
            i += 3;
        } else {
            FUZZ_ASSERT(out[i] == s[j]);
            i++;
        }
    }
    FUZZ_ASSERT(j <= strlen(s));
    free(s);
    return 0;
}
