/* fuzz_serial_zonerec.c: libFuzzer target for the serial zones record a
 * worker-ID store keeps with each worker ID (szrec_parse, szrec_format;
 * links serial_zonerec.o and util.o alone): any bytes are parsed or
 * refused with a reason, never a crash; what is parsed has at most
 * SZREC_MAX entries of valid, distinct shapes and bounded ms, and written
 * back with szrec_format it parses to the same entries, within
 * SZREC_TEXT_MAX.
 *
 * Input: the record's bytes, as a store hands them over.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "serial_zonerec.h"

static struct szrec_entry e[SZREC_MAX], f[SZREC_MAX];

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = NULL;
    char *text;
    int n, m;

    n = szrec_parse((const char *)data, size, e, &why);
    if (n == -1) {
        FUZZ_ASSERT(why != NULL && *why != '\0');
        return 0;
    }
    FUZZ_ASSERT(n >= 0 && n <= SZREC_MAX);
    FUZZ_ASSERT(size <= SZREC_TEXT_MAX);
    for (int k = 0; k < n; k++) {
        size_t len = strlen(e[k].shape);

        FUZZ_ASSERT(len > 0 && len < SERIAL_ROW_SHAPE_MAX);
        FUZZ_ASSERT(strspn(e[k].shape, "abcdefghijklmnopqrstuvwxyz"
                           "0123456789._-") == len);
        FUZZ_ASSERT(e[k].ahead_ms <= SZREC_AHEAD_MAX &&
                    e[k].ahead_ms >= -SZREC_AHEAD_MAX);
        for (int j = 0; j < k; j++)
            FUZZ_ASSERT(strcmp(e[j].shape, e[k].shape) != 0);
    }
    text = szrec_format(e, n);
    FUZZ_ASSERT(strlen(text) <= SZREC_TEXT_MAX);
    m = szrec_parse(text, strlen(text), f, &why);
    FUZZ_ASSERT(m == n);
    for (int k = 0; k < n; k++) {
        FUZZ_ASSERT(strcmp(e[k].shape, f[k].shape) == 0);
        FUZZ_ASSERT(e[k].ahead_ms == f[k].ahead_ms);
    }
    free(text);
    return 0;
}
