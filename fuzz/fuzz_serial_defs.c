/* fuzz_serial_defs.c: libFuzzer target for the serial definitions parser
 * (serials_new over serial.<code>.<field> lines, serial.h).
 *
 * The input is a config text loaded as a file would be; the first byte
 * turns snowflake mode on or off (so both sources are reached). The result
 * is checked: a failure comes with a cause that names a place, a success
 * without one, and every definition accepted keeps the rules serials_new
 * promises (a code of [A-Za-z0-9_-], digits 1..18, a step of at least
 * serial.count_max, a segment pattern that prints its reset period, a
 * snowflake pattern down to the millisecond). Zone names read
 * /usr/share/zoneinfo like the server does. LeakSanitizer checks the frees.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "config.h"
#include "serial.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config cfg;
    struct serials *s;
    char *text, *cause = NULL;

    if (size < 1 || size > 8192)
        return 0;
    text = malloc(size);
    if (text == NULL)
        abort();
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    config_defaults(&cfg);
    cfg.from_file = 1;
    cfg.snowflake_enable = data[0] & 1;
    if (config_load_string(&cfg, "f.conf", text, &cause) == -1) {
        FUZZ_ASSERT(cause != NULL);
        free(cause);
        goto done;
    }
    s = serials_new(&cfg, NULL, &cause);
    if (s == NULL) {
        FUZZ_ASSERT(cause != NULL && strncmp(cause, "f.conf:", 7) == 0);
        free(cause);
        goto done;
    }
    FUZZ_ASSERT(cause == NULL);
    for (size_t i = 0; i < serials_count(s); i++) {
        const struct serial_def *d = serials_def(s, i);

        FUZZ_ASSERT(d->code[0] != '\0' &&
                    strspn(d->code, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
                           "qrstuvwxyz0123456789_-") == strlen(d->code));
        FUZZ_ASSERT(serials_find(s, d->code, strlen(d->code)) == (long)i);
        FUZZ_ASSERT(d->zone != NULL);
        if (d->source == SERIAL_SRC_SNOWFLAKE) {
            FUZZ_ASSERT(cfg.snowflake_enable && d->worker_id);
            FUZZ_ASSERT(serial_pattern_has_ms(&d->pattern));
        } else {
            FUZZ_ASSERT(d->digits >= 1 && d->digits <= SERIAL_DIGITS_MAX);
            FUZZ_ASSERT(d->step >= cfg.serial_count_max);
            FUZZ_ASSERT(serial_pattern_covers(&d->pattern, d->reset));
        }
        FUZZ_ASSERT(strlen(d->prefix) + (size_t)d->pattern.width + 7 + 19 <=
                    SERIAL_TEXT_MAX);
    }
    serials_free(s);
done:
    config_free(&cfg);
    free(text);
    return 0;
}
