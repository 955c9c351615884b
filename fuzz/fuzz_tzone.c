/* fuzz_tzone.c: libFuzzer target for the TZif reader (tzone_parse), which
 * reads files named by serial definitions: any bytes must give a zone or a
 * reason, never a crash, and a zone it gives must answer every query with
 * an offset within ±26 h and calendar fields in range.
 *
 * Input: a TZif image (the seeds are real zone files).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tzone.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t probes[] = {
        -4102444800000LL, -1, 0, 1700000000000LL, 2145916800000LL,
        4102444800000LL, 253402300799000LL,
    };
    char *cause = NULL;
    struct tzone *z = tzone_parse(data, size, "fuzz", &cause);

    if (z == NULL) {
        FUZZ_ASSERT(cause != NULL && cause[0] != '\0');
        free(cause);
        return 0;
    }
    FUZZ_ASSERT(cause == NULL);
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        struct tzone_tm tm;

        tzone_local(z, probes[i], &tm);
        FUZZ_ASSERT(tm.utoff >= -26 * 3600 && tm.utoff <= 26 * 3600);
        FUZZ_ASSERT(tm.month >= 1 && tm.month <= 12);
        FUZZ_ASSERT(tm.day >= 1 && tm.day <= 31);
        FUZZ_ASSERT(tm.hour >= 0 && tm.hour < 24 && tm.min >= 0 &&
                    tm.min < 60 && tm.sec >= 0 && tm.sec < 60);
    }
    tzone_free(z);
    return 0;
}
