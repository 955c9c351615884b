/* loader.h: segment mode's database threads.
 *
 * A small pool of threads, each with its own store connection, runs the
 * database work that segment.c asks for: loading the next segment of a tag,
 * looking up a tag not in memory, and refreshing the tag list on an interval.
 * No database call ever runs on an I/O thread. After each piece of work the
 * wake callback runs (it retries parked requests). While the database is down,
 * work is retried with exponential backoff; state changes are logged once.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef LEAFD_LOADER_H
#define LEAFD_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "util.h"

struct conceal;
struct config;
struct loader;
struct segments;
struct segment_tag;

/* Opens one store per thread and loads the tag list once (a database that is
 * down at start is logged and retried, not fatal). NULL with *cause only on a
 * configuration error. Then: segments_new with loader_hook_load and
 * loader_hook_lookup as its hooks (arg: the loader), loader_attach, and
 * loader_start. */
struct loader *loader_new(const struct config *cfg, char **cause);
/* wake(arg, tag, len) runs after each piece of work: tag is the biz_tag a
 * load concerned, or NULL when anything may have changed. */
void loader_attach(struct loader *l, struct segments *segs,
                   void (*wake)(void *arg, const char *tag, size_t len),
                   void *wake_arg);
/* Concealed tags (conceal.h): their loads take whole blocks and check the
 * key records; refreshes keep the records' history. Before loader_start;
 * c outlives the loader. */
void loader_set_conceal(struct loader *l, struct conceal *c);
int  loader_start(struct loader *l, char **cause);
void loader_stop(struct loader *l);       /* joins the threads; NULL ok */
void loader_free(struct loader *l);

/* segment_hooks callbacks; arg is the loader. */
void loader_hook_load(void *arg, struct segment_tag *t);
void loader_hook_lookup(void *arg, const char *name);

/* A lease taken straight from the table (segment_lease said from_db): one
 * transaction UPDATE max_id = max_id + n (store_alloc with step n), on a
 * loader thread. The job is shared by its caller and the loader: refs
 * starts at 2 and each side drops its own with loader_lease_put (the last
 * frees it). done turns 1 (release) once rc, start and error are written;
 * then the wake callback runs with the tag. A job whose caller has gone
 * (refs 1) is dropped without touching the database. */
struct loader_lease {
    char                 tag[TAG_MAX + 1];
    int64_t              n;
    _Atomic int          done;
    _Atomic int          refs;
    enum store_result    rc;        /* STORE_OK: [start, start + n) is ours */
    int64_t              start;
    char                 error[512];
    struct loader_lease *next;      /* loader queue */
};
struct loader_lease *loader_lease_new(const char *tag, int64_t n);
void loader_lease_submit(struct loader *l, struct loader_lease *j);
void loader_lease_put(struct loader_lease *j);      /* NULL: no-op */

/* Ask for a tag-list refresh now (SIGHUP, /db); keep_rows: keep the rows
 * for loader_rows_json. Returns the refresh generation that will include it. */
uint64_t loader_refresh_now(struct loader *l, int keep_rows);

struct loader_status {
    int      db_up;                /* last call succeeded */
    int64_t  down_since_ms;        /* wall ms the database went down, or 0 */
    uint64_t errors;               /* failed database calls */
    uint64_t loads;                /* segments loaded */
    uint64_t leases;               /* leases taken straight from the table */
    uint64_t lookups;              /* single-tag lookups */
    uint64_t refreshes;            /* full tag-list reads */
    uint64_t refresh_gen;          /* completed refreshes */
    int64_t  refreshed_ms;         /* wall ms of the last refresh */
    char     last_error[512];
    char     refusal[32];          /* the last load was refused: its code
                                      (store_behind, db_failover,
                                      durability_degraded); "" */
    const char *store;             /* "sqlite" or "mysql" */
};
void loader_status(struct loader *l, struct loader_status *st);
/* Whether the last database call succeeded: one relaxed atomic load, no lock
 * (for parked requests). */
int  loader_db_up(struct loader *l);
/* Whether the last load was refused (st.refusal): one relaxed load. */
int  loader_refused(struct loader *l);

/* The leaf_alloc rows of the last refresh as JSON, into b. Returns the
 * refresh generation the rows come from. */
uint64_t loader_rows_json(struct loader *l, struct sbuf *b);

/* Prometheus text: load latency histogram, database errors and state. */
void loader_metrics(struct loader *l, struct sbuf *b);

#endif
