/* fuzz_redis_url.c: libFuzzer target for snowflake.redis.url
 * (workerid_redis_parse_url): any bytes give a target or a reason, never a
 * crash, and a target it gives is usable: a host or an absolute socket
 * path, a port in 1..65535, a database number in 0..1000000.
 *
 * Input: the URL text (NUL-terminated copy of the bytes).
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
    struct workerid_redis_url u;
    char *s = malloc(size + 1), *cause = NULL;

    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    if (workerid_redis_parse_url(s, &u, &cause) == -1) {
        FUZZ_ASSERT(cause != NULL && strstr(cause, "snowflake.redis.url"));
        free(cause);
    } else {
        FUZZ_ASSERT((u.host != NULL && *u.host != '\0') ^
                    (u.path != NULL && *u.path == '/'));
        FUZZ_ASSERT(u.port >= 1 && u.port <= 65535);
        FUZZ_ASSERT(u.db >= 0 && u.db <= 1000000);
        workerid_redis_url_free(&u);
    }
    free(s);
    return 0;
}
