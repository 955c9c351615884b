/* fuzz_serial_pattern.c: libFuzzer target for the serial time pattern
 * parser (serial_pattern_parse), which reads serial definitions from the
 * configuration. Accepted patterns are made of the known tokens only, each
 * field once, and print exactly width characters, all digits; refusals come
 * with a reason.
 *
 * Input: the pattern text (exactly that many bytes on the heap).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "serial_fmt.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct serial_pattern p;
    struct tzone_tm tm = { 2026, 12, 31, 23, 59, 58, 999, 0 };
    char *text = malloc(size + 1), *cause = NULL;
    char out[SERIAL_PATTERN_MAX + 8];
    int rc;

    memcpy(text, data, size);
    rc = serial_pattern_parse(text, size, &p, &cause);
    if (rc == 0) {
        size_t used = 0;
        char *end;

        FUZZ_ASSERT(cause == NULL);
        FUZZ_ASSERT(size <= SERIAL_PATTERN_MAX);
        /* Only the tokens' letters, and as many as the pattern's width
         * (each token prints as many digits as it has letters). */
        for (size_t i = 0; i < size; i++)
            FUZZ_ASSERT(strchr("yMdHmsS", text[i]) != NULL && text[i] != '\0');
        used = size;
        FUZZ_ASSERT((size_t)p.width == used);
        end = serial_pattern_format(&p, &tm, out);
        FUZZ_ASSERT(end - out == p.width);
        for (int i = 0; i < p.width; i++)
            FUZZ_ASSERT(out[i] >= '0' && out[i] <= '9');
        if (serial_pattern_covers(&p, SERIAL_RESET_DAY))
            FUZZ_ASSERT(serial_pattern_covers(&p, SERIAL_RESET_MONTH));
    } else {
        FUZZ_ASSERT(cause != NULL && cause[0] != '\0');
    }
    free(cause);
    free(text);
    return 0;
}
