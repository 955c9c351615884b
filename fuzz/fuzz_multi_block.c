/* fuzz_multi_block.c: libFuzzer target for the pure parts of several
 * databases (multi_block.h).
 *
 * The first 40 bytes are five int64 values (db_count, db_index, block_size,
 * since_block, from) and a step; for each database of the set the range
 * store_block_start gives must lie in a block that database owns, at or
 * above from, 1 and since_block's start, and inside one block; the ranges
 * of two databases never overlap. The rest of the input is a URL list for
 * store_multi_split, whose pieces must be non-empty, have no blank at
 * either end, and be at most as many as the limit.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "multi_block.h"

static int64_t
take(const uint8_t **p, size_t *n)
{
    int64_t v = 0;
    size_t k = *n < 8 ? *n : 8;

    memcpy(&v, *p, k);
    *p += k;
    *n -= k;
    return v;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data;
    size_t n = size;
    struct multi_meta mm = { 0 };
    int64_t from, step, start[8], cnt;

    cnt = 1 + (int64_t)((uint64_t)take(&p, &n) % 8);
    mm.block_size = 1 + (int64_t)((uint64_t)take(&p, &n) % ((uint64_t)1 << 40));
    mm.since_block = (int64_t)((uint64_t)take(&p, &n) % ((uint64_t)1 << 30));
    from = take(&p, &n);
    step = 1 + (int64_t)((uint64_t)take(&p, &n) % ((uint64_t)mm.block_size + 8));
    mm.db_count = cnt;
    for (int64_t r = 0; r < cnt; r++) {
        int64_t s, k;

        mm.db_index = r;
        s = start[r] = store_block_start(&mm, from, step);
        if (s < 0)
            continue;
        FUZZ_ASSERT(step <= mm.block_size);
        FUZZ_ASSERT(s >= 1 && s >= from);
        FUZZ_ASSERT(s / mm.block_size >= mm.since_block);
        k = s / mm.block_size;
        FUZZ_ASSERT(k % cnt == r);
        FUZZ_ASSERT(s <= INT64_MAX - step);
        FUZZ_ASSERT((s + step - 1) / mm.block_size == k);
        FUZZ_ASSERT(store_block_owns(&mm, s, step));
        for (int64_t q = 0; q < r; q++)
            if (start[q] >= 0)
                FUZZ_ASSERT(start[q] + step <= s || s + step <= start[q]);
    }
    {
        char *list = malloc(n + 1), *urls[8], *cause = NULL;
        int got;

        memcpy(list, p, n);
        list[n] = '\0';
        got = store_multi_split(list, urls, 8, &cause);
        FUZZ_ASSERT(got <= 8);
        FUZZ_ASSERT((got < 0) == (cause != NULL));
        for (int i = 0; i < got; i++) {
            size_t len = strlen(urls[i]);

            FUZZ_ASSERT(len > 0 && strchr(urls[i], ',') == NULL);
            FUZZ_ASSERT(urls[i][0] != ' ' && urls[i][len - 1] != ' ');
            free(urls[i]);
        }
        free(cause);
        free(list);
    }
    return 0;
}
