/* lease_parse.h: the client's parser of leafd's text lease answer
 * ("start end\n" per range), apart from libcurl so it can be fuzzed alone
 * (fuzz/fuzz_lease_answer.c). Pure: no allocation, no I/O; any thread. */
#ifndef LEAFD_LEASE_PARSE_H
#define LEAFD_LEASE_PARSE_H

#include <stddef.h>
#include <stdint.h>

struct lease_range {
    int64_t start, end;            /* [start, end) */
};

/* Parse s[0..len): lines "<start> <end>" of plain decimals (no sign, no
 * leading zero, below 2^63), each ending in '\n' (the last may not), with
 * 0 <= start < end, increasing and disjoint, that add up to exactly want
 * IDs; at most max of them. Returns how many were written to out, or -1
 * when anything differs (nothing in out may be used then). */
int lease_parse(const char *s, size_t len, int64_t want, struct lease_range *out,
                int max);

#endif
