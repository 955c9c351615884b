/* fuzz_redis_sentinel.c: libFuzzer target for the Sentinel text
 * (workerid_redis_sentinel.c): snowflake.redis.sentinels
 * (workerid_redis_parse_sentinels), snowflake.redis.master_name
 * (workerid_redis_check_master_name) and a Sentinel's answer to
 * get-master-addr-by-name (workerid_redis_master_addr). Any bytes give a
 * result or a reason, never a crash; a list it accepts has 1..16 entries,
 * each a host of 1..255 bytes without ',' or ' ' and a port in 1..65535,
 * none twice; an address it accepts fits the buffer.
 *
 * Input: byte 0 picks the call (0 the list, 1 the name, 2 the answer:
 * host and port split at the first '\n'); the rest is the text.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "workerid_redis.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct workerid_redis_sentinels sv;
    char *s, *cause = NULL, host[64];
    const char *nl;
    int port = 0, rc;

    if (size == 0)
        return 0;
    s = malloc(size);
    if (s == NULL)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    switch (data[0] % 3) {
    case 0:
        if (workerid_redis_parse_sentinels(s, &sv, &cause) == -1) {
            FUZZ_ASSERT(cause != NULL &&
                        strstr(cause, "snowflake.redis.sentinels") != NULL);
            FUZZ_ASSERT(sv.n == 0);
            break;
        }
        FUZZ_ASSERT(sv.n >= 1 && sv.n <= WORKERID_REDIS_SENTINELS_MAX);
        for (int i = 0; i < sv.n; i++) {
            size_t n = strlen(sv.host[i]);
            FUZZ_ASSERT(n >= 1 && n <= 255);
            for (int j = 0; j < i; j++)
                FUZZ_ASSERT(sv.port[j] != sv.port[i] ||
                            strcmp(sv.host[j], sv.host[i]) != 0);
            FUZZ_ASSERT(strpbrk(sv.host[i], ", \t[]") == NULL);
            FUZZ_ASSERT(sv.port[i] >= 1 && sv.port[i] <= 65535);
        }
        workerid_redis_sentinels_free(&sv);
        break;
    case 1:
        rc = workerid_redis_check_master_name(s, &cause);
        FUZZ_ASSERT(rc == 0 ? cause == NULL && strlen(s) >= 1 &&
                              strlen(s) <= WORKERID_REDIS_MASTER_NAME_MAX &&
                              strpbrk(s, " \r\n") == NULL
                            : cause != NULL);
        break;
    default:
        nl = memchr(s, '\n', size - 1);
        if (nl == NULL)
            nl = s + (size - 1);
        rc = workerid_redis_master_addr(s, (size_t)(nl - s),
                                        nl < s + (size - 1) ? nl + 1 : nl,
                                        nl < s + (size - 1) ?
                                        (size_t)(s + (size - 1) - nl - 1) : 0,
                                        host, sizeof host, &port, &cause);
        if (rc == 0) {
            FUZZ_ASSERT(strlen(host) >= 1 && strlen(host) < sizeof host);
            FUZZ_ASSERT(port >= 1 && port <= 65535);
        } else {
            FUZZ_ASSERT(cause != NULL);
        }
        break;
    }
    free(cause);
    free(s);
    return 0;
}
