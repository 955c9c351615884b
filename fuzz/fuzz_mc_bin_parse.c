/* fuzz_mc_bin_parse.c: libFuzzer target for the memcached binary protocol
 * frame parser, which reads whatever a client sends to the memcached
 * listener once its first byte was 0x80.
 *
 * Checked on every input, for every frame found as the input is consumed
 * the way the server consumes it (a frame's header, or the whole frame,
 * then a refused frame's body skipped):
 *  - used is the header (refused, unknown) or the whole frame (served), and
 *    within the input; a refused frame's data_len is its body;
 *  - a get has exactly one key, of 1 to 250 bytes, inside the frame; every
 *    served frame is at most 24 + 250 bytes; a skipped body is within the
 *    limit (value at most max_data);
 *  - every proper prefix of what was consumed needs more input (so a frame
 *    split across reads parses the same);
 *  - an error has a reason, and a status (invalid arguments or too large)
 *    unless the magic byte is wrong, where it has none;
 *  - the response header written for the frame decodes to the same fields.
 *
 * Input: raw bytes as a client would send them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "mc_bin_parse.h"

static const struct mc_limits lim = { 1024, 16, 512 };

static uint32_t
be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    size_t pos = 0;

    memcpy(buf, data, size);
    for (int rounds = 0; rounds < 64 && pos < size; rounds++) {
        const unsigned char *f = (const unsigned char *)buf + pos;
        struct mc_cmd cmd, again;
        size_t used = 0, used2, avail = size - pos;
        uint16_t st = 0xffff, st2;
        const char *err = NULL, *err2;
        enum mc_parse_result r;
        unsigned char h[MC_BIN_HEADER];

        r = mc_bin_parse(buf + pos, avail, &lim, &cmd, &used, &st, &err);
        if (r == MC_PARSE_MORE) {
            FUZZ_ASSERT(f[0] == MC_BIN_REQ_MAGIC);
            FUZZ_ASSERT(avail < MC_BIN_HEADER ||
                        avail < MC_BIN_HEADER + MC_KEY_MAX);
            break;
        }
        if (r == MC_PARSE_ERROR) {
            FUZZ_ASSERT(err != NULL && err[0] != '\0');
            if (f[0] != MC_BIN_REQ_MAGIC)
                FUZZ_ASSERT(st == 0);
            else
                FUZZ_ASSERT(avail >= MC_BIN_HEADER &&
                            (st == MC_BIN_EINVAL || st == MC_BIN_E2BIG) &&
                            cmd.opcode == f[1] && cmd.opaque == be32(f + 12));
            break;
        }
        FUZZ_ASSERT(r == MC_PARSE_OK && f[0] == MC_BIN_REQ_MAGIC && cmd.binary);
        FUZZ_ASSERT(cmd.opcode == f[1] && cmd.opaque == be32(f + 12));
        {
            uint32_t keylen = (uint32_t)f[2] << 8 | f[3], extlen = f[4];
            uint32_t bodylen = be32(f + 8);

            FUZZ_ASSERT(keylen <= MC_KEY_MAX && extlen + keylen <= bodylen);
            FUZZ_ASSERT(bodylen - extlen - keylen <= lim.max_data);
            if (cmd.kind == MC_REFUSED || cmd.kind == MC_UNKNOWN) {
                FUZZ_ASSERT(used == MC_BIN_HEADER && cmd.data_len == bodylen);
                FUZZ_ASSERT((cmd.kind == MC_UNKNOWN) == (cmd.name == NULL));
            } else {
                FUZZ_ASSERT(cmd.name != NULL && cmd.data_len == 0);
                FUZZ_ASSERT(used == MC_BIN_HEADER + bodylen && used <= avail);
                FUZZ_ASSERT(used <= MC_BIN_HEADER + MC_KEY_MAX && extlen == 0);
                FUZZ_ASSERT(cmd.ntok == (keylen > 0 ? 2u : 1u));
                if (keylen > 0)
                    FUZZ_ASSERT(cmd.off[1] == MC_BIN_HEADER && cmd.len[1] == keylen);
                FUZZ_ASSERT(cmd.kind == MC_GET ? cmd.nkeys == 1 && keylen >= 1 &&
                            bodylen == keylen : cmd.nkeys == 0);
                FUZZ_ASSERT(cmd.kind == MC_GET || cmd.kind == MC_STATS ||
                            bodylen == 0);
            }
        }
        for (size_t k = 0; k < used; k++)
            FUZZ_ASSERT(mc_bin_parse(buf + pos, k, &lim, &again, &used2, &st2,
                                     &err2) == MC_PARSE_MORE);
        mc_bin_header(h, cmd.opcode, cmd.opaque, (uint16_t)cmd.kind, 4,
                      (uint16_t)cmd.len[1], 4 + (uint32_t)used, cmd.data_len);
        FUZZ_ASSERT(h[0] == MC_BIN_RES_MAGIC && h[1] == cmd.opcode && h[4] == 4 &&
                    be32(h + 12) == cmd.opaque && be32(h + 8) == 4 + used &&
                    ((unsigned)h[6] << 8 | h[7]) == (unsigned)cmd.kind &&
                    ((unsigned)h[2] << 8 | h[3]) == cmd.len[1] &&
                    ((uint64_t)be32(h + 16) << 32 | be32(h + 20)) == cmd.data_len);
        pos += used;
        pos += (size_t)cmd.data_len < size - pos ? (size_t)cmd.data_len : size - pos;
    }
    free(buf);
    return 0;
}
