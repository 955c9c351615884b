/* store_multi.c: segment mode over several databases, MySQL/MariaDB
 * (segment.mysql.urls) or PostgreSQL (segment.postgresql.urls), so that
 * losing one database is invisible to clients. Every member is of one
 * kind; the set calls them through that kind's store_member_ops
 * (store_mysql_multi.c, store_pg_multi.c).
 *
 * DESIGN
 *
 * Disjoint by construction: interleaved blocks. The ID space is cut into
 * blocks of block_size IDs; block k belongs to database k mod N. Database r
 * hands out ranges only inside blocks it owns, and a range never crosses a
 * block's end (store_block_start: the rest of a block too short for the
 * range is skipped). Each database's leaf_alloc.max_id only grows, under
 * its row lock, so one database never repeats itself while its rows are
 * not set back; two databases never hand out the same block, whatever
 * their max_id values are. So no two databases' ranges overlap, with any
 * database up, down or slow. A database restored from an older copy (or a
 * promoted replica without the last commits) is different: its max_id
 * went back, and its next loads would hand out its own past blocks again.
 * The blocks keep that to its own blocks; what stops it is multi_behind
 * below, which sees only what some node recorded (the highest max_id this
 * process got from it, and the tops pushed to the others after each
 * load): a load it served whose push did not land, by a node that since
 * restarted, is in no record.
 * Each range is contiguous: the allocator's fast path is unchanged.
 *
 * Each database's leafd_multi_db row says its index, N, the block size and
 * since_block: the scheme holds for blocks >= since_block only. Every load
 * reads that row in share mode inside its transaction and refuses a
 * database whose row differs from what this node was started with, or that
 * is frozen; so nodes with an outdated list of databases stop loading
 * instead of colliding. `leafd multi-db init` (store_multi_init) freezes
 * every database (waiting out loads in flight), reads every tag's max_id
 * everywhere, puts since_block above all of them, raises the rows to it and
 * writes the new rows: blocks below since_block are never handed out
 * again, so a scheme change (a database added) cannot repeat an ID. The
 * same command prepares a set the first time (the first URL's rows are
 * copied to the others) and is safe to run twice.
 *
 * A member init cannot read. Each database has an identity (its self row
 * in leafd_multi_member) and records the set's members with, for each,
 * the highest max_id it is known to have handed out ("top"). After every
 * load, before the range is used, the node raises that database's top in
 * every other database marked up (push_top). Init takes since_block above
 * every top any listed database recorded, and refuses a list that lacks a
 * member of a set one of them belongs to, unless the operator gives
 * --floor (no ID below it is handed out again): a load the missing member
 * served while the others were unreachable is in no record, so only the
 * operator can say how far it went. A listed database whose own rows are
 * below the top the others recorded for it (restored from an older copy)
 * makes init set the set again above that top, even with the same list;
 * so does a set without member records (made before leafd_multi_member:
 * no listed database has a member row with pos >= 0), whose members init
 * then writes.
 * A node keeps such a database out of loads (multi_behind, at start and
 * when a probe finds it back): its rows must reach the highest max_id this
 * process got from it and every top the databases up recorded for it.
 *
 * Upward trend. A load passes the highest max_id this process has received
 * for the tag (any database) as a floor: a node that fails over to a
 * database whose counter lags jumps above what it served, never below.
 * Nodes on different databases serve different blocks; across the cluster
 * IDs trend upward by block, as several Leaf nodes' do by segment.
 *
 * Health (process-wide; every loader thread has its own connections): a
 * load tries the database that answered last first, then the other ones
 * marked up, in order. A database error or a timeout (segment.db_timeout_ms
 * rounded up to seconds, MySQL's unit; PostgreSQL: leafd's own deadline on
 * each statement, db_pg.h) marks that database down and the load moves to
 * the next one at once. A database marked down is not tried
 * by loads while another is up: it is probed (connect and ping) by the
 * periodic refresh once its backoff (0.5 s, then 1 s) has passed, so
 * no load waits on a dead database twice. When every database is down,
 * those whose backoff has passed are tried.
 *
 * A row's step over the block size (a DBA's change at run time) is capped
 * at the block size for loads, logged once per tag and step (cap_step):
 * the loader reads the capped step from list, get and alloc alike.
 *
 * Serial numbers' period rows ("PAY:20261123", "PAY:all") are loaded from
 * the first database alone: a serial's sequence must come from one
 * counter, and blocks would overflow its digits. A serial load checks the
 * first database's leafd_multi_db row as a segment load does, in its
 * transaction, so a node whose list is outdated takes no serial there.
 * After each serial load, before the range is used, the node copies the
 * row's max_id into every other database marked up (push_serial, an
 * upsert that only raises it). Init merges every listed database's serial
 * rows (the first one's and the copies) into every database of the new
 * set, each at the greatest value any of them has (by key, whatever the
 * key says), so a reordered list, a new first database, a first database
 * removed or restored from an older dump goes on from there. While the
 * nodes run, a serial load also starts at or above the row's copies in
 * the other databases up and the highest max_id this process got for the
 * row (copies_key, serial_row_name: the floor's mark), or is refused in
 * its transaction: a first database restored under running nodes repeats
 * no serial that a copy or this process recorded. It refuses a
 * list whose old first database is missing, or behind its record, while
 * no other listed database holds a copy of a serial row, unless the
 * operator accepts that serials start again (--accept-serial-restart). A
 * serial load the first database served while the others were
 * unreachable has no copy: like a block top, only the operator knows it.
 * store_serial_alloc goes to the first
 * database and creates its rows with description STORE_SERIAL_DESCRIPTION
 * (store_insert refuses that description for other rows): that description,
 * never the row's name, is what start-up checks and multi-db init leave
 * out, and what the loader never makes a segment tag (store_row_is_serial).
 * Serials wait out an outage of the first database (their buffers,
 * then 503 serial_unavailable); every other row, whatever its name, is a
 * segment tag: in every database, with failover.
 */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "store.h"
#include "store_impl.h"
#include "store_marks.h"
#include "multi_block.h"
#include "util.h"

#define MULTI_BACKOFF_MIN_MS 500
#define MULTI_BACKOFF_MAX_MS 1000
#define FLOOR_BUCKETS 1024

struct multi_db {
    char            *url;
    _Atomic int      up;
    _Atomic int64_t  down_since_ms;     /* wall */
    _Atomic int64_t  retry_at_ms;       /* monotonic */
    _Atomic int64_t  backoff_ms;
    _Atomic uint64_t loads, failures, failovers_to;
    _Atomic int      behind;            /* multi_behind: no load tries it */
    _Atomic int64_t  top_seen;          /* its highest max_id known here */
    char             server[STORE_MEMBER_ID_MAX]; /* its server at its last
                                           load ("": none yet); shared.lock */
    _Atomic int      server_changed;    /* multi_alloc_on: out until restart */
    char             where[160];
    char             last_error[256];   /* shared.lock */
};

struct floor_entry {
    struct floor_entry *next;
    int64_t             max_id;
    int64_t             capped_step;    /* a row step over the block, said */
    char                tag[TAG_MAX + 1];
};

/* One per process: what every loader thread's multi store shares. */
static struct {
    pthread_mutex_t     lock;
    int                 ready;
    int                 n;
    struct multi_meta   want;           /* db_index filled per database */
    int                 want_known;
    int64_t             lease_max, max_step;    /* the config's, for fits */
    int64_t             conceal_step;   /* 2^(conceal_bits + 1), 0: none */
    int                 conceal_bits;
    _Atomic int         preferred;
    struct multi_db     db[STORE_MULTI_MAX];
    _Atomic int64_t     member_id[STORE_MULTI_MAX];     /* 0: not known */
    struct floor_entry *floors[FLOOR_BUCKETS];
} shared = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct store_multi {
    struct store  base;
    const struct store_member_ops *mo;  /* the members' kind */
    int           n;
    struct store *sub[STORE_MULTI_MAX];
};

static const struct store_ops multi_ops, multi_pg_ops;

/* ---- health ---- */

static void
mark_up(int i)
{
    struct multi_db *d = &shared.db[i];

    if (!atomic_exchange(&d->up, 1))
        log_info("segment database %d (%s) is up again", i, d->where);
    atomic_store(&d->backoff_ms, MULTI_BACKOFF_MIN_MS);
}

static void
mark_down(int i, const char *cause)
{
    struct multi_db *d = &shared.db[i];
    int64_t b = atomic_load(&d->backoff_ms);

    atomic_fetch_add(&d->failures, 1);
    if (b < MULTI_BACKOFF_MIN_MS)
        b = MULTI_BACKOFF_MIN_MS;
    atomic_store(&d->retry_at_ms, util_mono_ms() + b);
    atomic_store(&d->backoff_ms, b * 2 > MULTI_BACKOFF_MAX_MS ?
                 MULTI_BACKOFF_MAX_MS : b * 2);
    int was_up, same;

    pthread_mutex_lock(&shared.lock);
    same = strcmp(d->last_error, cause ? cause : "?") == 0;
    snprintf(d->last_error, sizeof d->last_error, "%s", cause ? cause : "?");
    pthread_mutex_unlock(&shared.lock);
    was_up = atomic_exchange(&d->up, 0);
    if (was_up)
        atomic_store(&d->down_since_ms, util_wall_ms());
    /* Once when it goes down, and again when the reason changes (a
     * database that answers again but is refused for another reason). */
    if (was_up || !same)
        log_warn("segment database %d (%s) is %s: %s; loads go to the "
                 "others", i, d->where, was_up ? "down" : "still down",
                 cause ? cause : "?");
}

/* ---- the floor: the highest max_id this process got, per tag ---- */

static struct floor_entry **
floor_slot(const char *tag)
{
    uint64_t h = UINT64_C(14695981039346656037);

    for (const char *p = tag; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
    return &shared.floors[h % FLOOR_BUCKETS];
}

/* The tag's entry, made when missing. Caller holds shared.lock. */
static struct floor_entry *
do_floor_entry(const char *tag)
{
    struct floor_entry **slot = floor_slot(tag), *e;

    for (e = *slot; e != NULL; e = e->next)
        if (strcmp(e->tag, tag) == 0)
            return e;
    e = xcalloc(1, sizeof *e);
    snprintf(e->tag, sizeof e->tag, "%s", tag);
    e->next = *slot;
    *slot = e;
    return e;
}

/* The tag's floor: the highest max_id this process got for it, here or
 * kept from a run before in the marks (segment.marks_file), so that a
 * restarted node's ranges pass the marks' check too. */
static int64_t
floor_get(const char *tag)
{
    int64_t v, mark = store_marks_get(tag);

    pthread_mutex_lock(&shared.lock);
    v = do_floor_entry(tag)->max_id;
    pthread_mutex_unlock(&shared.lock);
    return v > mark ? v : mark;
}

static void
floor_raise(const char *tag, int64_t max_id)
{
    struct floor_entry *e;

    pthread_mutex_lock(&shared.lock);
    e = do_floor_entry(tag);
    if (max_id > e->max_id)
        e->max_id = max_id;
    pthread_mutex_unlock(&shared.lock);
}

/* The step loads use for a row whose step is step: at most the block size
 * (a range never crosses a block). A step over it is logged once per tag
 * and step, not per load. Block size not known yet: step. */
static int64_t
cap_step(const char *tag, int64_t step)
{
    struct floor_entry *e;
    int64_t b;
    int say = 0;

    pthread_mutex_lock(&shared.lock);
    b = shared.want_known ? shared.want.block_size : 0;
    if (b > 0 && step > b) {
        e = do_floor_entry(tag);
        say = e->capped_step != step;
        e->capped_step = step;
    }
    pthread_mutex_unlock(&shared.lock);
    if (b <= 0 || step <= b)
        return step;
    if (say)
        log_warn("tag %s: step %lld in leaf_alloc is over the databases' block "
                 "size %lld: loads take %lld IDs (a range never crosses a "
                 "block); lower the step to at most %lld", tag,
                 (long long)step, (long long)b, (long long)b, (long long)b);
    return b;
}

/* cap_step on the rows of a list or get: what the loader reads as the
 * row's step is what a load can take. */
static void
cap_rows(struct store_row *rows, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!store_row_is_serial(&rows[k]))
            rows[k].step = cap_step(rows[k].biz_tag, rows[k].step);
}

/* Learn the members' identities from database i's leafd_multi_member
 * rows (the same list in every database of the set). */
static void
learn_members(struct store_multi *m, int i)
{
    struct multi_member *mem = NULL;
    size_t nmem = 0;
    char *why = NULL;

    if (m->mo->members(m->sub[i], 0, &mem, &nmem, &why) == STORE_OK)
        for (size_t k = 0; k < nmem; k++)
            if (mem[k].pos >= 0 && mem[k].pos < m->n)
                atomic_store(&shared.member_id[mem[k].pos], mem[k].db_id);
    free(why);
    free(mem);
}

static void
raise_top_seen(int i, int64_t top)
{
    int64_t cur = atomic_load(&shared.db[i].top_seen);

    while (top > cur &&
           !atomic_compare_exchange_weak(&shared.db[i].top_seen, &cur, top))
        ;
}

/* 1 with *cause when database i's rows are below the top this process
 * got from it or another database up recorded for it (restored from an
 * older copy): its loads would repeat what it handed out since. 0 when
 * not, -1 when it cannot tell (its rows could not be read; *cause set). */
static int
multi_behind(struct store_multi *m, int i, char **cause)
{
    int64_t id = atomic_load(&shared.member_id[i]), own = 0, seen;
    struct store_row *rows;
    size_t nr;
    char *why = NULL;

    if (store_list(m->sub[i], &rows, &nr, &why) != STORE_OK) {
        store_set_cause(cause, "cannot read its rows: %s", why ? why : "?");
        free(why);
        return -1;
    }
    for (size_t k = 0; k < nr; k++)
        if (!store_row_is_serial(&rows[k]) && rows[k].max_id > own)
            own = rows[k].max_id;
    free(rows);
    seen = atomic_load(&shared.db[i].top_seen);
    if (seen > own) {
        store_set_cause(cause, "its rows reach %lld, but this node got IDs up "
                        "to %lld from it: restored from an older copy? it "
                        "stays out of loads; run leafd multi-db init with the "
                        "same list (it sets the set above that), then restart "
                        "the nodes", (long long)own, (long long)seen);
        return 1;
    }
    for (int j = 0; j < m->n && id != 0; j++) {
        struct multi_member *mem = NULL;
        size_t nmem = 0;
        int behind = 0;

        if (j == i || !atomic_load(&shared.db[j].up))
            continue;
        if (m->mo->members(m->sub[j], 0, &mem, &nmem, &why) == STORE_OK)
            for (size_t k = 0; k < nmem && !behind; k++)
                if (mem[k].db_id == id && mem[k].top > own) {
                    store_set_cause(cause, "its rows reach %lld, but database "
                                    "%d recorded that it handed out IDs up to "
                                    "%lld: restored from an older copy? it "
                                    "stays out of loads; run leafd multi-db "
                                    "init with the same list (it sets the set "
                                    "above that), then restart the nodes",
                                    (long long)own, j, (long long)mem[k].top);
                    behind = 1;
                }
        free(why);
        why = NULL;
        free(mem);
        if (behind)
            return 1;
    }
    return 0;
}

/* ---- checks at start ---- */

/* Meta rows must say: index i of n, one block size and since_block for
 * all; tags the same everywhere (a step over the block size is capped,
 * cap_step). Databases
 * down now are checked by every load instead (their meta row). */
/* Do the config's lease_max and max_step fit mm's blocks (a range, and a
 * lease from the table, is inside one block)? 1, or 0 with *cause. Asked
 * at start when a database answers, else when the first one answers
 * later (want_for): a node started while every database was down. */
static int
block_fits(const struct multi_meta *mm, char **cause)
{
    if (shared.lease_max > mm->block_size) {
        store_set_cause(cause, "segment.lease_max %lld is over the databases' "
                        "block size %lld: lower it (a lease from the table is "
                        "one range, inside one block)",
                        (long long)shared.lease_max, (long long)mm->block_size);
        return 0;
    }
    if (shared.conceal_step > mm->block_size) {
        store_set_cause(cause, "segment.conceal_bits %d needs the databases' "
                        "blocks to hold %lld IDs (a concealed tag's load takes "
                        "an aligned block of 2^%d, from a range of up to twice "
                        "that), but their block size is %lld: lower "
                        "segment.conceal_bits, or run leafd multi-db init with "
                        "a larger --block-size", shared.conceal_bits,
                        (long long)shared.conceal_step, shared.conceal_bits,
                        (long long)mm->block_size);
        return 0;
    }
    if (shared.max_step > mm->block_size) {
        store_set_cause(cause, "segment.max_step %lld is over the databases' "
                        "block size %lld: lower it (a range never crosses a "
                        "block)", (long long)shared.max_step,
                        (long long)mm->block_size);
        return 0;
    }
    return 1;
}

static int
multi_check(struct store_multi *m, const struct config *cfg, char **cause)
{
    struct store_row *rows[STORE_MULTI_MAX] = { 0 };
    size_t nrows[STORE_MULTI_MAX] = { 0 };
    int reach[STORE_MULTI_MAX] = { 0 }, ref = -1, rc = -1;

    for (int i = 0; i < m->n; i++) {
        struct multi_meta mm;
        char *why = NULL;
        enum store_result r = m->mo->meta_get(m->sub[i], &mm, &why);

        if (r == STORE_DB_ERROR) {
            log_warn("segment database %d (%s) is unreachable at start: %s; "
                     "its settings are checked when it answers", i,
                     shared.db[i].where, why);
            mark_down(i, why);
            free(why);
            continue;
        }
        free(why);
        if (r == STORE_NOT_FOUND || mm.db_count == 0) {
            store_set_cause(cause, "%s: database %d (%s) is not prepared "
                            "for several databases: run leafd multi-db init "
                            "with the same URLs first", m->mo->key, i,
                            shared.db[i].where);
            goto out;
        }
        if (mm.db_index != i || mm.db_count != m->n) {
            store_set_cause(cause, "%s: database %d (%s) is number %lld of "
                            "%lld in its set, not %d of %d: the list's order "
                            "or length differs from the one leafd multi-db "
                            "init was given", m->mo->key, i, shared.db[i].where,
                            (long long)mm.db_index, (long long)mm.db_count, i,
                            m->n);
            goto out;
        }
        if (shared.want_known && (mm.block_size != shared.want.block_size ||
                                  mm.since_block != shared.want.since_block)) {
            store_set_cause(cause, "%s: database %d (%s) has block size "
                            "%lld from block %lld, another has %lld from %lld: "
                            "run leafd multi-db init again", m->mo->key, i,
                            shared.db[i].where, (long long)mm.block_size,
                            (long long)mm.since_block,
                            (long long)shared.want.block_size,
                            (long long)shared.want.since_block);
            goto out;
        }
        shared.want = mm;
        shared.want_known = 1;
        if (store_list(m->sub[i], &rows[i], &nrows[i], &why) != STORE_OK) {
            mark_down(i, why);
            free(why);
            continue;
        }
        reach[i] = 1;
        if (ref < 0) {
            ref = i;
            learn_members(m, i);
        }
    }
    for (int i = 0; i < m->n; i++) {
        char *why = NULL;

        if (reach[i] && multi_behind(m, i, &why) == 1) {
            atomic_store(&shared.db[i].behind, 1);
            mark_down(i, why);
            reach[i] = 0;
        }
        free(why);
    }
    shared.lease_max = cfg->lease_max;
    shared.max_step = cfg->max_step;
    /* A concealed tag's load takes an aligned block of 2^bits: a range of
     * up to twice that must fit one of the set's blocks. */
    shared.conceal_step = cfg->conceal_tags != NULL &&
        cfg->conceal_tags[strspn(cfg->conceal_tags, " \t,")] != '\0' ?
        (int64_t)2 << cfg->conceal_bits : 0;
    shared.conceal_bits = (int)cfg->conceal_bits;
    if (shared.want_known && !block_fits(&shared.want, cause))
        goto out;
    for (int i = 0; i < m->n; i++) {
        if (!reach[i] || i == ref)
            continue;
        /* Both lists are sorted by tag. */
        size_t a = 0, b = 0;

        while (a < nrows[ref] || b < nrows[i]) {
            int c;

            if (a < nrows[ref] && store_row_is_serial(&rows[ref][a])) {
                a++;
                continue;
            }
            if (b < nrows[i] && store_row_is_serial(&rows[i][b])) {
                b++;
                continue;
            }
            if (a == nrows[ref] && b == nrows[i])
                break;
            c = a == nrows[ref] ? 1 : b == nrows[i] ? -1 :
                strcmp(rows[ref][a].biz_tag, rows[i][b].biz_tag);

            if (c != 0) {
                int in = c < 0 ? ref : i;
                const char *tag = c < 0 ? rows[ref][a].biz_tag : rows[i][b].biz_tag;

                store_set_cause(cause, "%s: biz_tag '%s' is in database %d "
                                "(%s) but not in database %d (%s): every "
                                "database needs every tag (leafd multi-db "
                                "init copies them)", m->mo->key, tag, in,
                                shared.db[in].where, c < 0 ? i : ref,
                                shared.db[c < 0 ? i : ref].where);
                goto out;
            }
            a++;
            b++;
        }
    }
    for (int i = 0; i < m->n; i++)
        cap_rows(rows[i], nrows[i]);    /* said at start, once per tag */
    rc = 0;
out:
    for (int i = 0; i < m->n; i++)
        free(rows[i]);
    return rc;
}

/* ---- open ---- */

struct store *
store_multi_open(const struct config *cfg, char **cause)
{
    struct store_multi *m = xcalloc(1, sizeof *m);
    char *urls[STORE_MULTI_MAX];
    int n;

    /* segment.postgresql.urls, or segment.mysql.urls (config.c refuses
     * both, and a list of the other kind's URLs). */
    if (cfg->pg_urls != NULL && cfg->pg_urls[0] != '\0') {
        m->mo = &store_pg_member_ops;
        m->base.ops = &multi_pg_ops;
    } else {
        m->mo = &store_mysql_member_ops;
        m->base.ops = &multi_ops;
    }
    n = m->mo == &store_pg_member_ops ?
        store_multi_split_kind(cfg->pg_urls, 1, urls, STORE_MULTI_MAX, cause) :
        store_multi_split(cfg->mysql_urls, urls, STORE_MULTI_MAX, cause);
    if (n < 0) {
        free(m);
        return NULL;
    }
    m->n = n;
    for (int i = 0; i < n; i++) {
        m->sub[i] = m->mo->open_url(cfg, urls[i], m->mo->key, cause);
        if (m->sub[i] == NULL) {
            while (--i >= 0)
                store_close(m->sub[i]);
            for (int k = 0; k < n; k++)
                free(urls[k]);
            free(m);
            return NULL;
        }
    }
    pthread_mutex_lock(&shared.lock);
    if (!shared.ready) {
        shared.n = n;
        for (int i = 0; i < n; i++) {
            shared.db[i].url = urls[i];
            urls[i] = NULL;
            snprintf(shared.db[i].where, sizeof shared.db[i].where, "%s",
                     m->sub[i]->ops->where(m->sub[i]));
            atomic_store(&shared.db[i].up, 1);
            atomic_store(&shared.db[i].backoff_ms, MULTI_BACKOFF_MIN_MS);
        }
        shared.ready = 1;
        pthread_mutex_unlock(&shared.lock);
        if (multi_check(m, cfg, cause) == -1) {
            store_close(&m->base);
            pthread_mutex_lock(&shared.lock);
            shared.ready = 0;           /* nothing of this try is kept */
            shared.want_known = 0;
            for (int i = 0; i < n; i++) {
                free(shared.db[i].url);
                shared.db[i].url = NULL;
            }
            pthread_mutex_unlock(&shared.lock);
            return NULL;
        }
        log_info("segment mode over %d databases (blocks of %lld IDs, "
                 "database r owns blocks k with k mod %d = r)", n,
                 (long long)shared.want.block_size, n);
    } else {
        pthread_mutex_unlock(&shared.lock);
    }
    for (int i = 0; i < n; i++)
        free(urls[i]);
    return &m->base;
}

/* The settings database i must have, or -1 when not known yet (no
 * database answered at start): then read them from i itself. */
static int
want_for(struct store_multi *m, int i, struct multi_meta *out, char **cause)
{
    struct multi_meta mm;
    enum store_result r;

    pthread_mutex_lock(&shared.lock);
    if (shared.want_known) {
        *out = shared.want;
        out->db_index = i;
        out->db_count = m->n;
        out->frozen = 0;
        pthread_mutex_unlock(&shared.lock);
        return 0;
    }
    pthread_mutex_unlock(&shared.lock);
    r = m->mo->meta_get(m->sub[i], &mm, cause);
    if (r != STORE_OK)
        return -1;
    if (mm.db_index != i || mm.db_count != m->n) {
        store_set_cause(cause, "database %d is number %lld of %lld in its set",
                        i, (long long)mm.db_index, (long long)mm.db_count);
        return -1;
    }
    if (!block_fits(&mm, cause))
        return -1;                  /* every load refused, never learnt */
    pthread_mutex_lock(&shared.lock);
    if (!shared.want_known) {
        shared.want = mm;
        shared.want_known = 1;
    }
    *out = shared.want;
    out->db_index = i;
    out->db_count = m->n;
    pthread_mutex_unlock(&shared.lock);
    return 0;
}

/* The databases to try, in order: the one that answered last, the other
 * ones up, then those down whose backoff has passed (tried only when every
 * one up has failed this time), except one found behind its record. */
static int
multi_order(struct store_multi *m, int *order)
{
    int n = 0, pref = atomic_load(&shared.preferred);
    int64_t now = util_mono_ms();

    if (pref >= 0 && pref < m->n && atomic_load(&shared.db[pref].up))
        order[n++] = pref;
    for (int i = 0; i < m->n; i++)
        if (i != pref && atomic_load(&shared.db[i].up))
            order[n++] = i;
    for (int i = 0; i < m->n; i++)
        if (!atomic_load(&shared.db[i].up) &&
            !atomic_load(&shared.db[i].behind) &&
            atomic_load(&shared.db[i].retry_at_ms) <= now)
            order[n++] = i;
    return n;
}

/* Record in every other database marked up that database i handed out
 * IDs below top (its leafd_multi_member row), before the range is used:
 * the high-water mark multi-db init reads when i is missing or behind. A
 * database that fails is marked down. Nothing when the members are not
 * known (a set made before leafd_multi_member). */
static void
push_top(struct store_multi *m, int i, int64_t top)
{
    int64_t id = atomic_load(&shared.member_id[i]);

    if (id == 0)
        return;
    for (int j = 0; j < m->n; j++) {
        char *why = NULL;

        if (j == i || !atomic_load(&shared.db[j].up))
            continue;
        if (m->mo->top_push(m->sub[j], id, top, &why) != STORE_OK)
            mark_down(j, why);
        free(why);
    }
}

/* Copy the serial row tag (max_id, after a load on the first database)
 * into every other database marked up, before the range is used: init
 * merges the copies into the new first database when the first one is
 * gone or restored from an older dump. A database that fails is marked
 * down. */
static void
push_serial(struct store_multi *m, const char *tag, int64_t max_id,
            int64_t step)
{
    for (int j = 1; j < m->n; j++) {
        char *why = NULL;

        if (!atomic_load(&shared.db[j].up))
            continue;
        if (m->mo->serial_copy(m->sub[j], tag, max_id, step, &why) !=
            STORE_OK)
            mark_down(j, why);
        free(why);
    }
}

/* A load on database i, whose server must be the one of its last load.
 * A database whose server changed (a replica promoted behind a moved
 * address, reached by a fresh connection without any error) may lack the
 * last ranges of any tag, and the records (multi_behind) compare one top
 * per database, not per tag: it stays out of loads, and out of the probe's
 * way (server_changed), until leafd multi-db init sets the set above every
 * record and the nodes restart. */
static enum store_result
multi_alloc_on(struct store_multi *m, int i, const struct multi_meta *want,
               const char *tag, int64_t step, int64_t floor, int64_t *max_id,
               int64_t *db_step, char **cause)
{
    char was[STORE_MEMBER_ID_MAX], now[STORE_MEMBER_ID_MAX];
    enum store_result r;
    char *why = NULL;

    if (atomic_load(&shared.db[i].server_changed)) {
        store_set_cause(cause, "the server behind it changed: it stays out of "
                        "loads until leafd multi-db init with the same list "
                        "and a restart of the nodes");
        return STORE_DB_ERROR;
    }
    pthread_mutex_lock(&shared.lock);
    snprintf(was, sizeof was, "%s", shared.db[i].server);
    pthread_mutex_unlock(&shared.lock);
    snprintf(now, sizeof now, "%s", was);
    r = m->mo->alloc_block(m->sub[i], want, tag, step, floor, now, sizeof now,
                           max_id, db_step, cause);
    if (r != STORE_REFUSED) {
        if (r == STORE_OK && was[0] == '\0') {
            pthread_mutex_lock(&shared.lock);
            if (shared.db[i].server[0] == '\0')
                snprintf(shared.db[i].server, sizeof shared.db[i].server,
                         "%s", now);
            pthread_mutex_unlock(&shared.lock);
        }
        return r;
    }
    assert(strcmp(now, was) != 0 && was[0] != '\0');
    free(*cause);
    *cause = NULL;
    atomic_store(&shared.db[i].server_changed, 1);
    atomic_store(&shared.db[i].behind, 1);
    if (multi_behind(m, i, &why) == 1)
        store_set_cause(cause, "the server behind it changed from %s to %s, "
                        "and %s", was, now, why);
    else
        store_set_cause(cause, "the server behind it changed from %s to %s (a "
                        "failover?): a promoted replica may lack the last "
                        "ranges of any tag; it stays out of loads; run leafd "
                        "multi-db init with the same list (it sets the set "
                        "above every record), then restart the nodes", was,
                        now);
    free(why);
    log_error("segment database %d (%s): %s", i, shared.db[i].where, *cause);
    return STORE_DB_ERROR;
}

static enum store_result
multi_alloc(struct store *s, const char *tag, int64_t step, int64_t *max_id,
            int64_t *db_step, char **cause)
{
    struct store_multi *m = (struct store_multi *)s;
    int order[STORE_MULTI_MAX], n = multi_order(m, order), nf = 0, errs = 0;
    int64_t floor = floor_get(tag);
    char *last = NULL;

    for (int k = 0; k < n; k++) {
        int i = order[k];
        struct multi_meta want;
        char *why = NULL;
        enum store_result r;

        if (want_for(m, i, &want, &why) == -1) {
            mark_down(i, why);
            free(last);
            last = why;
            errs++;
            continue;
        }
        r = multi_alloc_on(m, i, &want, tag, step, floor, max_id, db_step,
                           &why);
        switch (r) {
        case STORE_OK:
            mark_up(i);
            atomic_fetch_add(&shared.db[i].loads, 1);
            if (k > 0) {
                atomic_fetch_add(&shared.db[i].failovers_to, 1);
                log_info("tag %s: loaded from database %d (%s) after %d "
                         "failed", tag, i, shared.db[i].where, k);
            }
            atomic_store(&shared.preferred, i);
            floor_raise(tag, *max_id);
            raise_top_seen(i, *max_id);
            *db_step = cap_step(tag, *db_step);
            push_top(m, i, *max_id);
            /* [*max_id - step, *max_id): at or above the floor, inside one
             * block database i owns (its row matched want in the load's
             * transaction). */
            assert(*max_id - step >= floor &&
                   store_block_owns(&want, *max_id - step, step));
            free(last);
            return STORE_OK;
        case STORE_DB_ERROR:
            mark_down(i, why);
            errs++;
            break;
        case STORE_NOT_FOUND:
            nf++;
            break;
        default:
            free(last);
            if (cause != NULL)
                *cause = why;
            else
                free(why);
            return r;
        }
        free(last);
        last = why;
    }
    if (n == 0)
        store_set_cause(cause, "every segment database is down and backing "
                        "off");
    else if (nf > 0 && errs == 0) {
        free(last);
        return STORE_NOT_FOUND;
    } else if (cause != NULL) {
        *cause = last;
        last = NULL;
    }
    free(last);
    return STORE_DB_ERROR;
}

/* Probe the databases marked down whose backoff has passed. */
static void
multi_probe(struct store_multi *m)
{
    int64_t now = util_mono_ms();

    for (int i = 0; i < m->n; i++) {
        char *why = NULL;

        if (atomic_load(&shared.db[i].up) ||
            atomic_load(&shared.db[i].retry_at_ms) > now ||
            atomic_load(&shared.db[i].server_changed))
            continue;
        if (m->mo->ping(m->sub[i], &why) == STORE_OK) {
            struct multi_meta want, mm;

            free(why);
            why = NULL;
            if (want_for(m, i, &want, &why) == 0 &&
                m->mo->meta_get(m->sub[i], &mm, &why) == STORE_OK &&
                mm.db_index == want.db_index && mm.db_count == want.db_count &&
                mm.block_size == want.block_size &&
                mm.since_block == want.since_block) {
                if (atomic_load(&shared.member_id[i]) == 0)
                    learn_members(m, i);    /* none answered at start */
                if (multi_behind(m, i, &why) != 1) {
                    atomic_store(&shared.db[i].behind, 0);
                    mark_up(i);
                    continue;
                }
                atomic_store(&shared.db[i].behind, 1);
            }
            if (why == NULL)
                why = xstrdup("its leafd_multi_db row differs from this "
                              "node's settings");
        }
        mark_down(i, why);
        free(why);
    }
}

/* A read (get, list) on one database. */
struct multi_read {
    const char        *tag;             /* get */
    struct store_row  *row;             /* get */
    store_keep_fn      keep;            /* list */
    struct store_row **rows;            /* list */
    size_t            *n;               /* list */
};

typedef enum store_result (*multi_read_cb)(struct store *sub,
                                           const struct multi_read *rd,
                                           char **cause);

/* Run read on the databases in multi_order's order until one answers
 * (anything but STORE_DB_ERROR); each that fails is marked down. */
static enum store_result
multi_read(struct store_multi *m, multi_read_cb read,
           const struct multi_read *rd, char **cause)
{
    int order[STORE_MULTI_MAX], cnt = multi_order(m, order);
    char *last = NULL;

    for (int k = 0; k < cnt; k++) {
        char *why = NULL;
        enum store_result r = read(m->sub[order[k]], rd, &why);

        if (r != STORE_DB_ERROR) {
            free(last);
            if (cause != NULL)
                *cause = why;
            else
                free(why);
            return r;
        }
        mark_down(order[k], why);
        free(last);
        last = why;
    }
    if (cause != NULL)
        *cause = last != NULL ? last : xstrdup("every segment database is down");
    else
        free(last);
    return STORE_DB_ERROR;
}

static enum store_result
list_one(struct store *sub, const struct multi_read *rd, char **cause)
{
    return store_list_keep(sub, rd->keep, rd->rows, rd->n, cause);
}

static enum store_result
get_one(struct store *sub, const struct multi_read *rd, char **cause)
{
    return store_get(sub, rd->tag, rd->row, cause);
}

static enum store_result
multi_list(struct store *s, store_keep_fn keep, struct store_row **rows,
           size_t *n, char **cause)
{
    struct store_multi *m = (struct store_multi *)s;
    struct multi_read rd = { .keep = keep, .rows = rows, .n = n };

    enum store_result r;

    multi_probe(m);
    r = multi_read(m, list_one, &rd, cause);
    if (r == STORE_OK)
        cap_rows(*rows, *n);
    return r;
}

static enum store_result
multi_get(struct store *s, const char *tag, struct store_row *row, char **cause)
{
    struct multi_read rd = { .tag = tag, .row = row };
    enum store_result r = multi_read((struct store_multi *)s, get_one, &rd,
                                     cause);

    if (r == STORE_OK)
        cap_rows(row, 1);
    return r;
}

struct copies_key {
    struct store_multi *m;
    store_serial_key_fn key;
    void               *arg;
};

/* The row's name and floor (key's), with the floor's mark raised to its
 * copies in the other databases up: every serial load pushes its row's
 * end there (push_serial), so a first database restored from an older
 * dump has the row below a copy, and the load is refused in its
 * transaction instead of handing those serials out again. */
static int
copies_key(void *arg, int64_t db_ms, char *tag, size_t cap,
           struct store_serial_floor *floor)
{
    const struct copies_key *k = arg;

    if (k->key(k->arg, db_ms, tag, cap, floor) == -1)
        return -1;
    if (floor->n == 0) {            /* the mark is checked on the floor */
        snprintf(floor->row[0].tag, sizeof floor->row[0].tag, "%s", tag);
        floor->row[0].prefix = 0;
        floor->row[0].raise = 0;
        floor->n = 1;
    }
    for (int j = 1; j < k->m->n; j++) {
        struct store_row row;
        char *why = NULL;

        if (atomic_load(&shared.db[j].up) &&
            store_get(k->m->sub[j], tag, &row, &why) == STORE_OK &&
            store_row_is_serial(&row) && row.max_id > floor->mark) {
            floor->mark = row.max_id;
            snprintf(floor->mark_src, sizeof floor->mark_src, "its copy in "
                     "database %d, %s", j,
                     k->m->sub[j]->ops->where(k->m->sub[j]));
        }
        free(why);
    }
    return 0;
}

static enum store_result
multi_serial_alloc(struct store *s, int64_t offset_ms, store_serial_key_fn key,
                   void *arg, int64_t step, int64_t *db_ms, char *tag,
                   size_t cap, int64_t *max_id, char **cause)
{
    struct store_multi *m = (struct store_multi *)s;
    struct multi_meta want;
    struct copies_key ck = { m, key, arg };
    enum store_result r;

    /* Only while the first database is the first of the set this node
     * knows: a reordered set's serial rows were merged into another. */
    if (want_for(m, 0, &want, cause) == -1)
        return STORE_DB_ERROR;
    r = m->mo->serial_alloc_in_set(m->sub[0], &want, offset_ms, copies_key,
                                   &ck, step, db_ms, tag, cap, max_id, cause);
    if (r == STORE_OK)
        push_serial(m, tag, *max_id, step);
    return r;
}

/* A new tag goes into every database (tests and set-up). */
static enum store_result
multi_insert(struct store *s, const char *tag, int64_t max_id, int64_t step,
             const char *description, char **cause)
{
    struct store_multi *m = (struct store_multi *)s;
    enum store_result first = STORE_OK;

    for (int i = 0; i < m->n; i++) {
        char *why = NULL;
        enum store_result r = store_insert(m->sub[i], tag, max_id, step,
                                           description, &why);

        if (r != STORE_OK && first == STORE_OK) {
            first = r;
            if (cause != NULL)
                *cause = why;
            else
                free(why);
        } else {
            free(why);
        }
    }
    return first;
}

static void
multi_close(struct store *s)
{
    struct store_multi *m = (struct store_multi *)s;

    for (int i = 0; i < m->n; i++)
        store_close(m->sub[i]);
    free(m);
}

/* Serial rows live in the first database. */
static struct store *
multi_serial_home(struct store *s)
{
    return ((struct store_multi *)s)->sub[0];
}

/* The same calls for either kind; the name is the members' kind. */
#define MULTI_OPS(kind) {                       \
    .name = kind,                               \
    .alloc = multi_alloc,                       \
    .get = multi_get,                           \
    .list = multi_list,                         \
    .insert = multi_insert,                     \
    .serial_alloc = multi_serial_alloc,         \
    .close = multi_close,                       \
    .serial_home = multi_serial_home,           \
}
static const struct store_ops multi_ops = MULTI_OPS("mysql");
static const struct store_ops multi_pg_ops = MULTI_OPS("postgresql");

/* ---- status ---- */

int
store_multi_count(void)
{
    return shared.ready ? shared.n : 0;
}

int
store_multi_status(struct multi_db_status *out, int max)
{
    int n = store_multi_count();

    for (int i = 0; i < n && i < max; i++) {
        struct multi_db *d = &shared.db[i];
        struct multi_db_status *o = &out[i];

        memset(o, 0, sizeof *o);
        snprintf(o->where, sizeof o->where, "%s", d->where);
        pthread_mutex_lock(&shared.lock);
        snprintf(o->error, sizeof o->error, "%s", d->last_error);
        pthread_mutex_unlock(&shared.lock);
        o->up = atomic_load(&d->up);
        o->preferred = atomic_load(&shared.preferred) == i;
        o->loads = atomic_load(&d->loads);
        o->failures = atomic_load(&d->failures);
        o->failovers_to = atomic_load(&d->failovers_to);
        o->down_since_ms = atomic_load(&d->down_since_ms);
    }
    return n < max ? n : max;
}
