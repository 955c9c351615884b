/* workerid_rows.h: the decisions of a leaf_worker table's claim, the same
 * for every SQL store (workerid_mysql.c, workerid_pg.c): given the rows the
 * claim read under its lock, the server's clock and the table's `since`
 * (when it last went back in time), which worker ID to take and what it
 * gates on. The stores read and write; these only decide. Pure but for the
 * `used` callback (a store's question whether a live holder's lock is on
 * an ID).
 *
 * Ownership: causes are malloc'd; the caller frees them.
 * Thread-safety: none needed (no state).
 */
#ifndef LEAFD_WORKERID_ROWS_H
#define LEAFD_WORKERID_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "workerid_lease.h"

#define WROWS_IDENT_MAX 128
#define WROWS_INST_MAX  64

/* One row of leaf_worker (worker IDs 0 and up), ordered by worker. */
struct wrows_row {
    long long worker, fence, hb, released;
    char      ident[WROWS_IDENT_MAX + 1], inst[WROWS_INST_MAX + 1];
};

/* c->want_worker among the rows: its row index, or -1 for a gap (an
 * insert); WLEASE_OK, or _REFUSED / _DOWN with *cause. *move: the row
 * this identity holds under another worker ID (to free first), or -1. */
int wrows_wanted(const struct wlease_claim *c, const struct wrows_row *rows,
                 size_t n, long long now, long long since, int64_t *row,
                 int64_t *move, char **cause);

/* This identity's row inside c's range into *take and *fence (none: -1,
 * left as they are); one outside (worker_bits lowered, the range moved)
 * into *past_max and *past_fence, to free. WLEASE_OK, or _REFUSED with
 * *cause: another live instance of this identity holds it. */
int wrows_own(const struct wlease_claim *c, const struct wrows_row *rows,
              size_t n, long long now, int64_t *take, int64_t *fence,
              long long *past_max, long long *past_fence, char **cause);

/* Whether another live holder writes worker's record now (its lock):
 * 0 with *used, or -1 with *cause (the store is down). */
typedef int (*wrows_used_fn)(void *arg, long long worker, int64_t lease_ms,
                             int *used, char **cause);

/* What wrows_scan found. */
struct wrows_pick {
    int64_t take;       /* the worker ID, or -1: none */
    int64_t fence;      /* its row's fence (0 for a gap) */
    int     insert;     /* a gap: no row yet */
    int     waiting;    /* a row older than since, not yet a lease after */
    int     live;       /* an ID the table calls free whose lock is live */
};

/* The lowest free worker ID of c's range: a gap, released, or lease
 * expired (a lease after since for a row older than since), its fence
 * below the taker's clock, and not written by a live holder (used, asked
 * for an ID the table calls free: a gap in a table with an epoch row, or
 * a row written at or after since). 0 with *out, or -1 (used failed). */
int wrows_scan(const struct wlease_claim *c, const struct wrows_row *rows,
               size_t n, long long now, long long since, int has_epoch,
               wrows_used_fn used, void *arg, struct wrows_pick *out,
               char **cause);

/* The fence a claim of take gates on: its row's (fence), the old row's
 * of this identity outside the range (past_fence), and for a gap (insert)
 * or a row older than since, the epoch or since + unknown_gate_ms. */
int64_t wrows_gate(const struct wlease_claim *c, const struct wrows_row *rows,
                   size_t n, int64_t take, int64_t fence, int insert,
                   long long past_fence, long long epoch, long long since);

/* Causes: a claim put off until the server's clock `until` (a row older
 * than since), and a live holder's lock on an ID the table calls free
 * (worker: the one wanted, or -1). */
char *wrows_waiting(long long until);
/* c's range is full. */
char *wrows_full(const struct wlease_claim *c);
/* The logs of a claim that frees this identity's row outside the range
 * (taking take), and of one that found a live holder's lock on an ID the
 * table calls free. */
void wrows_log_moved(const struct wlease_claim *c, long long past_max,
                     int64_t take);
void wrows_log_live(void);
char *wrows_live_lock(long long worker, long long until);

#endif
