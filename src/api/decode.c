/* decode.c: an ID's kind by its form (see decode.h). */
#include <string.h>

#include "decode.h"
#include "sfconfig.h"
#include "snowflake.h"
#include "ulid.h"
#include "util.h"
#include "uuid7.h"

#define DECODE_MAX 64               /* longer than any ID of any kind */

int
decode_any(const struct config *cfg, const struct snowflake *sf,
           const char *x, size_t len, struct sbuf *out, char **cause)
{
    char id[DECODE_MAX + 1];
    size_t digits;

    if (len > DECODE_MAX || memchr(x, '\0', len) != NULL) {
        *cause = xasprintf("not an ID: a snowflake ID is at most 19 digits, a "
                           "UUID 36 characters, a ULID 26");
        return -1;
    }
    memcpy(id, x, len);
    id[len] = '\0';
    digits = strspn(id, "0123456789");
    if (len == UUID7_TEXT_LEN && strchr(id, '-') != NULL) {
        struct uuid7 u;
        struct uuid7_decoded d;

        if (uuid7_parse(id, len, &u, cause) == -1)
            return -1;
        uuid7_decode(&u, &d);
        uuid7_decoded_json(&u, &d, out);
        return 0;
    }
    if (len == ULID_TEXT_LEN && digits != len) {
        struct ulid u;

        if (ulid_parse(id, len, &u, cause) == -1)
            return -1;
        ulid_decoded_json(&u, out);
        return 0;
    }
    if (sf != NULL)
        return snowflake_decode_json(sf, id, len, 0, out, cause);
    return sfconfig_decode_cli(cfg, id, 0, out, cause);
}
