/* fuzz_mysql_url.c: libFuzzer target for MySQL URLs (db_mysql_url_parse:
 * segment.mysql.url(s), leaf.jdbc.url, snowflake.mysql.url): any bytes give
 * a target or a reason, never a crash, and a target it gives is usable: a
 * host within its limit, a port in 1..65535, fields within their limits, a
 * socket path that is absolute.
 *
 * Input: the URL text (NUL-terminated copy of the bytes).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_mysql_url.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct db_mysql_target t;
    char *s = malloc(size + 1), *cause = NULL;

    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    if (db_mysql_url_parse(s, &t, &cause) == -1) {
        FUZZ_ASSERT(cause != NULL && *cause != '\0');
        free(cause);
    } else {
        FUZZ_ASSERT(t.host != NULL && *t.host != '\0' && strlen(t.host) <= 255);
        FUZZ_ASSERT(t.port >= 1 && t.port <= 65535);
        FUZZ_ASSERT(t.user == NULL || strlen(t.user) <= 128);
        FUZZ_ASSERT(t.password == NULL || strlen(t.password) <= 256);
        FUZZ_ASSERT(t.database == NULL || strlen(t.database) <= 64);
        FUZZ_ASSERT(t.socket == NULL || (t.socket[0] == '/' && strlen(t.socket) <= 107));
        db_mysql_target_free(&t);
        FUZZ_ASSERT(t.host == NULL && t.port == 3306);
    }
    free(s);
    return 0;
}
