/* fuzz_mc_parse.c: libFuzzer target for the memcached text protocol parser,
 * which reads whatever a client sends to the memcached listener.
 *
 * Checked on every input, for every line found as the input is consumed the
 * way the server consumes it (a line, then a storage command's data block):
 *  - used is within the input and ends at a '\n', and every token lies in
 *    the line, is non-empty and holds no space;
 *  - every proper prefix of a line that parsed needs more input (so a line
 *    split across reads parses the same);
 *  - a get's keys are 1 to max_keys keys of 1 to 250 bytes with no control
 *    byte; a storage block is within the limit;
 *  - every refusal and every malformed command has a reason.
 *
 * Input: raw bytes as a client would send them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "mc_parse.h"

static const struct mc_limits lim = { 1024, 16, 512 };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    size_t pos = 0;

    memcpy(buf, data, size);
    for (int rounds = 0; rounds < 64 && pos < size; rounds++) {
        struct mc_cmd cmd, again;
        size_t used = 0, used2;
        const char *err = NULL, *err2;
        enum mc_parse_result r;

        r = mc_parse(buf + pos, size - pos, &lim, &cmd, &used, &err);
        if (r == MC_PARSE_MORE) {
            FUZZ_ASSERT(size - pos < lim.max_line);
            break;
        }
        if (r == MC_PARSE_ERROR) {
            FUZZ_ASSERT(err != NULL && err[0] != '\0');
            break;
        }
        FUZZ_ASSERT(used >= 1 && used <= size - pos && used <= lim.max_line);
        FUZZ_ASSERT(buf[pos + used - 1] == '\n');
        FUZZ_ASSERT(memchr(buf + pos, '\n', used - 1) == NULL);
        FUZZ_ASSERT(cmd.ntok <= MC_TOKENS_MAX);
        for (size_t i = 0; i < cmd.ntok; i++) {
            FUZZ_ASSERT(cmd.len[i] >= 1 && cmd.off[i] + cmd.len[i] < used);
            FUZZ_ASSERT(memchr(buf + pos + cmd.off[i], ' ', cmd.len[i]) == NULL);
        }
        FUZZ_ASSERT(cmd.kind != MC_BAD || cmd.err != NULL);
        if (cmd.kind == MC_GET) {
            FUZZ_ASSERT(cmd.nkeys >= 1 && cmd.nkeys <= lim.max_keys &&
                        cmd.nkeys == cmd.ntok - 1);
            for (size_t i = 1; i <= cmd.nkeys; i++) {
                FUZZ_ASSERT(cmd.len[i] <= MC_KEY_MAX);
                for (size_t k = 0; k < cmd.len[i]; k++)
                    FUZZ_ASSERT((unsigned char)buf[pos + cmd.off[i] + k] > 0x20 &&
                                (unsigned char)buf[pos + cmd.off[i] + k] != 0x7f);
            }
        } else {
            FUZZ_ASSERT(cmd.nkeys == 0);
        }
        FUZZ_ASSERT(cmd.kind == MC_STORE ? cmd.data_len >= 2 &&
                    cmd.data_len <= lim.max_data + 2 : cmd.data_len == 0);
        for (size_t k = 0; k < used; k++)
            FUZZ_ASSERT(mc_parse(buf + pos, k, &lim, &again, &used2, &err2) ==
                        MC_PARSE_MORE);
        pos += used;
        pos += (size_t)cmd.data_len < size - pos ? (size_t)cmd.data_len : size - pos;
    }
    free(buf);
    return 0;
}
