/* workerid_rows.c: a leaf_worker claim's decisions (see workerid_rows.h),
 * shared by the MySQL and PostgreSQL stores. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "util.h"
#include "workerid_rows.h"

char *
wrows_waiting(long long until)
{
    return xasprintf("leaf_worker went back in time (a dump restored, a "
                     "replica promoted): a worker ID whose row is older may "
                     "still be held by a live node; not taking one before "
                     "server time %lld (a lease after; docs/operations.md)",
                     until);
}

char *
wrows_live_lock(long long worker, long long until)
{
    char w[32] = "a";

    if (worker >= 0)
        snprintf(w, sizeof w, "%lld", worker);
    return xasprintf("leaf_worker went back in time (rows restored?): "
                     "snowflake worker ID %s that it calls free is held by a "
                     "live node (its connection holds the ID's lock and "
                     "writes); not taking it, nor any row older than now "
                     "before server time %lld (docs/operations.md)", w,
                     until);
}

int
wrows_wanted(const struct wlease_claim *c, const struct wrows_row *rows,
             size_t n, long long now, long long since, int64_t *row,
             int64_t *move, char **cause)
{
    *row = -1;
    *move = -1;
    for (size_t i = 0; i < n; i++) {
        const struct wrows_row *w = &rows[i];
        if (w->worker == c->want_worker)
            *row = (int64_t)i;
        else if (strcmp(w->ident, c->identity) == 0)
            *move = w->worker;
    }
    /* the alias (k8s: the bare pod name of a run before namespaces) is
     * this identity's former name: its row is ours to take back */
    if (*row >= 0 && strcmp(rows[*row].ident, c->identity) != 0 &&
        (c->alias == NULL || c->alias[0] == '\0' ||
         strcmp(rows[*row].ident, c->alias) != 0)) {
        const struct wrows_row *w = &rows[*row];
        if (w->hb < since && now - since < c->lease_ms) {
            *cause = wrows_waiting(since + c->lease_ms);
            return WLEASE_DOWN;
        }
        if (w->hb >= since && !w->released && now - w->hb < c->lease_ms) {
            *cause = xasprintf("snowflake worker ID %" PRId64 " is held by "
                               "%s (instance %s) in leaf_worker, its lease "
                               "live (heartbeat %lld ms ago); %s cannot "
                               "have it: check snowflake.k8s.ordinal_offset",
                               c->want_worker, w->ident, w->inst,
                               now - w->hb, c->identity);
            return WLEASE_REFUSED;
        }
        if (w->fence >= c->now_ms) {
            *cause = xasprintf("snowflake worker ID %" PRId64 " was freed "
                               "in leaf_worker with fence %lld, not below "
                               "this node's clock %" PRId64 ": not taking "
                               "it yet", c->want_worker, w->fence,
                               c->now_ms);
            return WLEASE_DOWN;     /* the clock passes it soon */
        }
    }
    return WLEASE_OK;
}

int
wrows_scan(const struct wlease_claim *c, const struct wrows_row *rows,
           size_t n, long long now, long long since, int has_epoch,
           wrows_used_fn used, void *arg, struct wrows_pick *out,
           char **cause)
{
    memset(out, 0, sizeof *out);
    out->take = -1;
    for (size_t i = 0, expect = c->min_worker; out->take < 0 &&
         expect <= c->max_worker; expect++) {
        int64_t cand = -1;
        long long cfence = 0;
        int gap = 0, old = 0, u = 0;

        while (i < n && (uint64_t)rows[i].worker < expect)
            i++;                /* below the range */
        if (i < n && (uint64_t)rows[i].worker == expect) {
            old = rows[i].hb < since;

            if (old && now - since < c->lease_ms)
                out->waiting = 1;
            if ((old ? now - since >= c->lease_ms :
                 rows[i].released || now - rows[i].hb >= c->lease_ms) &&
                rows[i].fence < c->now_ms &&
                strcmp(rows[i].ident, c->identity) != 0) {
                cand = rows[i].worker;
                cfence = rows[i].fence;
            }
            i++;
        } else {
            cand = (int64_t)expect;
            gap = 1;
        }
        if (cand < 0)
            continue;
        /* free by the table (its lease expired since a write at or after
         * since, or released, or no row), but a holder is writing it: the
         * table went back in time (rows put back, a restore). A row older
         * than since is free only a lease after since, whatever its lock
         * (a holder would have written it within that); a gap in a table
         * this claim found without an epoch row (emptied) gates on the
         * new epoch, which is past what any holder confirmed. */
        if (gap && !has_epoch)
            old = 1;
        if (!old && used(arg, cand, c->lease_ms, &u, cause) == -1)
            return -1;
        if (!old && u) {
            out->live = 1;
            continue;
        }
        out->take = cand;
        out->fence = cfence;
        out->insert = gap;
    }
    return 0;
}

int64_t
wrows_gate(const struct wlease_claim *c, const struct wrows_row *rows,
           size_t n, int64_t take, int64_t fence, int insert,
           long long past_fence, long long epoch, long long since)
{
    int gate_since = 0;

    /* this identity issued up to that fence under the old layout: its
     * new ID waits past it too */
    if (past_fence > fence)
        fence = past_fence;
    /* no row (never used, or lost with the table): every fence a node held
     * under a lost row was written before the epoch */
    if (insert && epoch + c->unknown_gate_ms > fence)
        fence = epoch + c->unknown_gate_ms;
    /* a row older than since, or none: its holder may have issued up to
     * anything it confirmed before since */
    for (size_t i = 0; i < n; i++)
        if (rows[i].worker == take && rows[i].hb < since)
            gate_since = 1;
    if ((insert || gate_since) && since + c->unknown_gate_ms > fence)
        fence = since + c->unknown_gate_ms;
    return fence;
}

int
wrows_own(const struct wlease_claim *c, const struct wrows_row *rows,
          size_t n, long long now, int64_t *take, int64_t *fence,
          long long *past_max, long long *past_fence, char **cause)
{
    for (size_t i = 0; *take < 0 && i < n; i++) {
        if (strcmp(rows[i].ident, c->identity) != 0)
            continue;
        if (strcmp(rows[i].inst, c->nonce) != 0 &&
            strcmp(rows[i].inst, c->prev_nonce) != 0 &&
            !rows[i].released && now - rows[i].hb < c->lease_ms) {
            *cause = xasprintf("snowflake identity %s is in use: another "
                               "live leafd instance (%s) holds its lease in "
                               "leaf_worker (heartbeat %lld ms ago); give "
                               "each process its own snowflake.ip / port",
                               c->identity, rows[i].inst, now - rows[i].hb);
            return WLEASE_REFUSED;
        }
        if ((uint64_t)rows[i].worker > c->max_worker ||
            (uint64_t)rows[i].worker < c->min_worker) {
            *past_max = rows[i].worker;
            *past_fence = rows[i].fence;
            continue;
        }
        *take = rows[i].worker;
        *fence = rows[i].fence;
    }
    return WLEASE_OK;
}

char *
wrows_full(const struct wlease_claim *c)
{
    return xasprintf("no free snowflake worker ID in leaf_worker: all "
                     "%" PRIu64 " (%" PRIu64 "..%" PRIu64 ") are in "
                     "use (leases live, or fences not yet passed)%s",
                     c->max_worker - c->min_worker + 1, c->min_worker,
                     c->max_worker, WLEASE_FULL_HINT);
}

void
wrows_log_moved(const struct wlease_claim *c, long long past_max,
                int64_t take)
{
    log_warn("snowflake: %s held worker ID %lld in leaf_worker, outside "
             "this node's range %" PRIu64 "..%" PRIu64 " (worker_bits "
             "lowered, or the range moved): freeing that row (fence "
             "kept), taking %" PRId64, c->identity, past_max,
             c->min_worker, c->max_worker, take);
}

void
wrows_log_live(void)
{
    log_warn("snowflake: a worker ID that leaf_worker calls free is "
             "held by a live node (its connection holds the ID's lock): "
             "the table went back in time (rows restored?); no worker ID "
             "whose row is older before a lease has passed");
}
