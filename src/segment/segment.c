/* segment.c: the double-buffered segment allocator: taking IDs from a tag's
 * two slots, installing ranges, adapting the step, and what /stats shows.
 *
 * DESIGN: the double buffer
 *
 * Each tag has two slots. A slot holds one range at a time (an
 * "incarnation"): its first ID `start`, its length `len`, and a 24-bit
 * generation `gen`, published under a sequence counter `seq`. The slot's
 * counter `ctr` packs the generation with an offset: (gen << 40) | offset.
 * `cur` names the slot requests take from. Taking n IDs is
 *
 *     read (gen, start, len) consistently under seq
 *     x = fetch_add(ctr, n)
 *     if x's gen == gen and its offset < len: IDs start + offset ...
 *
 * That fetch_add is the only shared write on the hot path: no lock, no
 * syscall.
 *
 * Guarantees, and why they hold:
 * - No ID is handed out twice. A slot is refilled (only when it is not `cur`
 *   and used up) under the tag mutex as: seq++ (odd), start, len, gen,
 *   seq++ (even), then ctr = gen << 40. Every fetch_add result carries the
 *   generation it was taken from, and within one generation fetch_add gives
 *   each caller a disjoint interval of offsets. A caller keeps IDs only when
 *   its result's generation matches the (start, len) it read consistently,
 *   so an add that raced with a refill can never be mapped onto another
 *   incarnation's range.
 * - No gap within a segment. A result from the current generation is always
 *   used (a caller whose add landed on a newer generation than it read
 *   re-reads the slot). Adds to a used-up incarnation land past its len and
 *   cost nothing. Only a caller stalled across a whole segment's lifetime
 *   plus a refill can lose the IDs of its add (a gap, never a repeat).
 * - Ranges never overlap across nodes: each comes from one transaction
 *   UPDATE max_id = max_id + step; SELECT max_id (store.h).
 * - The next range is fetched in the background once prefetch_percent of the
 *   current one is used, so a request normally never waits for the database.
 *   When both slots are empty the request gets SEGMENT_WAIT and its caller
 *   parks it without blocking the thread (http_park); it is retried when a
 *   load lands (the wake hook) or times out.
 * - A batch that spans the end of a segment keeps the IDs it has, takes the
 *   rest from the next segment, and is sorted, so it stays increasing. (A
 *   caller stalled across a switch may take from the next range before the
 *   current one is used up: still unique, but two requests in a row from one
 *   client are not guaranteed to increase; IDs trend upward, as in Leaf.)
 *
 * The tag registry that finds a tag by name is segment_tags.c's (its own
 * DESIGN block); segment_internal.h holds what the two files share.
 */
#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "segment_internal.h"

#ifndef CTR_OFFSET_BITS            /* tests/unit/check_segment_wrap.c: 60 */
#define CTR_OFFSET_BITS 40
#endif
#define CTR_OFFSET_MASK ((UINT64_C(1) << CTR_OFFSET_BITS) - 1)
#define CTR_GEN_MASK    ((UINT64_C(1) << (64 - CTR_OFFSET_BITS)) - 1)

/* A consistent view of one slot's incarnation. */
struct slot_view {
    uint64_t seq;                  /* even; names the incarnation for good */
    uint64_t gen;
    int64_t  start;
    int64_t  len;
};

/* ---- the double buffer ---- */

static void
request_load(struct segments *s, struct segment_tag *t)
{
    int expect = 0;

    if (atomic_load(&t->next_ready) || atomic_load(&t->loading))
        return;
    if (!atomic_compare_exchange_strong(&t->loading, &expect, 1))
        return;
    /* A load may have landed between the check and the exchange. */
    if (atomic_load(&t->next_ready)) {
        atomic_store(&t->loading, 0);
        return;
    }
    s->hooks.load(s->hooks.arg, t);
}

/* Read a slot's incarnation; 0 if it is being written right now. */
static inline int
slot_read(struct segment_slot *sl, struct slot_view *v)
{
    uint64_t s1 = atomic_load(&sl->seq), s2;

    if (s1 & 1)
        return 0;
    v->gen = atomic_load(&sl->gen);
    v->start = atomic_load(&sl->start);
    v->len = atomic_load(&sl->len);
    v->seq = s1;
    s2 = atomic_load(&sl->seq);
    return s1 == s2;
}

/* IDs left in slot i of t (0 if used up or being refilled). */
static int64_t
slot_left(struct segment_tag *t, int i)
{
    struct slot_view v;
    uint64_t c = atomic_load(&t->ctr[i]);
    int64_t off = (int64_t)(c & CTR_OFFSET_MASK);

    if (!slot_read(&t->slot[i], &v) || (c >> CTR_OFFSET_BITS) != v.gen ||
        off >= v.len)
        return 0;
    return v.len - off;
}

/* Take up to want IDs from the current slot. Returns how many were taken
 * into *start (0: the slot is used up or being refilled). */
static inline int64_t
take_fast(struct segments *s, struct segment_tag *t, int64_t want,
          int64_t *start)
{
    int c = atomic_load(&t->cur);
    struct segment_slot *sl = &t->slot[c];
    _Atomic uint64_t *ctr = &t->ctr[c];
    struct slot_view v;
    uint64_t x, xgen;
    int64_t off, got;

    if (!slot_read(sl, &v))
        return 0;
    /* Don't add to a used-up slot: the offset must never reach the gen. */
    x = atomic_load(ctr);
    if ((x >> CTR_OFFSET_BITS) != v.gen || (int64_t)(x & CTR_OFFSET_MASK) >= v.len)
        return 0;
    x = atomic_fetch_add(ctr, (uint64_t)want);
    xgen = x >> CTR_OFFSET_BITS;
    if (xgen != v.gen) {
        /* Refilled between the read and the add: the add belongs to the new
         * incarnation, whose view is complete (ctr is stored last). */
        if (!slot_read(sl, &v) || v.gen != xgen)
            return 0;       /* stalled across yet another refill: a gap */
    }
    off = (int64_t)(x & CTR_OFFSET_MASK);
    /* Adds start below len (checked above), so the offset never carries
     * into the generation bits. */
    assert((uint64_t)off + (uint64_t)want <= CTR_OFFSET_MASK);
    if (off >= v.len)
        return 0;
    got = v.len - off < want ? v.len - off : want;
    *start = v.start + off;
    /* Prefetch once prefetch_percent of this range is used. */
    if ((off + got) * 100 >= v.len * s->opt.prefetch_percent &&
        !atomic_load(&t->next_ready) && !atomic_load(&t->loading))
        request_load(s, t);
    return got;
}

/* Switch to the next slot if the current one is used up and the next is
 * ready. Returns 1 if the caller should try again, 0 if nothing is ready. */
static int
take_slow(struct segments *s, struct segment_tag *t)
{
    int again = 0;

    pthread_mutex_lock(&t->lock);
    {
        int c = atomic_load(&t->cur);

        if (slot_left(t, c) > 0) {
            again = 1;          /* another thread switched already */
        } else if (atomic_load(&t->next_ready)) {
            atomic_fetch_add(&t->issued, atomic_load(&t->slot[c].len));
            atomic_store(&t->cur, !c);
            atomic_store(&t->next_ready, 0);
            again = 1;
        }
    }
    pthread_mutex_unlock(&t->lock);
    /* A broken row is not asked again until a refresh or lookup reads it
     * afresh (segment_tag_found clears broken): no transaction and no error
     * line per request. */
    if (!again && !atomic_load(&t->broken))
        request_load(s, t);
    return again;
}

static enum segment_result take_common(struct segments *s, const char *name,
                                       size_t len, int64_t n,
                                       struct segment_take *st);

enum segment_result
segment_take(struct segments *s, const char *name, size_t len, int64_t n,
             struct segment_take *st)
{
    return take_common(s, name, len, n, st);
}

static __attribute__((noinline)) enum segment_result
take_common(struct segments *s, const char *name, size_t len, int64_t n,
            struct segment_take *st)
{
    struct segment_tag *t = st->tag;

    if (t == NULL) {
        uint64_t h = segment_name_hash(name, len);

        t = segment_registry_find(s, name, len, h);
        if (t == NULL)
            return segment_unknown_tag(s, name, len);
        st->tag = t;
        st->want = n;
        st->nranges = 0;
        /* Each segment gives a request one range at most (one add per
         * slot), and gives at least the row's step: a batch within this
         * limit fits, barring takers that split the segments further. */
        {
            int64_t row_step = atomic_load(&t->db_step);

            st->limit = row_step >= 1 ? (SEGMENT_MAX_RANGES - 1) * row_step
                                      : INT64_MAX;     /* broken: said below */
        }
        if (n > st->limit)
            return SEGMENT_TOO_LARGE;
    }
    if (atomic_load(&t->gone) && st->nranges == 0)
        return SEGMENT_UNKNOWN;

    while (st->want > 0) {
        int64_t start, got;

        /* Never take what the answer could not hold. */
        if (st->nranges == SEGMENT_MAX_RANGES)
            return SEGMENT_TOO_LARGE;
        got = take_fast(s, t, st->want, &start);
        if (got > 0) {
            struct segment_range *last = st->nranges ? &st->ranges[st->nranges - 1] : NULL;
            if (last != NULL && last->start + last->count == start) {
                last->count += got;
            } else {
                assert(st->nranges < SEGMENT_MAX_RANGES);
                st->ranges[st->nranges].start = start;
                st->ranges[st->nranges].count = got;
                st->nranges++;
            }
            st->want -= got;
            continue;
        }
        if (!take_slow(s, t))
            return atomic_load(&t->broken) ? SEGMENT_BROKEN : SEGMENT_WAIT;
    }
    /* A caller stalled across a whole switch and refill may have taken from
     * the next range before the current one: the ranges are disjoint, so
     * sorting them keeps the answer increasing. */
    for (int i = 1; i < st->nranges; i++) {
        struct segment_range r = st->ranges[i];
        int j = i;
        for (; j > 0 && st->ranges[j - 1].start > r.start; j--)
            st->ranges[j] = st->ranges[j - 1];
        st->ranges[j] = r;
    }
    return SEGMENT_OK;
}

/* DESIGN: leases. A lease takes from the buffers only when they hold at
 * least twice what it asks, so single takers still find half of it (and the
 * fast drain makes the adaptive step grow as it would for any traffic).
 * Otherwise, and for whatever the buffers cannot give, the caller takes the
 * rest straight from the table in a transaction of its own (UPDATE max_id =
 * max_id + n): a range no segment holds. Buffer leases go through the same
 * fetch_add as every take, so they never overlap anything handed out. A
 * table lease raises the step of the next load to twice its size (within
 * max_step), so the buffers can hold the next lease like it. */
enum segment_result
segment_lease(struct segments *s, const char *name, size_t len, int64_t n,
              int contiguous, struct segment_take *st, int *from_db)
{
    struct segment_tag *t = st->tag;
    enum segment_result res;
    int64_t avail, before;

    *from_db = 0;
    if (t == NULL) {
        t = segment_registry_find(s, name, len, segment_name_hash(name, len));
        if (t == NULL)
            return segment_unknown_tag(s, name, len);
        if (n <= 0)
            n = atomic_load(&t->db_step);      /* the row's step */
        if (n <= 0)
            return SEGMENT_BROKEN;
        st->tag = t;
        st->want = n;
        st->nranges = 0;
        st->limit = INT64_MAX;
    }
    if (atomic_load(&t->gone))
        return SEGMENT_UNKNOWN;
    if (atomic_load(&t->broken))
        return SEGMENT_BROKEN;
    if (st->want == 0)
        return SEGMENT_OK;
    if (contiguous) {                          /* one transaction, one range */
        *from_db = 1;
        return SEGMENT_OK;
    }
    pthread_mutex_lock(&t->lock);
    {
        int c = atomic_load(&t->cur);

        avail = slot_left(t, c) + (atomic_load(&t->next_ready) ? slot_left(t, !c) : 0);
    }
    pthread_mutex_unlock(&t->lock);
    if (avail / 2 < st->want) {
        *from_db = 1;
        return SEGMENT_OK;
    }
    before = st->want;
    res = take_common(s, name, len, st->want, st);
    atomic_fetch_add(&t->leased, before - st->want);
    if (res == SEGMENT_BROKEN || res == SEGMENT_UNKNOWN)
        return res;
    /* WAIT, or TOO_LARGE after others split the segments: the rest comes
     * from the table. */
    *from_db = st->want > 0;
    if (st->want == 0)
        atomic_fetch_add(&t->leases, 1);
    return SEGMENT_OK;
}

void
segment_lease_db_done(struct segments *s, struct segment_tag *t, int64_t n)
{
    atomic_fetch_add(&t->leased_db, n);
    atomic_fetch_add(&t->leases, 1);
    /* The adaptive step sees lease traffic: a lease the buffers could not
     * hold asks the next load for at least twice its size (within
     * max_step), so that leases like it come from the buffers after. */
    pthread_mutex_lock(&t->lock);
    {
        int64_t want = n > s->opt.max_step / 2 ? s->opt.max_step : n * 2;

        if (t->step < want)
            t->step = want;
    }
    pthread_mutex_unlock(&t->lock);
}

int64_t
segment_adapt_step(int64_t step, int64_t min_step, int64_t max_step,
                   int64_t duration_ms, int64_t target_ms)
{
    if (duration_ms < target_ms) {
        if (step * 2 <= max_step)
            step *= 2;
    } else if (duration_ms >= target_ms * 2) {
        if (step / 2 >= min_step)
            step /= 2;
    }
    return step < min_step ? min_step : step;
}

int64_t
segment_next_step(struct segments *s, struct segment_tag *t)
{
    int64_t step, db_step = atomic_load(&t->db_step);

    pthread_mutex_lock(&t->lock);
    if (db_step != t->min_step) {
        /* The DBA changed the step: it holds from this load on. */
        log_info("tag %s: step changed in the database from %lld to %lld",
                 t->name, (long long)t->min_step, (long long)db_step);
        t->min_step = t->step = db_step;
    } else if (t->update_ms != 0 && t->adapt_due) {
        /* Once per completed load: a load that failed and is retried asks
         * for the same step again instead of growing it on every try. */
        t->step = segment_adapt_step(t->step, t->min_step, s->opt.max_step,
                                     segment_now_ms(s) - t->update_ms,
                                     s->opt.duration_ms);
        t->adapt_due = 0;
    }
    step = t->step;
    pthread_mutex_unlock(&t->lock);
    return step;
}

void
segment_install(struct segments *s, struct segment_tag *t, int64_t max_id,
                int64_t step, int64_t db_step)
{
    struct segment_slot *sl;
    uint64_t gen;
    int i;

    pthread_mutex_lock(&t->lock);
    if (atomic_load(&t->next_ready)) {
        /* Never overwrite an unused range (a gap, but a wasted one). The
         * row's step is still news. */
        if (db_step != t->min_step)
            atomic_store(&t->db_step, db_step);
        t->adapt_due = 1;
        atomic_store(&t->loading, 0);
        pthread_mutex_unlock(&t->lock);
        log_warn("tag %s: a second segment arrived while one was ready; "
                 "[%lld, %lld) is skipped", t->name, (long long)(max_id - step),
                 (long long)max_id);
        return;
    }
    i = !atomic_load(&t->cur);
    sl = &t->slot[i];
    /* Only the slot nobody takes from is written, and only when it holds no
     * unused range; a range fits the counter's offset bits. */
    assert(i != atomic_load(&t->cur) && !atomic_load(&t->next_ready));
    assert(step >= 1 && (uint64_t)step <= CTR_OFFSET_MASK / 2 && max_id - step >= 0);
    assert((atomic_load(&sl->seq) & 1) == 0);
    gen = (atomic_load(&sl->gen) + 1) & CTR_GEN_MASK;
    atomic_fetch_add(&sl->seq, 1);
    atomic_store(&sl->start, max_id - step);
    atomic_store(&sl->len, step);
    atomic_store(&sl->gen, gen);
    atomic_fetch_add(&sl->seq, 1);
    atomic_store(&t->ctr[i], gen << CTR_OFFSET_BITS);
    assert((atomic_load(&sl->seq) & 1) == 0);   /* even: the slot is whole */
    atomic_store(&t->next_ready, 1);
    t->update_ms = segment_now_ms(s);
    t->adapt_due = 1;
    if (atomic_exchange(&t->broken_said, 0))
        log_info("tag %s: its leaf_alloc row gives IDs again", t->name);
    if (db_step != t->min_step)
        atomic_store(&t->db_step, db_step);   /* next load picks it up */
    atomic_store(&t->init_ok, 1);
    atomic_fetch_add(&t->loads, 1);
    atomic_store(&t->loading, 0);
    pthread_mutex_unlock(&t->lock);
}

void
segment_load_failed(struct segments *s, struct segment_tag *t)
{
    (void)s;
    atomic_store(&t->loading, 0);
}

int
segment_tag_broken(struct segments *s, struct segment_tag *t)
{
    (void)s;
    atomic_store(&t->broken, 1);
    atomic_store(&t->loading, 0);
    /* Said once per spell: a refresh clears broken, not broken_said. */
    return !atomic_exchange(&t->broken_said, 1);
}

void
segment_tag_gone(struct segments *s, struct segment_tag *t)
{
    (void)s;
    atomic_store(&t->gone, 1);
    atomic_store(&t->loading, 0);
}

static void
tag_info(struct segment_tag *t, struct segment_tag_info *in)
{
    memset(in, 0, sizeof *in);
    memcpy(in->name, t->name, t->name_len + 1);
    pthread_mutex_lock(&t->lock);
    in->init_ok = atomic_load(&t->init_ok);
    in->cur = atomic_load(&t->cur);
    in->next_ready = atomic_load(&t->next_ready);
    in->loading = atomic_load(&t->loading);
    in->gone = atomic_load(&t->gone);
    in->step = t->step;
    in->min_step = t->min_step;
    in->loads = atomic_load(&t->loads);
    in->issued = atomic_load(&t->issued);
    for (int i = 0; i < 2; i++) {
        struct segment_slot *sl = &t->slot[i];
        struct segment_slot_info *si = &in->slot[i];
        si->start = atomic_load(&sl->start);
        si->step = atomic_load(&sl->len);
        si->max = si->start + si->step;
        si->value = si->max - slot_left(t, i);
    }
    /* IDs used from the current slot count as issued; the next is unused. */
    in->issued += in->slot[in->cur].value - in->slot[in->cur].start;
    /* Leases are counted apart: issued is what was served one by one. */
    in->leased_buf = atomic_load(&t->leased);
    in->leased_db = atomic_load(&t->leased_db);
    in->leases = atomic_load(&t->leases);
    in->issued -= in->leased_buf;
    in->available = in->slot[in->cur].max - in->slot[in->cur].value;
    if (in->next_ready)
        in->available += in->slot[!in->cur].max - in->slot[!in->cur].value;
    pthread_mutex_unlock(&t->lock);
}

void
segments_foreach(struct segments *s,
                 void (*fn)(const struct segment_tag_info *, void *), void *arg)
{
    struct registry_table *t = atomic_load(&s->table);
    struct segment_tag_info info;

    for (size_t i = 0; i <= t->mask; i++) {
        struct segment_tag *tag = atomic_load(&t->slots[i]);
        if (tag == NULL)
            continue;
        tag_info(tag, &info);
        fn(&info, arg);
    }
}
