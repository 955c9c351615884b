/* fuzz_segment_model.c: a model-based fuzzer of segment.c's allocator.
 *
 * Each input is a single-threaded program of operations on one struct
 * segments with two tags and a fake loader: take (single IDs and batches,
 * through segment_take), continue an unfinished take, install the pending
 * load (with another node's range taken in between, or not), fail it, mark
 * the row broken, refresh (maybe with a new step), lease (from the buffers,
 * or the table for the rest: segment_lease), advance the clock. A model keeps every range ever
 * installed and every ID ever handed out. Checked after every operation:
 *  - no ID is handed out twice;
 *  - every ID lies in a range that was installed for its tag;
 *  - an answer has exactly the IDs asked for, in increasing ranges, at most
 *    SEGMENT_MAX_RANGES of them;
 *  - SEGMENT_TOO_LARGE before anything was taken only when n > limit;
 *  - liveness: SEGMENT_WAIT only while a load of that tag is asked for (a
 *    take that waits with no load coming would wait forever: the old
 *    allocator did that with a batch over SEGMENT_MAX_RANGES ranges).
 *
 * Input: one byte per operation (low 3 bits the kind, the rest an
 * argument), taken in order.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "log.h"
#include "segment.h"

#define ID_SPACE   (1 << 17)                /* IDs stay below this */

static const char *const names[2] = { "a", "b" };

/* The fake loader and clocks. */
static struct segment_tag *pending[2];     /* a load asked for, per tag */
static int64_t now_ms_v;

static int
tag_index(const struct segment_tag *t)
{
    return segment_tag_name(t)[0] == 'a' ? 0 : 1;
}

static void
fake_load(void *arg, struct segment_tag *t)
{
    (void)arg;
    pending[tag_index(t)] = t;
}

static void
fake_lookup(void *arg, const char *name)
{
    (void)arg;
    (void)name;
}

static int64_t
clock_ms(void)
{
    return now_ms_v;
}

/* The model: per ID, the run (input) that installed it for which tag, and
 * the run that handed it out (stamps instead of clearing per input). */
static uint32_t installed_in[ID_SPACE];
static uint8_t  installed_tag[ID_SPACE];
static uint32_t issued_in[ID_SPACE];
static uint32_t run_stamp;
static int64_t db_max;                      /* the shared table's max_id */
static int64_t row_step[2];

static void
issue(int tag, int64_t id)
{
    FUZZ_ASSERT(id >= 1 && id < ID_SPACE);
    /* Only IDs of a range installed for this tag ... */
    FUZZ_ASSERT(installed_in[id] == run_stamp && installed_tag[id] == tag);
    /* ... and never twice. */
    FUZZ_ASSERT(issued_in[id] != run_stamp);
    issued_in[id] = run_stamp;
}

static void
check_answer(int tag, int64_t n, const struct segment_take *st)
{
    int64_t total = 0;

    FUZZ_ASSERT(st->nranges >= 1 && st->nranges <= SEGMENT_MAX_RANGES);
    for (int i = 0; i < st->nranges; i++) {
        FUZZ_ASSERT(st->ranges[i].count >= 1);
        if (i > 0)
            FUZZ_ASSERT(st->ranges[i].start >=
                        st->ranges[i - 1].start + st->ranges[i - 1].count);
        for (int64_t k = 0; k < st->ranges[i].count; k++)
            issue(tag, st->ranges[i].start + k);
        total += st->ranges[i].count;
    }
    FUZZ_ASSERT(total == n);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct segment_options o = { .prefetch_percent = 50, .max_step = 64,
                                 .duration_ms = 1000, .negative_ttl_ms = 1000 };
    struct segment_hooks h = { .load = fake_load, .lookup = fake_lookup,
                               .now_ms = clock_ms };
    struct segment_take open_take[2];       /* an unfinished take per tag */
    int64_t open_n[2] = { 0, 0 };
    struct store_row rows[2];
    struct segments *s;
    static int logged;

    if (!logged) {
        log_init(LOGL_ERROR, NULL);
        logged = 1;
    }
    if (size > 400)
        size = 400;
    memset(pending, 0, sizeof pending);
    run_stamp++;
    db_max = 1;
    now_ms_v = 1000000;
    s = segments_new(&o, &h);
    memset(rows, 0, sizeof rows);
    for (int i = 0; i < 2; i++) {
        snprintf(rows[i].biz_tag, sizeof rows[i].biz_tag, "%s", names[i]);
        rows[i].max_id = 1;
        rows[i].step = row_step[i] = 4 + 4 * i;
    }
    segment_refresh(s, rows, 2, segments_generation(s));

    for (size_t pc = 0; pc < size; pc++) {
        int op = data[pc] & 7, arg = data[pc] >> 3, tag = arg & 1;
        struct segment_take st;
        enum segment_result r;
        int64_t n;

        switch (op) {
        case 0:                         /* a single ID, server path */
        case 1:                         /* a batch */
            n = op == 0 ? 1 : 1 + (arg >> 1) * 3;
            memset(&st, 0, sizeof st);
            r = segment_take(s, names[tag], 1, n, &st);
            if (r == SEGMENT_WAIT)
                FUZZ_ASSERT(pending[tag] != NULL);
            if (r == SEGMENT_OK) {
                check_answer(tag, n, &st);
            } else if (r == SEGMENT_WAIT && open_n[tag] == 0) {
                open_take[tag] = st;    /* continue it later */
                open_n[tag] = n;
            } else if (r == SEGMENT_TOO_LARGE && st.nranges == 0) {
                FUZZ_ASSERT(n > st.limit);
            } else {
                /* Abandoned: what it took is a gap, never handed out. */
                for (int i = 0; i < st.nranges; i++)
                    for (int64_t k = 0; k < st.ranges[i].count; k++)
                        issue(tag, st.ranges[i].start + k);
            }
            break;
        case 2:                         /* continue the open take */
            if (open_n[tag] == 0)
                break;
            r = segment_take(s, names[tag], 1, open_n[tag], &open_take[tag]);
            if (r == SEGMENT_OK) {
                check_answer(tag, open_n[tag], &open_take[tag]);
                open_n[tag] = 0;
            } else if (r == SEGMENT_WAIT) {
                FUZZ_ASSERT(pending[tag] != NULL);
            } else {
                for (int i = 0; i < open_take[tag].nranges; i++)
                    for (int64_t k = 0; k < open_take[tag].ranges[i].count; k++)
                        issue(tag, open_take[tag].ranges[i].start + k);
                open_n[tag] = 0;
            }
            break;
        case 3:                         /* serve the pending load */
            if (pending[tag] != NULL) {
                struct segment_tag *t = pending[tag];
                int64_t step = segment_next_step(s, t);

                pending[tag] = NULL;
                FUZZ_ASSERT(step >= 1 && step <= 64);
                if (arg & 2)
                    db_max += 1 + (arg >> 2);       /* another node's range */
                db_max += step;
                FUZZ_ASSERT(db_max < ID_SPACE);
                /* (A range that arrives while one is ready is skipped by
                 * segment_install: a gap. The model allows its IDs; the
                 * no-repeat check still covers them.) */
                for (int64_t id = db_max - step; id < db_max; id++) {
                    installed_in[id] = run_stamp;
                    installed_tag[id] = (uint8_t)tag;
                }
                segment_install(s, t, db_max, step, row_step[tag]);
            }
            break;
        case 4:                         /* the load fails, or the row breaks */
            if (pending[tag] != NULL) {
                if (arg & 2)
                    segment_tag_broken(s, pending[tag]);
                else
                    segment_load_failed(s, pending[tag]);
                pending[tag] = NULL;
            }
            break;
        case 5:                         /* refresh, maybe a new step */
            if (arg & 2)
                row_step[tag] = 1 + (arg >> 2);
            rows[tag].step = row_step[tag];
            segment_refresh(s, rows, 2, segments_generation(s));
            break;
        case 6:                         /* a lease; or single IDs in a row */
            if (arg & 2) {
                int from_db = -1;
                int64_t got = 0;

                n = 1 + (arg >> 2) * 5;
                memset(&st, 0, sizeof st);
                r = segment_lease(s, names[tag], 1, n, 0, &st, &from_db);
                FUZZ_ASSERT(r == SEGMENT_OK || r == SEGMENT_BROKEN);
                if (r != SEGMENT_OK)
                    break;
                FUZZ_ASSERT(from_db == (st.want > 0));
                for (int i = 0; i < st.nranges; i++) {
                    FUZZ_ASSERT(st.ranges[i].count >= 1);
                    for (int64_t k = 0; k < st.ranges[i].count; k++)
                        issue(tag, st.ranges[i].start + k);
                    got += st.ranges[i].count;
                }
                FUZZ_ASSERT(got + st.want == n);
                if (from_db) {          /* its own transaction on the table */
                    db_max += st.want;
                    FUZZ_ASSERT(db_max < ID_SPACE);
                    for (int64_t id = db_max - st.want; id < db_max; id++) {
                        installed_in[id] = run_stamp;
                        installed_tag[id] = (uint8_t)tag;
                        issue(tag, id);
                    }
                    segment_lease_db_done(s, st.tag, st.want);
                }
                break;
            }
            for (int i = 0; i <= (arg >> 1); i++) {
                memset(&st, 0, sizeof st);
                r = segment_take(s, names[tag], 1, 1, &st);
                if (r != SEGMENT_OK)
                    break;
                check_answer(tag, 1, &st);
            }
            break;
        case 7:                         /* time passes */
            now_ms_v += (int64_t)(arg >> 1) * 100;
            break;
        }
    }
    segments_free(s);
    return 0;
}
