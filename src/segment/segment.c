/* segment.c: the double-buffered segment allocator and the tag registry.
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
 * The registry maps names to tags with lock-free reads: an open-addressing
 * table of pointers, written under a mutex, grown by publishing a new table.
 * Tags are never freed while running (a tag deleted from the database is
 * marked gone), so readers need no reference counting. Old tables are kept
 * until segments_free.
 */
#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "segment.h"

#ifndef CTR_OFFSET_BITS            /* tests/unit/check_segment_wrap.c: 60 */
#define CTR_OFFSET_BITS 40
#endif
#define CTR_OFFSET_MASK ((UINT64_C(1) << CTR_OFFSET_BITS) - 1)
#define CTR_GEN_MASK    ((UINT64_C(1) << (64 - CTR_OFFSET_BITS)) - 1)

/* A slot's incarnation: written once per refill, read by every take. */
struct segment_slot {
    _Atomic uint64_t seq;          /* odd while start/len/gen are written */
    _Atomic uint64_t gen;          /* generation of start/len */
    _Atomic int64_t  start;        /* first ID of the range */
    _Atomic int64_t  len;          /* IDs in the range */
};

/* A consistent view of one slot's incarnation. */
struct slot_view {
    uint64_t seq;                  /* even; names the incarnation for good */
    uint64_t gen;
    int64_t  start;
    int64_t  len;
};

/* Tags are cache-line aligned. The first line holds what takes write (the
 * counters) and what only the slow path touches; what every take reads
 * starts on the next line, so a take on one core does not evict it on
 * another. */
struct segment_tag {
    _Atomic uint64_t ctr[2];       /* per slot: (gen << 40) | next offset */
    pthread_mutex_t  lock;         /* serialises switch, install, step */

    /* Read by every take; written rarely. */
    _Alignas(64) struct segment_slot slot[2];
    _Atomic int      cur;          /* slot requests take from */
    _Atomic int      next_ready;   /* slot[!cur] holds an unused range */
    _Atomic int      loading;      /* a load is queued or running */
    _Atomic int      gone;         /* no longer in the table */
    uint64_t         hash;
    size_t           name_len;

    _Atomic int      init_ok;      /* a first range has been installed */
    _Atomic int      broken;       /* the row cannot give a range */
    _Atomic int      broken_said;  /* logged since the last install */
    _Atomic uint64_t seen_gen;     /* segments.gen when last found in the table */
    _Atomic int64_t  issued;       /* IDs of retired ranges */
    _Atomic int64_t  leased;       /* IDs leased from the buffers (in issued) */
    _Atomic int64_t  leased_db;    /* IDs leased straight from the table */
    _Atomic int64_t  leases;       /* leases answered */
    _Atomic int64_t  loads;
    _Atomic int64_t  db_step;      /* the table's step, from refresh/lookup */
    int64_t          step;         /* lock: step of the next load */
    int64_t          min_step;     /* lock: the table's step the step is based on */
    int64_t          update_ms;    /* lock: when the last range was installed */
    int              adapt_due;    /* lock: a load completed since the step
                                      was last adapted (once per load, not
                                      per attempt of a failing one) */

    char             name[];       /* name_len bytes and a NUL */
};

struct registry_table {
    size_t                        mask;      /* capacity - 1 */
    _Atomic(struct segment_tag *) *slots;
    struct registry_table        *older;     /* retired tables, freed at exit */
};

/* An unknown tag remembered until `until`. */
struct negative {
    char    name[TAG_MAX + 1];
    int64_t until;
};

#define NEGATIVE_MAX 4096

struct segments {
    struct segment_options opt;
    struct segment_hooks   hooks;

    _Atomic(struct registry_table *) table;
    pthread_mutex_t        reg_lock;          /* writers of table */
    size_t                 ntags;             /* reg_lock */

    _Atomic uint64_t       gen;               /* counts tags found in the table */
    pthread_mutex_t        neg_lock;          /* negative and pending */
    struct negative       *negative;          /* NEGATIVE_MAX, hashed */
    char                 (*pending)[TAG_MAX + 1]; /* lookups in flight */
    size_t                 npending;
};

#define PENDING_MAX 1024

/* Up to 8 bytes of s as one word, with two overlapping loads: for a given
 * len the word determines the bytes, so equal words mean equal strings. */
static inline uint64_t
load_short(const char *s, size_t len)
{
    uint32_t x, y;
    uint16_t z;

    if (len >= 4) {
        memcpy(&x, s, 4);
        memcpy(&y, s + len - 4, 4);
        return x | (uint64_t)y << 32;
    }
    if (len >= 2) {
        memcpy(&z, s, 2);
        return z | (uint64_t)(unsigned char)s[len - 1] << 16;
    }
    return len ? (unsigned char)s[0] : 0;
}

/* Hash a tag name a word at a time (names are short, and this is on the hot
 * path of every request). */
static uint64_t
name_hash(const char *s, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ len, w;

    for (; len > 8; s += 8, len -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    h ^= load_short(s, len);
    /* One 64x64->128 multiply, folded (wyhash's "mum"): every input bit
     * reaches the low bits, which pick the bucket, in one multiply's time. */
    {
        unsigned __int128 m = (unsigned __int128)h * 0xa0761d6478bd642fULL;
        return (uint64_t)m ^ (uint64_t)(m >> 64);
    }
}

static int64_t
now_ms(const struct segments *s)
{
    return s->hooks.now_ms ? s->hooks.now_ms() : util_wall_ms();
}

static struct registry_table *
table_new(size_t cap)
{
    struct registry_table *t = xcalloc(1, sizeof *t);

    t->mask = cap - 1;
    t->slots = xcalloc(cap, sizeof *t->slots);
    return t;
}

struct segments *
segments_new(const struct segment_options *opt, const struct segment_hooks *hooks)
{
    struct segments *s = xcalloc(1, sizeof *s);

    s->opt = *opt;
    s->hooks = *hooks;
    atomic_store(&s->table, table_new(64));
    pthread_mutex_init(&s->reg_lock, NULL);
    pthread_mutex_init(&s->neg_lock, NULL);
    s->negative = xcalloc(NEGATIVE_MAX, sizeof *s->negative);
    s->pending = xcalloc(PENDING_MAX, sizeof *s->pending);
    return s;
}

void
segments_free(struct segments *s)
{
    struct registry_table *t, *older;

    if (s == NULL)
        return;
    t = atomic_load(&s->table);
    for (size_t i = 0; i <= t->mask; i++) {
        struct segment_tag *tag = atomic_load(&t->slots[i]);
        if (tag != NULL) {
            pthread_mutex_destroy(&tag->lock);
            free(tag);
        }
    }
    for (; t != NULL; t = older) {
        older = t->older;
        free(t->slots);
        free(t);
    }
    pthread_mutex_destroy(&s->reg_lock);
    pthread_mutex_destroy(&s->neg_lock);
    free(s->negative);
    free(s->pending);
    free(s);
}

/* Equal names of equal length, compared inline (no memcmp call). */
static inline int
name_eq(const char *a, const char *b, size_t len)
{
    uint64_t x, y;

    for (; len > 8; a += 8, b += 8, len -= 8) {
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
    }
    return load_short(a, len) == load_short(b, len);
}

static struct segment_tag *
registry_find(struct segments *s, const char *name, size_t len, uint64_t h)
{
    struct registry_table *t = atomic_load(&s->table);

    for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
        struct segment_tag *tag = atomic_load(&t->slots[i]);
        if (tag == NULL)
            return NULL;
        if (tag->hash == h && tag->name_len == len && name_eq(tag->name, name, len))
            return tag;
    }
}

/* reg_lock held. */
static void
do_registry_put(struct registry_table *t, struct segment_tag *tag)
{
    size_t i = tag->hash & t->mask;

    while (atomic_load(&t->slots[i]) != NULL)
        i = (i + 1) & t->mask;
    atomic_store(&t->slots[i], tag);
}

/* Find or add a tag from a table row. */
static struct segment_tag *
registry_add(struct segments *s, const struct store_row *row)
{
    size_t len = strlen(row->biz_tag);
    uint64_t h = name_hash(row->biz_tag, len);
    struct segment_tag *tag;
    struct registry_table *t;

    pthread_mutex_lock(&s->reg_lock);
    tag = registry_find(s, row->biz_tag, len, h);
    if (tag != NULL) {
        pthread_mutex_unlock(&s->reg_lock);
        return tag;
    }
    /* Cache-line aligned (see struct segment_tag): 10,000 tags take
     * ~2.7 MB. */
    tag = xaligned_zalloc(64, offsetof(struct segment_tag, name) + len + 1);
    pthread_mutex_init(&tag->lock, NULL);
    memcpy(tag->name, row->biz_tag, len);
    tag->name_len = len;
    tag->hash = h;
    tag->step = tag->min_step = row->step;
    atomic_store(&tag->db_step, row->step);

    t = atomic_load(&s->table);
    if ((s->ntags + 1) * 2 > t->mask + 1) {
        struct registry_table *bigger = table_new((t->mask + 1) * 2);
        for (size_t i = 0; i <= t->mask; i++) {
            struct segment_tag *old = atomic_load(&t->slots[i]);
            if (old != NULL)
                do_registry_put(bigger, old);
        }
        bigger->older = t;
        atomic_store(&s->table, bigger);
        t = bigger;
    }
    do_registry_put(t, tag);
    s->ntags++;
    pthread_mutex_unlock(&s->reg_lock);
    return tag;
}

/* ---- unknown tags: negative cache and lookups in flight (neg_lock) ---- */

/* The negative cache is set-associative: NEGATIVE_WAYS entries per set, so
 * a few names that share a set do not evict each other. */
#define NEGATIVE_WAYS 4

static struct negative *
do_negative_set(struct segments *s, const char *name, size_t len)
{
    return &s->negative[(name_hash(name, len) % (NEGATIVE_MAX / NEGATIVE_WAYS)) *
                        NEGATIVE_WAYS];
}

static int
do_negative_hit(struct segments *s, const char *name, size_t len, int64_t now)
{
    struct negative *set = do_negative_set(s, name, len);

    for (int i = 0; i < NEGATIVE_WAYS; i++)
        if (set[i].until > now && strlen(set[i].name) == len &&
            memcmp(set[i].name, name, len) == 0)
            return 1;
    return 0;
}

/* Remember name as unknown: its own entry, else an expired one, else the
 * one that expires first. */
static void
do_negative_add(struct segments *s, const char *name, int64_t until)
{
    size_t len = strlen(name);
    struct negative *set = do_negative_set(s, name, len), *victim = &set[0];

    for (int i = 0; i < NEGATIVE_WAYS; i++) {
        if (strcmp(set[i].name, name) == 0) {
            victim = &set[i];
            break;
        }
        if (set[i].until < victim->until)
            victim = &set[i];
    }
    memcpy(victim->name, name, len + 1);
    victim->until = until;
}

static int
do_pending_find(struct segments *s, const char *name, size_t len)
{
    for (size_t i = 0; i < s->npending; i++)
        if (strlen(s->pending[i]) == len && memcmp(s->pending[i], name, len) == 0)
            return (int)i;
    return -1;
}

static void
do_pending_remove(struct segments *s, const char *name)
{
    int i = do_pending_find(s, name, strlen(name));

    if (i >= 0) {
        s->npending--;
        memcpy(s->pending[i], s->pending[s->npending], TAG_MAX + 1);
    }
}

/* An unknown name: UNKNOWN if remembered as missing, else WAIT for a
 * lookup (asking for one unless it is already in flight). */
static enum segment_result
unknown_tag(struct segments *s, const char *name, size_t len)
{
    char copy[TAG_MAX + 1];
    int ask = 0;

    pthread_mutex_lock(&s->neg_lock);
    if (do_negative_hit(s, name, len, now_ms(s))) {
        pthread_mutex_unlock(&s->neg_lock);
        return SEGMENT_UNKNOWN;
    }
    if (do_pending_find(s, name, len) < 0) {
        if (s->npending == PENDING_MAX) {
            /* Too many distinct lookups in flight: refuse (503) rather than
             * queue unbounded work for the database, or call a real tag
             * unknown. */
            pthread_mutex_unlock(&s->neg_lock);
            return SEGMENT_BUSY;
        }
        memcpy(s->pending[s->npending], name, len);
        s->pending[s->npending][len] = '\0';
        s->npending++;
        ask = 1;
    }
    pthread_mutex_unlock(&s->neg_lock);
    if (ask) {
        memcpy(copy, name, len);
        copy[len] = '\0';
        s->hooks.lookup(s->hooks.arg, copy);
    }
    return SEGMENT_WAIT;
}

void
segment_tag_found(struct segments *s, const struct store_row *row)
{
    struct segment_tag *tag;

    /* A row no request can name (the table allows any text) is skipped:
     * it could only corrupt /metrics labels. */
    if (!util_tag_valid(row->biz_tag, strlen(row->biz_tag)))
        return;
    tag = registry_add(s, row);
    atomic_store(&tag->db_step, row->step);
    atomic_store(&tag->seen_gen, atomic_fetch_add(&s->gen, 1) + 1);
    atomic_store(&tag->broken, 0);
    atomic_store(&tag->gone, 0);
    pthread_mutex_lock(&s->neg_lock);
    do_pending_remove(s, row->biz_tag);
    pthread_mutex_unlock(&s->neg_lock);
}

void
segment_tag_missing(struct segments *s, const char *name)
{
    pthread_mutex_lock(&s->neg_lock);
    do_pending_remove(s, name);
    if (s->opt.negative_ttl_ms > 0)
        do_negative_add(s, name, now_ms(s) + s->opt.negative_ttl_ms);
    pthread_mutex_unlock(&s->neg_lock);
}

size_t
segments_negative_count(struct segments *s)
{
    size_t n = 0;
    int64_t now = now_ms(s);

    pthread_mutex_lock(&s->neg_lock);
    for (size_t i = 0; i < NEGATIVE_MAX; i++)
        if (s->negative[i].until > now)
            n++;
    pthread_mutex_unlock(&s->neg_lock);
    return n;
}

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
        uint64_t h = name_hash(name, len);

        t = registry_find(s, name, len, h);
        if (t == NULL)
            return unknown_tag(s, name, len);
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
        t = registry_find(s, name, len, name_hash(name, len));
        if (t == NULL)
            return unknown_tag(s, name, len);
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
                                     now_ms(s) - t->update_ms,
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
    t->update_ms = now_ms(s);
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

uint64_t
segments_generation(struct segments *s)
{
    return atomic_load(&s->gen);
}

void
segment_tag_gone(struct segments *s, struct segment_tag *t)
{
    (void)s;
    atomic_store(&t->gone, 1);
    atomic_store(&t->loading, 0);
}

void
segment_refresh(struct segments *s, const struct store_row *rows, size_t n,
                uint64_t since)
{
    struct registry_table *t;

    for (size_t i = 0; i < n; i++)
        segment_tag_found(s, &rows[i]);
    /* Mark tags that are no longer in the table. rows is sorted. */
    pthread_mutex_lock(&s->reg_lock);
    t = atomic_load(&s->table);
    for (size_t i = 0; i <= t->mask; i++) {
        struct segment_tag *tag = atomic_load(&t->slots[i]);
        size_t lo = 0, hi = n;
        int found = 0;

        if (tag == NULL)
            continue;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            int c = strcmp(rows[mid].biz_tag, tag->name);
            if (c == 0) {
                found = 1;
                break;
            }
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        /* A tag a lookup found after the list was read may be missing
         * from it: only older ones are gone. */
        if (!found && !atomic_load(&tag->gone) &&
            atomic_load(&tag->seen_gen) <= since) {
            log_info("tag %s: no longer in leaf_alloc; answering unknown_biz_tag",
                     tag->name);
            atomic_store(&tag->gone, 1);
        }
    }
    pthread_mutex_unlock(&s->reg_lock);
}

const char *
segment_tag_name(const struct segment_tag *t)
{
    return t->name;
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

size_t
segments_count(struct segments *s)
{
    size_t n;

    pthread_mutex_lock(&s->reg_lock);
    n = s->ntags;
    pthread_mutex_unlock(&s->reg_lock);
    return n;
}
