/* fuzz.h: what every libFuzzer target here shares. */
#ifndef LEAFD_FUZZ_H
#define LEAFD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* An invariant of the code under test: a failure names the target's file
 * and line and aborts, which libFuzzer reports as a crash with the input. */
#define FUZZ_ASSERT(c)                                                       \
    do {                                                                     \
        if (!(c)) {                                                          \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__,       \
                    __LINE__, #c);                                           \
            abort();                                                         \
        }                                                                    \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
