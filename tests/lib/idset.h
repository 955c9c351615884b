/* idset.h: the IDs a test collected from snowflake generators, and the ones
 * two of them share (tests/unit/check_workerid*.c). */
#ifndef LEAFD_IDSET_H
#define LEAFD_IDSET_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "snowflake.h"

struct idset {
    uint64_t *v;
    size_t    n, cap;
    char      last_code[40];  /* the last refusal or wait */
};

void   idset_add(struct idset *s, uint64_t id);
/* IDs in both sets (sorts them). */
size_t idset_common(struct idset *a, struct idset *b);
/* Ask sf for per (<= 128) IDs at each ms from *clk to until (the keeper
 * steps between); what it gives goes into s, a refusal's code into
 * s->last_code. */
void   issue_range(struct snowflake *sf, _Atomic int64_t *clk, int64_t until,
                   uint32_t per, struct idset *s);
/* The first IDs of a fresh holder: issue_range over 5 ms of *clk, again
 * (20 ms of real time apart, up to 30 s) until sf has given some. On a
 * busy machine its first fence write or heartbeat may not have landed by
 * the first window; the test is about what comes after. */
void   issue_first(struct snowflake *sf, _Atomic int64_t *clk, uint32_t per,
                   struct idset *s);

#endif
