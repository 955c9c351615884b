/* segment.h: segment mode's allocator: a registry of biz_tags, each with a
 * double buffer of ID ranges ("segments") taken from leaf_alloc.
 *
 * This module does no I/O. It asks for database work through the hooks
 * (loader.c answers them on its own threads) and is told the results through
 * segment_install / segment_tag_gone / segment_tag_broken / segment_tag_found /
 * segment_tag_missing / segment_refresh.
 *
 * Thread-safety: segment_take may be called from any number of threads at
 * once; taking from a ready segment is an atomic add (no lock, no
 * allocation, no syscall). Everything else takes the tag's mutex or the
 * registry's.
 */
#ifndef LEAFD_SEGMENT_H
#define LEAFD_SEGMENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "util.h"

struct segments;
struct segment_tag;

struct segment_hooks {
    /* Load the next segment of t (the loader thread then calls
     * segment_install, segment_tag_gone or segment_tag_broken, retrying a
     * load the database failed). Called at most once until one of those. */
    void (*load)(void *arg, struct segment_tag *t);
    /* Look up a tag not in memory (segment_tag_found / segment_tag_missing). */
    void (*lookup)(void *arg, const char *name);
    void *arg;
    int64_t (*now_ms)(void);         /* clock for step adaptation; NULL: wall */
};

struct segment_options {
    int     prefetch_percent;        /* load next once this share is used */
    int64_t max_step;                /* adaptive step ceiling */
    int64_t duration_ms;             /* adaptive target lifetime of a segment */
    int64_t negative_ttl_ms;         /* unknown-tag cache TTL */
};

/* Up to this many ranges make one answer (a batch may span segments). */
#define SEGMENT_MAX_RANGES 8

struct segment_range {
    int64_t start;
    int64_t count;
};

/* The state of one segment_take call, kept across waits: IDs already taken
 * stay taken, so a batch that spans a segment end stays increasing. */
struct segment_take {
    struct segment_tag   *tag;
    int64_t               want;       /* IDs still to take */
    int64_t               limit;      /* SEGMENT_TOO_LARGE: the most one
                                         request may ask of this tag */
    int                   nranges;
    struct segment_range  ranges[SEGMENT_MAX_RANGES];
};

enum segment_result {
    SEGMENT_OK,          /* ranges hold want IDs */
    SEGMENT_WAIT,        /* nothing ready yet: wait for a wake and call again */
    SEGMENT_UNKNOWN,     /* no such biz_tag */
    SEGMENT_BUSY,        /* too many lookups in flight to ask about this tag */
    SEGMENT_BROKEN,      /* the tag's row cannot give a range (bad step,
                            max_id at its end): a DBA must fix the row */
    SEGMENT_TOO_LARGE,   /* n could need more than SEGMENT_MAX_RANGES
                            segments: refused before any ID is taken when
                            n > limit; or (nranges > 0) other takers split
                            the segments so finely that the answer would
                            need more ranges: then the IDs already taken
                            are dropped (a gap) and nothing more is taken */
};

struct segments *segments_new(const struct segment_options *opt,
                              const struct segment_hooks *hooks);
void segments_free(struct segments *s);                /* NULL: no-op */

/* Start (st zeroed by the caller) or continue taking n IDs for tag name.
 * n >= 1. A batch may need several segments: one that could need more than
 * SEGMENT_MAX_RANGES of them (n above (SEGMENT_MAX_RANGES - 1) times the
 * row's step) is refused with SEGMENT_TOO_LARGE before any ID is taken. */
enum segment_result segment_take(struct segments *s, const char *name,
                                 size_t len, int64_t n, struct segment_take *st);

/* Leases (segment.c, DESIGN: leases). Start (st zeroed) or continue a
 * lease of n IDs of tag name (n <= 0: the row's step). contiguous: the
 * answer must be one range, so it always comes from the table. SEGMENT_OK with *from_db 0: st->ranges hold
 * all n. SEGMENT_OK with *from_db 1: st->ranges hold what the buffers gave
 * (maybe nothing) and the caller must take the other st->want IDs straight
 * from the table (loader_lease) and then call segment_lease_db_done. WAIT
 * (only while the tag is looked up), UNKNOWN, BUSY, BROKEN as segment_take.
 * Leased IDs are counted apart from served ones (segment_tag_info).
 * segment_lease_db_done also raises the tag's next step to 2n (at most
 * max_step), so that the buffers can hold the next lease of that size. */
enum segment_result segment_lease(struct segments *s, const char *name,
                                  size_t len, int64_t n, int contiguous,
                                  struct segment_take *st, int *from_db);
void segment_lease_db_done(struct segments *s, struct segment_tag *t, int64_t n);

/* Loader side. */
/* The step to ask the database for on t's next load (adaptive, as Leaf). */
int64_t segment_next_step(struct segments *s, struct segment_tag *t);
/* A load of `step` IDs returned max_id and the row's step: the range is
 * [max_id - step, max_id). */
void segment_install(struct segments *s, struct segment_tag *t, int64_t max_id,
                     int64_t step, int64_t db_step);
/* The load found no row: the tag was deleted from the table. */
void segment_tag_gone(struct segments *s, struct segment_tag *t);
/* The row cannot give a range (store_alloc said STORE_BAD_ROW). Requests
 * get SEGMENT_BROKEN and nothing is loaded until the row is read again
 * (refresh, lookup). Returns 1 when this is news (the first time since the
 * tag last got a segment: log it), 0 when it was said already. */
int  segment_tag_broken(struct segments *s, struct segment_tag *t);
/* Lookup results. */
void segment_tag_found(struct segments *s, const struct store_row *row);
void segment_tag_missing(struct segments *s, const char *name);
/* A full list of rows: add new tags, pick up DBA step changes, mark tags
 * that are gone. since is segments_generation() from before the list was
 * read: a tag found (by a lookup) after that is not marked gone. */
void segment_refresh(struct segments *s, const struct store_row *rows, size_t n,
                     uint64_t since);
uint64_t segments_generation(struct segments *s);

const char *segment_tag_name(const struct segment_tag *t);

/* Snapshot of one tag for /cache and /metrics. */
struct segment_slot_info {
    int64_t value, max, step, start;
};
struct segment_tag_info {
    char    name[TAG_MAX + 1];
    int     init_ok;
    int     cur;
    int     next_ready;
    int     loading;
    int     gone;                  /* deleted from the table */
    int64_t step;                  /* adaptive step for the next load */
    int64_t min_step;              /* the database's step */
    int64_t issued;                /* IDs served since start (not leases) */
    int64_t leased_buf;            /* IDs leased from the buffers */
    int64_t leased_db;             /* IDs leased straight from the table */
    int64_t leases;                /* leases answered */
    int64_t loads;
    int64_t available;             /* IDs left in both buffers */
    struct segment_slot_info slot[2];
};
/* Calls fn for each tag (registry order). */
void segments_foreach(struct segments *s,
                      void (*fn)(const struct segment_tag_info *, void *),
                      void *arg);
size_t segments_count(struct segments *s);
/* Number of tags whose requests are waiting for a segment right now. */
size_t segments_negative_count(struct segments *s);

/* Step adaptation, exposed for tests: Leaf's rule. */
int64_t segment_adapt_step(int64_t step, int64_t min_step, int64_t max_step,
                           int64_t duration_ms, int64_t target_ms);

/* --- for tests only: nothing in src/ calls these --------------------- */

/* A load of t that failed: t may be loaded again. loader.c never calls it
 * (it keeps a failed load queued and retries it after its backoff); the
 * tests and the segment model fuzzer stand in for a loader that gives up. */
void segment_load_failed(struct segments *s, struct segment_tag *t);

#endif
