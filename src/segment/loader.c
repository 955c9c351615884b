/* loader.c: the database threads of segment mode (see loader.h).
 *
 * Locking: one mutex (l->lock) guards the job queues, the backoff state, the
 * status and the /db snapshot; the condition variable wakes idle threads.
 * Store calls run with the lock released.
 */
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conceal.h"
#include "loader.h"
#include "log.h"
#include "segment.h"
#include "store.h"
#include "store_marks.h"

#define LOOKUP_BATCH 4          /* more pending lookups than this: one full list */
#define BACKOFF_MIN_MS 50

/* Load latency histogram bounds, in ms. */
static const double latency_bounds[] = { 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000 };
#define NBOUNDS (sizeof latency_bounds / sizeof latency_bounds[0])

struct loader {
    const struct config *cfg;
    struct segments *segs;
    void           (*wake)(void *, const char *, size_t);
    void            *wake_arg;

    int              nthreads;
    pthread_t       *threads;
    struct store   **stores;         /* one per thread */

    pthread_mutex_t  lock;
    pthread_cond_t   cond;
    int              stopping;

    struct segment_tag **loads;      /* FIFO of tags to load: a ring of
                                        loads_cap, nloads from loads_head */
    size_t           loads_head, nloads, loads_cap;
    char           (*lookups)[TAG_MAX + 1];
    size_t           nlookups, lookups_cap;
    struct loader_lease *leases_head, *leases_tail;   /* FIFO */
    int              refresh_wanted;
    int              rows_wanted;      /* next refresh keeps the rows for /db */
    int              refreshing;       /* a list read is in flight */
    int64_t          next_refresh_ms;  /* monotonic */

    _Atomic int      db_up;        /* written under lock; read lock-free */
    _Atomic int      refused;      /* the last load was refused (st.refusal) */
    int64_t          down_since_ms;
    int64_t          backoff_ms;
    int64_t          retry_at_ms;      /* monotonic: no store call before */
    struct loader_status st;

    struct conceal  *conceal;          /* concealed tags, or NULL */
    char            *rows_json;        /* last refresh, for /db */
    uint64_t         buckets[NBOUNDS + 1];
    double           latency_sum_ms;
};

struct loader *
loader_new(const struct config *cfg, char **cause)
{
    struct loader *l = xcalloc(1, sizeof *l);

    l->cfg = cfg;
    l->nthreads = (int)cfg->db_threads;
    l->stores = xcalloc((size_t)l->nthreads, sizeof *l->stores);
    store_thread_init();            /* start-up checks run on this thread */
    for (int i = 0; i < l->nthreads; i++) {
        l->stores[i] = store_open(cfg, cause);
        if (l->stores[i] == NULL) {
            loader_free(l);
            return NULL;
        }
    }
    /* One database of a multi-db set alone would repeat the others' IDs. */
    if (store_multi_count() == 0 && store_single_check(l->stores[0], cause) == -1) {
        loader_free(l);
        return NULL;
    }
    pthread_mutex_init(&l->lock, NULL);
    {
        /* Waits are on the monotonic clock: a wall clock stepped back must
         * not stretch a backoff. */
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&l->cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    l->db_up = 1;
    l->rows_json = xstrdup("[]");
    l->st.store = store_kind_name(l->stores[0]);
    return l;
}

void
loader_set_conceal(struct loader *l, struct conceal *c)
{
    l->conceal = c;
}

void
loader_attach(struct loader *l, struct segments *segs,
              void (*wake)(void *, const char *, size_t), void *wake_arg)
{
    l->segs = segs;
    l->wake = wake;
    l->wake_arg = wake_arg;
}

void
loader_free(struct loader *l)
{
    if (l == NULL)
        return;
    for (int i = 0; i < l->nthreads; i++)
        store_close(l->stores[i]);
    free(l->stores);
    free(l->threads);
    free(l->loads);
    free(l->lookups);
    free(l->rows_json);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->cond);
    free(l);
}

/* Queue a load (l->lock held). O(1); the ring doubles when full. */
static void
do_load_push(struct loader *l, struct segment_tag *t)
{
    if (l->nloads == l->loads_cap) {
        size_t cap = l->loads_cap ? l->loads_cap * 2 : 64;
        struct segment_tag **ring = xmalloc(cap * sizeof *ring);

        for (size_t i = 0; i < l->nloads; i++)
            ring[i] = l->loads[(l->loads_head + i) % l->loads_cap];
        free(l->loads);
        l->loads = ring;
        l->loads_cap = cap;
        l->loads_head = 0;
    }
    l->loads[(l->loads_head + l->nloads++) % l->loads_cap] = t;
}

/* The oldest queued load (l->lock held, nloads > 0). O(1). */
static struct segment_tag *
do_load_pop(struct loader *l)
{
    struct segment_tag *t = l->loads[l->loads_head];

    assert(l->nloads > 0);
    l->loads_head = (l->loads_head + 1) % l->loads_cap;
    l->nloads--;
    return t;
}

static void do_db_result(struct loader *l, int ok, const char *err);
static void do_load_result(struct loader *l, enum store_result rc,
                           const char *err);

struct loader_lease *
loader_lease_new(const char *tag, int64_t n)
{
    struct loader_lease *j = xcalloc(1, sizeof *j);

    snprintf(j->tag, sizeof j->tag, "%s", tag);
    j->n = n;
    atomic_store(&j->refs, 2);
    return j;
}

void
loader_lease_put(struct loader_lease *j)
{
    if (j != NULL && atomic_fetch_sub(&j->refs, 1) == 1)
        free(j);
}

void
loader_lease_submit(struct loader *l, struct loader_lease *j)
{
    pthread_mutex_lock(&l->lock);
    j->next = NULL;
    if (l->leases_tail != NULL)
        l->leases_tail->next = j;
    else
        l->leases_head = j;
    l->leases_tail = j;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

/* The oldest queued lease (l->lock held), or NULL. */
static struct loader_lease *
do_lease_pop(struct loader *l)
{
    struct loader_lease *j = l->leases_head;

    if (j != NULL) {
        l->leases_head = j->next;
        if (l->leases_head == NULL)
            l->leases_tail = NULL;
    }
    return j;
}

/* One lease straight from the table. A failure is the caller's answer, not
 * retried here: the request is waiting. */
static void
run_lease(struct loader *l, struct store *s, struct loader_lease *j)
{
    int64_t max_id = 0, db_step = 0;
    char *cause = NULL;
    enum store_result rc;

    if (atomic_load(&j->refs) == 1) {     /* the caller has given up */
        loader_lease_put(j);
        return;
    }
    rc = store_alloc(s, j->tag, j->n, &max_id, &db_step, &cause);
    pthread_mutex_lock(&l->lock);
    do_load_result(l, rc, cause);
    if (rc == STORE_OK)
        l->st.leases++;
    pthread_mutex_unlock(&l->lock);
    j->rc = rc;
    if (rc == STORE_OK) {
        assert(max_id - j->n >= 0);
        j->start = max_id - j->n;
    } else {
        snprintf(j->error, sizeof j->error, "%s", cause ? cause : "?");
    }
    free(cause);
    atomic_store_explicit(&j->done, 1, memory_order_release);
    if (l->wake != NULL)
        l->wake(l->wake_arg, j->tag, strlen(j->tag));
    loader_lease_put(j);
}

void
loader_hook_load(void *arg, struct segment_tag *t)
{
    struct loader *l = arg;

    pthread_mutex_lock(&l->lock);
    do_load_push(l, t);
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

/* Queue a lookup; lock held. */
static void
do_lookup_push(struct loader *l, const char *name)
{
    if (l->nlookups == l->lookups_cap) {
        l->lookups_cap = l->lookups_cap ? l->lookups_cap * 2 : 16;
        l->lookups = xrealloc(l->lookups, l->lookups_cap * sizeof *l->lookups);
    }
    snprintf(l->lookups[l->nlookups++], TAG_MAX + 1, "%s", name);
}

void
loader_hook_lookup(void *arg, const char *name)
{
    struct loader *l = arg;

    pthread_mutex_lock(&l->lock);
    do_lookup_push(l, name);
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

uint64_t
loader_refresh_now(struct loader *l, int keep_rows)
{
    uint64_t gen;

    pthread_mutex_lock(&l->lock);
    l->refresh_wanted = 1;
    if (keep_rows)
        l->rows_wanted = 1;
    /* A refresh already in flight may not keep the rows: the next one does. */
    gen = l->st.refresh_gen + (l->refreshing ? 2 : 1);
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
    return gen;
}

/* A load's outcome: as do_db_result (a refused or degraded load is a
 * failed one: backoff, the job kept), and the refusal for clients (its
 * code, or none after a load that worked). Lock held. */
static void
do_load_result(struct loader *l, enum store_result rc, const char *err)
{
    const char *code = rc == STORE_REFUSED ? "store_behind" :
        rc == STORE_DEGRADED ? "durability_degraded" : NULL;
    char c[32];

    if (rc == STORE_REFUSED && store_marks_refused(c, sizeof c, NULL, 0))
        code = c;
    /* A refusal is logged where it is decided, not as an outage. */
    if (code != NULL && l->db_up)
        l->down_since_ms = util_wall_ms();
    if (code != NULL)
        l->db_up = 0;
    do_db_result(l, !store_load_failed(rc), err);
    if (code != NULL)
        snprintf(l->st.refusal, sizeof l->st.refusal, "%s", code);
    else if (rc == STORE_OK)
        l->st.refusal[0] = '\0';
    if (code != NULL || rc == STORE_OK)
        atomic_store(&l->refused, code != NULL);
}

/* Record the outcome of a store call; lock held. */
static void
do_db_result(struct loader *l, int ok, const char *err)
{
    int64_t now = util_mono_ms();

    if (ok) {
        if (!l->db_up)
            log_info("database is back after %lld ms",
                     (long long)(util_wall_ms() - l->down_since_ms));
        l->db_up = 1;
        l->down_since_ms = 0;
        l->backoff_ms = 0;
        l->retry_at_ms = 0;
        return;
    }
    l->st.errors++;
    snprintf(l->st.last_error, sizeof l->st.last_error, "%s", err ? err : "?");
    if (l->db_up) {
        log_error("database unreachable, serving from buffers and retrying: %s",
                  l->st.last_error);
        l->down_since_ms = util_wall_ms();
    }
    l->db_up = 0;
    l->backoff_ms = l->backoff_ms ? l->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (l->backoff_ms > l->cfg->db_backoff_max_ms)
        l->backoff_ms = l->cfg->db_backoff_max_ms;
    l->retry_at_ms = now + l->backoff_ms;
}

static void
do_observe_latency(struct loader *l, double ms)
{
    size_t i = 0;

    while (i < NBOUNDS && ms > latency_bounds[i])
        i++;
    l->buckets[i]++;
    l->latency_sum_ms += ms;
}

/* Returns 0 if nothing changed for waiting requests (the database failed:
 * the load is queued again), 1 otherwise. */
/* A load's result (the range [max_id - step, max_id) when rc is
 * STORE_OK): the loader's state, the tag's, the log. Frees cause. Returns
 * as run_load. */
static int
load_done(struct loader *l, struct segment_tag *t, enum store_result rc,
          char *cause, double ms, int64_t max_id, int64_t step, int64_t db_step)
{
    const char *name = segment_tag_name(t);

    pthread_mutex_lock(&l->lock);
    do_load_result(l, rc, cause);
    if (rc == STORE_OK) {
        l->st.loads++;
        do_observe_latency(l, ms);
    } else if (store_load_failed(rc)) {
        do_load_push(l, t);         /* keep the job: retry after the backoff */
    }
    pthread_mutex_unlock(&l->lock);

    switch (rc) {
    case STORE_OK:
        segment_install(l->segs, t, max_id, step, db_step);
        log_debug("tag %s: loaded [%lld, %lld) step %lld in %.1f ms",
                  name, (long long)(max_id - step),
                  (long long)max_id, (long long)step, ms);
        break;
    case STORE_NOT_FOUND:
        log_info("tag %s: no longer in leaf_alloc", name);
        segment_tag_gone(l->segs, t);
        break;
    case STORE_BAD_ROW:
    case STORE_BAD_ARG:
    case STORE_EXISTS:
        /* This row, not the database: only this tag stops, until its row
         * is read again (refresh or lookup). Said once until it is fixed. */
        if (segment_tag_broken(l->segs, t))
            log_error("tag %s: cannot take a segment: %s; fix the leaf_alloc "
                      "row (this tag answers 503 bad_leaf_alloc_row until then)",
                      name, cause);
        break;
    case STORE_DB_ERROR:
    case STORE_REFUSED:
    case STORE_DEGRADED:
        break;
    }
    free(cause);
    return !store_load_failed(rc);
}

static int row_cmp(const void *a, const void *b);

/* A concealed tag's segments are whole blocks whatever its row's step
 * (conceal.h); the segment layer bounds a batch by the step it is given
 * (segment_take: at most SEGMENT_MAX_RANGES - 1 of them), so it is given
 * the block, not the row's step. */
static void
conceal_row_step(const struct loader *l, struct store_row *row)
{
    if (conceal_find(l->conceal, row->biz_tag, strlen(row->biz_tag)) != NULL)
        row->step = (int64_t)1 << conceal_bits(l->conceal);
}

#define CONCEAL_PENDING_WAIT_MS 3000  /* longest wait for another node's record */

/* Read the table and judge t's key records (conceal_check); *row_max: the
 * tag's row's max_id (-1: no row). Waits (on this loader thread) while
 * another node is between its intent and its record, at most
 * CONCEAL_PENDING_WAIT_MS, then calls it refused. STORE_OK, or the list's
 * failure with *cause. */
static enum store_result
conceal_read(struct store *s, struct conceal *c, struct conceal_tag *ct,
             int64_t *row_max, enum conceal_verdict *v, char *why, size_t cap,
             char **cause)
{
    int64_t until = util_mono_ms() + CONCEAL_PENDING_WAIT_MS;

    for (;;) {
        struct store_row *rows = NULL, key = { .max_id = 0 }, *row;
        size_t nrows = 0;
        enum store_result rc = store_list(s, &rows, &nrows, cause);

        if (rc != STORE_OK)
            return rc;
        *v = conceal_check(c, ct, rows, nrows, util_mono_ms(), why, cap);
        snprintf(key.biz_tag, sizeof key.biz_tag, "%s", conceal_tag_name(ct));
        row = nrows > 0 ? bsearch(&key, rows, nrows, sizeof *rows, row_cmp) : NULL;
        *row_max = row != NULL ? row->max_id : -1;
        free(rows);
        if (*v != CONCEAL_PENDING)
            return STORE_OK;
        if (util_mono_ms() >= until) {
            size_t len = strlen(why);

            snprintf(why + len, cap - len, " after %d ms: if no node is rotating "
                     "keys, one may have died between the two rows; a node of "
                     "that key completes the record when it loads",
                     CONCEAL_PENDING_WAIT_MS);
            *v = CONCEAL_REFUSED;
            return STORE_OK;
        }
        usleep(20000);
    }
}

/* Refuse t until its row is read again: the reason for requests and /health. */
static int
conceal_refuse(struct loader *l, struct segment_tag *t, struct conceal_tag *ct,
               const char *why)
{
    conceal_set_refused(ct, why);
    pthread_mutex_lock(&l->lock);
    do_load_result(l, STORE_OK, NULL);
    pthread_mutex_unlock(&l->lock);
    if (segment_tag_broken(l->segs, t))
        log_error("tag %s: refused: %s (this tag answers 503 conceal_key_changed "
                  "until then)", segment_tag_name(t), why);
    return 1;
}

/* This node's key record for t: its intent, then (unless another node of
 * the key wrote it meanwhile) the record, from the first block boundary
 * at or above the row's max_id read after the intent (conceal.c's DESIGN).
 * *v: the verdict after. STORE_OK or a failure with *cause. */
static enum store_result
conceal_record(struct loader *l, struct store *s, struct conceal_tag *ct,
               int64_t one, enum conceal_verdict *v, char *why, size_t cap,
               char **cause)
{
    char name[TAG_MAX + 1];
    int64_t row_max = -1, first;
    enum store_result rc;

    conceal_intent_name(l->conceal, ct, name);
    rc = store_insert(s, name, 0, conceal_bits(l->conceal),
                      CONCEAL_INTENT_DESCRIPTION, cause);
    if (rc == STORE_EXISTS) {               /* a node of this key was first */
        free(*cause);
        *cause = NULL;
        rc = STORE_OK;
    }
    if (rc == STORE_OK)
        rc = conceal_read(s, l->conceal, ct, &row_max, v, why, cap, cause);
    if (rc != STORE_OK || *v != CONCEAL_RECORD)
        return rc;
    if (row_max < 0)
        return STORE_NOT_FOUND;
    first = row_max > INT64_MAX - one ? INT64_MAX : (row_max + one - 1) / one * one;
    conceal_record_name(l->conceal, ct, name);
    rc = store_insert(s, name, first, conceal_bits(l->conceal),
                      CONCEAL_DESCRIPTION, cause);
    if (rc == STORE_OK) {
        conceal_recorded(l->conceal, ct, first);
        log_info("tag %s: concealed under key %s from ID %lld (key record %s)",
                 conceal_tag_name(ct), conceal_key_name(l->conceal),
                 (long long)first, name);
    } else if (rc == STORE_EXISTS) {        /* written meanwhile: fine */
        free(*cause);
        *cause = NULL;
        rc = STORE_OK;
    }
    *v = CONCEAL_OK;
    return rc;
}

/* A concealed tag's load (conceal.h): read the key records (and write this
 * node's when the tag has none of its key), take one whole aligned block,
 * read the records again, and serve the block only if they still give it
 * this node's key. Returns as run_load. */
static int
run_load_conceal(struct loader *l, struct store *s, struct segment_tag *t,
                 struct conceal_tag *ct)
{
    const char *name = segment_tag_name(t);
    int64_t one = (int64_t)1 << conceal_bits(l->conceal);
    int64_t step, max_id = 0, db_step = 0, block = -1, row_max = -1;
    int64_t t0 = util_mono_us();
    char *cause = NULL, why[1024];
    enum conceal_verdict v = CONCEAL_REFUSED;
    enum store_result rc = STORE_OK;

    for (int round = 0; round < 3 && rc == STORE_OK; round++) {
        why[0] = '\0';
        rc = conceal_read(s, l->conceal, ct, &row_max, &v, why, sizeof why, &cause);
        if (rc == STORE_OK && v == CONCEAL_RECORD)
            rc = conceal_record(l, s, ct, one, &v, why, sizeof why, &cause);
        if (rc != STORE_OK)
            break;
        if (v == CONCEAL_REFUSED)
            return conceal_refuse(l, t, ct, why);
        if (row_max < 0) {
            rc = STORE_NOT_FOUND;
            break;
        }
        /* One block, aligned: a step that ends on a boundary if no other
         * load comes between; a range that holds none (the row was not on
         * a boundary: a new tag, plain loads of it) is dropped, a gap. */
        step = row_max <= INT64_MAX - 2 * one ? conceal_step(l->conceal, row_max) : one;
        block = -1;
        for (int tries = 0; rc == STORE_OK && tries < 4; tries++) {
            rc = store_alloc(s, name, step, &max_id, &db_step, &cause);
            if (rc != STORE_OK || conceal_block(l->conceal, max_id, step, &block) == 0)
                break;
            log_info("tag %s: [%lld, %lld) holds no whole block of 2^%u: dropped, "
                     "taking the next block", name, (long long)(max_id - step),
                     (long long)max_id, conceal_bits(l->conceal));
            step = conceal_step(l->conceal, max_id);
            block = -1;
        }
        if (rc == STORE_OK && block < 0) {
            rc = STORE_DB_ERROR;    /* other loads keep moving the row: retry */
            cause = xasprintf("tag %s: four ranges in a row held no whole block "
                              "of 2^%u", name, conceal_bits(l->conceal));
        }
        if (rc != STORE_OK)
            break;
        /* The records again: another key's intent or record since the
         * first read (a rotation) takes the block from this key. */
        rc = conceal_read(s, l->conceal, ct, &row_max, &v, why, sizeof why, &cause);
        if (rc != STORE_OK || v == CONCEAL_OK)
            break;
        log_info("tag %s: block %lld dropped (a gap): the key records changed "
                 "while it was taken", name, (long long)block);
        block = -1;
        if (v == CONCEAL_REFUSED)
            return conceal_refuse(l, t, ct, why);
    }
    if (rc == STORE_OK && block < 0) {
        rc = STORE_DB_ERROR;
        cause = xasprintf("tag %s: the key records kept changing over three "
                          "loads", name);
    }
    if (rc == STORE_OK)
        conceal_set_refused(ct, NULL);
    return load_done(l, t, rc, cause, (double)(util_mono_us() - t0) / 1000.0,
                     (block + 1) * one, one, one);
}

static int
run_load(struct loader *l, struct store *s, struct segment_tag *t)
{
    struct conceal_tag *ct = conceal_find(l->conceal, segment_tag_name(t),
                                          strlen(segment_tag_name(t)));
    if (ct != NULL)
        return run_load_conceal(l, s, t, ct);

    int64_t step = segment_next_step(l->segs, t), max_id = 0, db_step = 0;
    int64_t t0 = util_mono_us();
    char *cause = NULL;
    enum store_result rc = store_alloc(s, segment_tag_name(t), step, &max_id,
                                       &db_step, &cause);
    double ms;

    /* The adapted step no longer fits below INT64_MAX but the row's own
     * step may: take what fits, never less than the row's step. */
    if (rc == STORE_BAD_ROW && max_id > 0 && db_step >= 1 &&
        INT64_MAX - max_id < step && INT64_MAX - max_id >= db_step) {
        int64_t fits = INT64_MAX - max_id;

        log_warn("tag %s: max_id %lld leaves room for %lld IDs: taking a "
                 "step of %lld instead of leafd's %lld (the row's step is "
                 "%lld)", segment_tag_name(t), (long long)max_id,
                 (long long)fits, (long long)fits, (long long)step,
                 (long long)db_step);
        free(cause);
        cause = NULL;
        step = fits;
        rc = store_alloc(s, segment_tag_name(t), step, &max_id, &db_step, &cause);
    }
    ms = (double)(util_mono_us() - t0) / 1000.0;
    return load_done(l, t, rc, cause, ms, max_id, step, db_step);
}

static int
row_cmp(const void *a, const void *b)
{
    return strcmp(((const struct store_row *)a)->biz_tag,
                  ((const struct store_row *)b)->biz_tag);
}

static char *
rows_to_json(const struct store_row *rows, size_t n)
{
    struct sbuf b = { 0 };

    sbuf_puts(&b, "[");
    for (size_t i = 0; i < n; i++) {
        sbuf_puts(&b, i ? ",{\"biz_tag\":" : "{\"biz_tag\":");
        sbuf_json_str(&b, rows[i].biz_tag);
        sbuf_printf(&b, ",\"max_id\":\"%lld\",\"step\":%lld,\"description\":",
                    (long long)rows[i].max_id, (long long)rows[i].step);
        sbuf_json_str(&b, rows[i].description);
        sbuf_puts(&b, ",\"update_time\":");
        sbuf_json_str(&b, rows[i].update_time);
        sbuf_puts(&b, "}");
    }
    sbuf_puts(&b, "]");
    return b.p;
}

/* Read every row: new tags, step changes, deleted tags, and the /db copy.
 * names (n of them) are pending lookups this list answers too. */
static void
run_refresh(struct loader *l, struct store *s, char (*names)[TAG_MAX + 1], size_t n)
{
    struct store_row *rows = NULL;
    size_t nrows = 0;
    char *cause = NULL, *json = NULL;
    int keep;
    enum store_result rc;
    uint64_t since = segments_generation(l->segs);

    store_marks_sync();         /* the marks' appends, once a refresh */
    store_probe(s);             /* the server's state, also while idle */
    pthread_mutex_lock(&l->lock);
    keep = l->rows_wanted;
    l->rows_wanted = 0;
    l->refreshing++;
    pthread_mutex_unlock(&l->lock);
    rc = store_list(s, &rows, &nrows, &cause);

    if (rc == STORE_OK) {
        size_t nseg = 0;

        if (nrows > 0)          /* rows is NULL then: qsort's arguments are nonnull */
            qsort(rows, nrows, sizeof *rows, row_cmp);
        if (keep)               /* /db shows the table, serial rows too */
            json = rows_to_json(rows, nrows);
        /* Serial periods' rows are not segment tags: a segment load would
         * draw on the row serial numbers count in (and, over several
         * databases, in blocks from a row that lives in one). */
        conceal_refresh(l->conceal, rows, nrows);
        for (size_t i = 0; i < nrows; i++)
            if (!store_row_is_serial(&rows[i]) && !conceal_row_is_record(&rows[i])) {
                rows[nseg] = rows[i];
                conceal_row_step(l, &rows[nseg++]);
            }
        segment_refresh(l->segs, rows, nseg, since);
        for (size_t i = 0; i < n; i++) {
            struct store_row key = { .max_id = 0 };
            snprintf(key.biz_tag, sizeof key.biz_tag, "%s", names[i]);
            if (nseg == 0 || bsearch(&key, rows, nseg, sizeof *rows, row_cmp) == NULL)
                segment_tag_missing(l->segs, names[i]);
        }
    }
    pthread_mutex_lock(&l->lock);
    l->refreshing--;
    do_db_result(l, rc == STORE_OK, cause);
    if (rc == STORE_OK) {
        l->st.refreshes++;
        l->st.refresh_gen++;
        l->st.refreshed_ms = util_wall_ms();
        if (json != NULL) {
            free(l->rows_json);
            l->rows_json = json;
        }
    } else {
        l->refresh_wanted = 1;     /* retry after the backoff */
        l->rows_wanted |= keep;
        for (size_t i = 0; i < n; i++)    /* and the lookups it answered */
            do_lookup_push(l, names[i]);
    }
    pthread_mutex_unlock(&l->lock);
    free(rows);
    free(cause);
    malloc_trim(0);                /* hand the row list back to the system */
}

static void
run_lookups(struct loader *l, struct store *s, char (*names)[TAG_MAX + 1], size_t n)
{
    if (n > LOOKUP_BATCH) {
        run_refresh(l, s, names, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct store_row row;
        char *cause = NULL;
        enum store_result rc = store_get(s, names[i], &row, &cause);

        pthread_mutex_lock(&l->lock);
        do_db_result(l, rc != STORE_DB_ERROR, cause);
        l->st.lookups++;
        if (rc == STORE_DB_ERROR)  /* put the rest back; retry after the backoff */
            for (size_t j = i; j < n; j++)
                do_lookup_push(l, names[j]);
        pthread_mutex_unlock(&l->lock);
        free(cause);
        if (rc == STORE_DB_ERROR)
            return;
        if (rc == STORE_OK && !store_row_is_serial(&row) &&
            !conceal_row_is_record(&row)) {
            conceal_row_step(l, &row);
            segment_tag_found(l->segs, &row);
        }
        else            /* not found, or a serial period's row (above) */
            segment_tag_missing(l->segs, names[i]);
    }
}

static void
wait_until(struct loader *l, int64_t mono_ms)
{
    struct timespec ts;

    ts.tv_sec = mono_ms / 1000;
    ts.tv_nsec = (mono_ms % 1000) * 1000000;
    pthread_cond_timedwait(&l->cond, &l->lock, &ts);
}

struct worker_arg {
    struct loader *l;
    int index;
};

static void *
loader_main(void *arg)
{
    struct worker_arg *wa = arg;
    struct loader *l = wa->l;
    struct store *s = l->stores[wa->index];

    free(wa);
    store_thread_init();
    pthread_mutex_lock(&l->lock);
    while (!l->stopping) {
        int64_t now = util_mono_ms();
        struct segment_tag *t = NULL;
        struct loader_lease *lease = NULL;
        char (*names)[TAG_MAX + 1] = NULL;
        size_t n = 0;
        int refresh = 0;

        if (l->retry_at_ms > now) {
            wait_until(l, l->retry_at_ms);
            continue;
        }
        if (now >= l->next_refresh_ms) {
            l->refresh_wanted = 1;
            l->next_refresh_ms = now + l->cfg->refresh_ms;
        }
        if (l->nloads > 0) {
            t = do_load_pop(l);
        } else if (l->leases_head != NULL) {
            lease = do_lease_pop(l);
        } else if (l->refresh_wanted) {
            l->refresh_wanted = 0;
            refresh = 1;
        } else if (l->nlookups > 0) {
            n = l->nlookups;
            names = l->lookups;
            l->lookups = NULL;
            l->nlookups = l->lookups_cap = 0;
        } else {
            wait_until(l, l->next_refresh_ms);
            continue;
        }
        pthread_mutex_unlock(&l->lock);

        if (lease != NULL) {
            run_lease(l, s, lease);     /* wakes its own tag */
            pthread_mutex_lock(&l->lock);
            continue;
        }
        {
            int changed = 1;

            if (t != NULL)
                changed = run_load(l, s, t);
            else if (refresh)
                run_refresh(l, s, NULL, 0);
            else
                run_lookups(l, s, names, n);
            /* Retry parked requests only when something may serve them, and
             * only those of the tags this work was about (a refresh: all). */
            if (changed && l->wake != NULL) {
                if (t != NULL)
                    l->wake(l->wake_arg, segment_tag_name(t),
                            strlen(segment_tag_name(t)));
                else if (refresh || n > LOOKUP_BATCH)
                    l->wake(l->wake_arg, NULL, 0);
                else
                    for (size_t i = 0; i < n; i++)
                        l->wake(l->wake_arg, names[i], strlen(names[i]));
            }
            free(names);
        }

        pthread_mutex_lock(&l->lock);
    }
    pthread_mutex_unlock(&l->lock);
    store_thread_end();
    return NULL;
}

int
loader_start(struct loader *l, char **cause)
{
    /* Load all tags before serving; a database that is down is retried. */
    store_thread_init();
    run_refresh(l, l->stores[0], NULL, 0);
    l->next_refresh_ms = util_mono_ms() + l->cfg->refresh_ms;
    l->threads = xcalloc((size_t)l->nthreads, sizeof *l->threads);
    for (int i = 0; i < l->nthreads; i++) {
        struct worker_arg *wa = xmalloc(sizeof *wa);
        int rc;

        wa->l = l;
        wa->index = i;
        rc = pthread_create(&l->threads[i], NULL, loader_main, wa);
        if (rc != 0) {
            *cause = xasprintf("cannot start database thread: %s", strerror(rc));
            free(wa);
            l->nthreads = i;
            return -1;
        }
    }
    return 0;
}

void
loader_stop(struct loader *l)
{
    if (l == NULL || l->threads == NULL)
        return;
    pthread_mutex_lock(&l->lock);
    l->stopping = 1;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
    for (int i = 0; i < l->nthreads; i++)
        pthread_join(l->threads[i], NULL);
    {
        struct loader_lease *j;

        while ((j = do_lease_pop(l)) != NULL)    /* never run: the caller answers */
            loader_lease_put(j);
    }
    free(l->threads);
    l->threads = NULL;
}

int
loader_refused(struct loader *l)
{
    return atomic_load_explicit(&l->refused, memory_order_relaxed);
}

int
loader_db_up(struct loader *l)
{
    return atomic_load_explicit(&l->db_up, memory_order_relaxed);
}

void
loader_status(struct loader *l, struct loader_status *st)
{
    pthread_mutex_lock(&l->lock);
    *st = l->st;
    st->db_up = l->db_up;
    st->down_since_ms = l->down_since_ms;
    pthread_mutex_unlock(&l->lock);
}

uint64_t
loader_rows_json(struct loader *l, struct sbuf *b)
{
    uint64_t gen;

    pthread_mutex_lock(&l->lock);
    sbuf_puts(b, l->rows_json);
    gen = l->st.refresh_gen;
    pthread_mutex_unlock(&l->lock);
    return gen;
}

void
loader_metrics(struct loader *l, struct sbuf *b)
{
    uint64_t cum = 0;

    pthread_mutex_lock(&l->lock);
    sbuf_metric_head(b, "leafd_segment_load_seconds", "histogram",
                     "Time to take a segment from the database.");
    for (size_t i = 0; i < NBOUNDS; i++) {
        cum += l->buckets[i];
        sbuf_printf(b, "leafd_segment_load_seconds_bucket{le=\"%g\"} %llu\n",
                    latency_bounds[i] / 1000.0, (unsigned long long)cum);
    }
    cum += l->buckets[NBOUNDS];
    sbuf_printf(b, "leafd_segment_load_seconds_bucket{le=\"+Inf\"} %llu\n"
                   "leafd_segment_load_seconds_sum %g\n"
                   "leafd_segment_load_seconds_count %llu\n",
                (unsigned long long)cum, l->latency_sum_ms / 1000.0,
                (unsigned long long)cum);
    sbuf_metric_u64(b, "leafd_segment_loads_total", "counter",
                    "Segments taken from the database.", l->st.loads);
    sbuf_metric_u64(b, "leafd_db_errors_total", "counter",
                    "Failed database calls.", l->st.errors);
    sbuf_metric_i64(b, "leafd_db_up", "gauge",
                    "1 if the last database call succeeded.", l->db_up);
    sbuf_metric_head(b, "leafd_db_queries_total", "counter",
                     "Database transactions by kind.");
    sbuf_printf(b, "leafd_db_queries_total{kind=\"alloc\"} %llu\n"
                   "leafd_db_queries_total{kind=\"lookup\"} %llu\n"
                   "leafd_db_queries_total{kind=\"list\"} %llu\n"
                   "leafd_db_queries_total{kind=\"lease\"} %llu\n",
                (unsigned long long)(l->st.loads),
                (unsigned long long)l->st.lookups,
                (unsigned long long)l->st.refreshes,
                (unsigned long long)l->st.leases);
    pthread_mutex_unlock(&l->lock);
}
