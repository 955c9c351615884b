/* fuzz_lease_answer.c: libFuzzer target for the C client's parser of
 * leafd's text lease answer (clients/c/lease_parse.c).
 *
 * Input: the first 3 bytes give want (a 24-bit count), the rest is the
 * answer (exactly that many bytes on the heap). Invariants: on success the
 * ranges are non-empty, increasing, disjoint, add up to want, and printed
 * back as "start end\n" lines they give the input (with its last newline
 * added if it had none); on failure nothing else is promised.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "../clients/c/lease_parse.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct lease_range r[16];
    int64_t want, total = 0;
    char *text, *back;
    size_t blen = 0;
    int n;

    if (size < 3 || size > 4096)
        return 0;
    want = (int64_t)data[0] << 16 | (int64_t)data[1] << 8 | data[2];
    text = malloc(size - 3 + 1);
    memcpy(text, data + 3, size - 3);
    n = lease_parse(text, size - 3, want, r, 16);
    if (n >= 0) {
        FUZZ_ASSERT(n >= 1 && n <= 16);
        back = malloc(n * 42 + 1);
        for (int i = 0; i < n; i++) {
            FUZZ_ASSERT(r[i].start >= 0 && r[i].start < r[i].end);
            FUZZ_ASSERT(i == 0 || r[i].start >= r[i - 1].end);
            total += r[i].end - r[i].start;
            blen += (size_t)sprintf(back + blen, "%lld %lld\n", (long long)r[i].start,
                                    (long long)r[i].end);
        }
        FUZZ_ASSERT(total == want);
        FUZZ_ASSERT(blen == size - 3 || blen == size - 3 + 1);
        FUZZ_ASSERT(memcmp(back, text, size - 3) == 0);
        free(back);
    }
    free(text);
    return 0;
}
