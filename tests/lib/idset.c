/* idset.c: see idset.h. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "idset.h"

void
idset_add(struct idset *s, uint64_t id)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        ck_assert_ptr_nonnull(s->v);
    }
    s->v[s->n++] = id;
}

static int
u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

size_t
idset_common(struct idset *a, struct idset *b)
{
    size_t i = 0, j = 0, n = 0;

    qsort(a->v, a->n, sizeof *a->v, u64_cmp);
    qsort(b->v, b->n, sizeof *b->v, u64_cmp);
    while (i < a->n && j < b->n) {
        if (a->v[i] < b->v[j]) {
            i++;
        } else if (a->v[i] > b->v[j]) {
            j++;
        } else {
            n++;
            i++;
            j++;
        }
    }
    return n;
}

void
issue_first(struct snowflake *sf, _Atomic int64_t *clk, uint32_t per,
            struct idset *s)
{
    for (int i = 0; i < 1500 && s->n == 0; i++) {
        if (i > 0)
            usleep(20000);
        issue_range(sf, clk, atomic_load(clk) + 5, per, s);
    }
    ck_assert_msg(s->n > 0, "no ID in 30 s; the last refusal: %s", s->last_code);
}

void
issue_range(struct snowflake *sf, _Atomic int64_t *clk, int64_t until,
            uint32_t per, struct idset *s)
{
    uint64_t ids[128];
    struct snowflake_refusal why;

    ck_assert_uint_le(per, 128);
    for (; atomic_load(clk) <= until; atomic_fetch_add(clk, 1)) {
        snowflake_keeper_step(sf);
        if (snowflake_next(sf, per, ids, &why) == SNOWFLAKE_OK) {
            for (uint32_t i = 0; i < per; i++)
                idset_add(s, ids[i]);
        } else {
            snprintf(s->last_code, sizeof s->last_code, "%s", why.code);
        }
    }
}
