/* fuzz_resp_parse.c: libFuzzer target for the RESP request parser, which
 * reads whatever a client sends to the Redis-protocol listener.
 *
 * Checked on every input, for every command found as the input is consumed
 * the way the server consumes it (one command after another):
 *  - used is within the input, and a command's arguments lie within the
 *    input or the scratch buffer, within the limits;
 *  - every proper prefix of a command that parsed needs more input (so a
 *    command split across reads parses the same);
 *  - a multibulk command, written out again, parses to the same arguments;
 *  - every refusal has a reason in Redis's wording.
 *
 * Input: raw bytes as a client would send them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "resp_parse.h"

static const struct resp_limits lim = { 16, 512, 1024 };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    static char scratch[1024], scratch2[1024];
    size_t pos = 0;

    memcpy(buf, data, size);
    for (int rounds = 0; rounds < 64 && pos < size; rounds++) {
        struct resp_cmd cmd, again;
        size_t used = 0, used2;
        const char *err = NULL, *err2;
        enum resp_parse_result r;

        r = resp_parse(buf + pos, size - pos, &lim, scratch, sizeof scratch,
                       &cmd, &used, &err);
        if (r == RESP_PARSE_MORE)
            break;
        if (r == RESP_PARSE_ERROR) {
            FUZZ_ASSERT(err != NULL && strncmp(err, "Protocol error: ", 16) == 0);
            break;
        }
        FUZZ_ASSERT(used >= 1 && used <= size - pos);
        if (r == RESP_PARSE_OK) {
            FUZZ_ASSERT(cmd.argc >= 1 && cmd.argc <= lim.max_args);
            for (size_t i = 0; i < cmd.argc; i++) {
                const char *a = cmd.argv[i];
                int in_buf = a >= buf + pos && a + cmd.argl[i] <= buf + pos + used;
                int in_scr = a >= scratch && a + cmd.argl[i] <= scratch + sizeof scratch;

                FUZZ_ASSERT(in_buf || in_scr);
                FUZZ_ASSERT(cmd.argl[i] <= (cmd.is_inline ? lim.max_inline : lim.max_bulk));
            }
            for (size_t k = 0; k < used; k++) {
                enum resp_parse_result rp;

                rp = resp_parse(buf + pos, k, &lim, scratch2, sizeof scratch2,
                                &again, &used2, &err2);
                FUZZ_ASSERT(rp == RESP_PARSE_MORE);
            }
            if (!cmd.is_inline) {
                char out[16 * 540 + 32];
                size_t o = (size_t)snprintf(out, sizeof out, "*%zu\r\n", cmd.argc);

                for (size_t i = 0; i < cmd.argc; i++) {
                    o += (size_t)snprintf(out + o, sizeof out - o, "$%zu\r\n", cmd.argl[i]);
                    memcpy(out + o, cmd.argv[i], cmd.argl[i]);
                    o += cmd.argl[i];
                    memcpy(out + o, "\r\n", 2);
                    o += 2;
                }
                FUZZ_ASSERT(resp_parse(out, o, &lim, scratch2, sizeof scratch2,
                                       &again, &used2, &err2) == RESP_PARSE_OK);
                FUZZ_ASSERT(used2 == o && again.argc == cmd.argc);
                for (size_t i = 0; i < cmd.argc; i++)
                    FUZZ_ASSERT(again.argl[i] == cmd.argl[i] &&
                                memcmp(again.argv[i], cmd.argv[i], cmd.argl[i]) == 0);
            }
        }
        pos += used;
    }
    free(buf);
    return 0;
}
