/* segment_tags.c: segment mode's tag registry: finding a tag by name, adding
 * the tags the database has, marking those it no longer has, and
 * remembering the names it does not have (segment.h). The double buffer
 * that gives each tag its IDs is segment.c's.
 *
 * DESIGN: the registry
 *
 * The registry maps names to tags with lock-free reads: an open-addressing
 * table of pointers, written under a mutex, grown by publishing a new table.
 * Tags are never freed while running (a tag deleted from the database is
 * marked gone), so readers need no reference counting. Old tables are kept
 * until segments_free.
 *
 * A take finds its tag with segment_registry_find (segment_internal.h),
 * with no lock. A name not in the table goes to the negative cache or the
 * list of lookups in flight (both under neg_lock): the database is asked
 * about a name once per lookup, and not again while it is remembered as
 * unknown (negative_ttl_ms).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "segment_internal.h"

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
    uint64_t h = segment_name_hash(row->biz_tag, len);
    struct segment_tag *tag;
    struct registry_table *t;

    pthread_mutex_lock(&s->reg_lock);
    tag = segment_registry_find(s, row->biz_tag, len, h);
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
    return &s->negative[(segment_name_hash(name, len) % (NEGATIVE_MAX / NEGATIVE_WAYS)) *
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

/* segment_internal.h. */
enum segment_result
segment_unknown_tag(struct segments *s, const char *name, size_t len)
{
    char copy[TAG_MAX + 1];
    int ask = 0;

    pthread_mutex_lock(&s->neg_lock);
    if (do_negative_hit(s, name, len, segment_now_ms(s))) {
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
        do_negative_add(s, name, segment_now_ms(s) + s->opt.negative_ttl_ms);
    pthread_mutex_unlock(&s->neg_lock);
}

size_t
segments_negative_count(struct segments *s)
{
    size_t n = 0;
    int64_t now = segment_now_ms(s);

    pthread_mutex_lock(&s->neg_lock);
    for (size_t i = 0; i < NEGATIVE_MAX; i++)
        if (s->negative[i].until > now)
            n++;
    pthread_mutex_unlock(&s->neg_lock);
    return n;
}

uint64_t
segments_generation(struct segments *s)
{
    return atomic_load(&s->gen);
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

size_t
segments_count(struct segments *s)
{
    size_t n;

    pthread_mutex_lock(&s->reg_lock);
    n = s->ntags;
    pthread_mutex_unlock(&s->reg_lock);
    return n;
}
