/* segment_internal.h: what segment.c (the double buffer) and segment_tags.c
 * (the tag registry) share: the tag, the registry's table, struct segments,
 * and the lock-free name lookup every take makes (inline, so the hot path
 * makes no call across files). Not for other modules: they use segment.h.
 */
#ifndef LEAFD_SEGMENT_INTERNAL_H
#define LEAFD_SEGMENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "segment.h"

/* A slot's incarnation: written once per refill, read by every take. */
struct segment_slot {
    _Atomic uint64_t seq;          /* odd while start/len/gen are written */
    _Atomic uint64_t gen;          /* generation of start/len */
    _Atomic int64_t  start;        /* first ID of the range */
    _Atomic int64_t  len;          /* IDs in the range */
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
segment_load_short(const char *s, size_t len)
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
static inline uint64_t
segment_name_hash(const char *s, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ len, w;

    for (; len > 8; s += 8, len -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    h ^= segment_load_short(s, len);
    /* One 64x64->128 multiply, folded (wyhash's "mum"): every input bit
     * reaches the low bits, which pick the bucket, in one multiply's time. */
    {
        unsigned __int128 m = (unsigned __int128)h * 0xa0761d6478bd642fULL;
        return (uint64_t)m ^ (uint64_t)(m >> 64);
    }
}

static inline int64_t
segment_now_ms(const struct segments *s)
{
    return s->hooks.now_ms ? s->hooks.now_ms() : util_wall_ms();
}

/* Equal names of equal length, compared inline (no memcmp call). */
static inline int
segment_name_eq(const char *a, const char *b, size_t len)
{
    uint64_t x, y;

    for (; len > 8; a += 8, b += 8, len -= 8) {
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
    }
    return segment_load_short(a, len) == segment_load_short(b, len);
}

static inline struct segment_tag *
segment_registry_find(struct segments *s, const char *name, size_t len, uint64_t h)
{
    struct registry_table *t = atomic_load(&s->table);

    for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
        struct segment_tag *tag = atomic_load(&t->slots[i]);
        if (tag == NULL)
            return NULL;
        if (tag->hash == h && tag->name_len == len && segment_name_eq(tag->name, name, len))
            return tag;
    }
}

/* A name not in the table: SEGMENT_UNKNOWN if remembered as missing, else
 * SEGMENT_WAIT for a lookup (asked for unless one is in flight), or
 * SEGMENT_BUSY when too many are. Takes neg_lock. */
enum segment_result segment_unknown_tag(struct segments *s, const char *name,
                                        size_t len);

#endif
