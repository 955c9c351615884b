/* store_multi_init.c: `leafd multi-db init` (store_multi_init): prepare a
 * set of databases or change it without repeating an ID, and the check that
 * a single MySQL store is no member of a set (store_single_check). The
 * scheme and why it holds: store_multi.c's DESIGN comment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "csprng.h"
#include "store.h"
#include "store_impl.h"
#include "multi_block.h"
#include "util.h"

static int
row_cmp(const void *a, const void *b)
{
    return strcmp(((const struct store_row *)a)->biz_tag,
                  ((const struct store_row *)b)->biz_tag);
}

/* Merge row into *set (n rows): a new tag appended, an existing one's
 * max_id raised to the greater of the two. */
static void
merge_row(struct store_row **set, size_t *n, const struct store_row *row)
{
    for (size_t j = 0; j < *n; j++)
        if (strcmp((*set)[j].biz_tag, row->biz_tag) == 0) {
            if (row->max_id > (*set)[j].max_id)
                (*set)[j].max_id = row->max_id;
            return;
        }
    *set = xrealloc(*set, (*n + 1) * sizeof **set);
    (*set)[(*n)++] = *row;
}

/* 1 when the serial row copy is above its row in rows[0, n) (the first
 * database's), or the row is missing there. */
static int
serial_behind(const struct store_row *rows, size_t n,
              const struct store_row *copy)
{
    for (size_t k = 0; k < n; k++)
        if (strcmp(rows[k].biz_tag, copy->biz_tag) == 0)
            return rows[k].max_id < copy->max_id;
    return 1;
}

/* The highest top recorded for member id in any of the databases' member
 * rows; 0 when none. */
static int64_t
recorded_top(struct multi_member *const *mem, const size_t *nmem, int n,
             int64_t id)
{
    int64_t t = 0;

    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < nmem[i]; k++)
            if (mem[i][k].db_id == id && mem[i][k].top > t)
                t = mem[i][k].top;
    return t;
}

/* The refusal when the list lacks a member of the old set: how to find a
 * floor. */
static void
missing_cause(char **cause, const struct multi_member *miss, int64_t top)
{
    char rec[96];

    if (top > 0)
        snprintf(rec, sizeof rec, "the other members recorded that it handed "
                 "out IDs up to %lld", (long long)top);
    else
        snprintf(rec, sizeof rec, "the other members recorded no ID handed "
                 "out by it");
    store_set_cause(cause, "database %d of the set (%s) is not in the list: "
                    "init cannot see how far it handed out IDs, so a new "
                    "list could hand them out again (%s; loads it served "
                    "while they were unreachable are not in that record). "
                    "If it is reachable, put it back in the list, or stop "
                    "every node and read SELECT MAX(max_id) FROM leaf_alloc "
                    "on it; if it is lost, take the highest ID your "
                    "applications received from this set. Then run init "
                    "again with --floor=N, N above that: no ID below N is "
                    "handed out again", miss->pos, miss->where, rec);
}

/* The refusal when the set's first database (its serial rows) is missing
 * or behind and no listed database holds copies of its serial rows. */
static void
serial_cause(char **cause, const char *where, int missing)
{
    store_set_cause(cause, "database 0 of the set (%s) held its serial "
                    "numbers' rows and %s, and no listed database holds a "
                    "copy of them (nodes copy every serial row to the other "
                    "databases after each serial load; none are there when "
                    "the set issued no serial since, or its nodes ran an "
                    "older leafd): serials would start again at 1 and repeat. "
                    "If it is reachable, %s; else, raise each serial row "
                    "(%s) in one listed database above the last serial your "
                    "applications received. If the set issues no serial "
                    "with source = segment, or you accept that they start "
                    "again, run init again with --accept-serial-restart",
                    where, missing ? "is not in the list" :
                    "is behind its record (restored from an older copy?)",
                    missing ? "put it back in the list: init merges its "
                    "serial rows into the new first database" :
                    "restore its newest copy first",
                    "description '" STORE_SERIAL_DESCRIPTION "'");
}

/* "host:port/db" of a member store. */
static const char *
where(const struct store *s)
{
    return s->ops->where(s);
}

/* A new identity for a database that has none: random, positive. */
static int64_t
new_member_id(void)
{
    uint64_t v = 0;

    if (csprng_fill(&v, sizeof v) == -1)
        abort();
    v &= (uint64_t)INT64_MAX;
    return v == 0 ? 1 : (int64_t)v;
}

int
store_multi_init(const struct config *cfg, char **urls, int n,
                 int64_t block_size, int64_t floor, int serial_restart_ok,
                 FILE *out, char **cause)
{
    struct store *sub[STORE_MULTI_MAX] = { 0 };
    struct multi_meta mm[STORE_MULTI_MAX];
    struct multi_member *mem[STORE_MULTI_MAX] = { 0 }, set[STORE_MULTI_MAX];
    size_t nmem[STORE_MULTI_MAX] = { 0 };
    int64_t ids[STORE_MULTI_MAX] = { 0 }, own[STORE_MULTI_MAX] = { 0 };
    struct store_row *all = NULL, *ser = NULL, *ser0 = NULL;
    size_t nall = 0, nser = 0, nser0 = 0, copies = 0;
    const struct multi_member *miss = NULL;
    struct multi_member legacy;
    int64_t top = 1, since;
    int rc = -1, same = 1, recorded = 0, was_first[STORE_MULTI_MAX] = { 0 };
    int first_missing = 0, first_behind = -1;
    char first_where[160] = "";
    char *why = NULL;
    const struct store_member_ops *mo;

    if (n < 2 || n > STORE_MULTI_MAX) {
        store_set_cause(cause, "multi-db init needs 2 to %d database URLs",
                        STORE_MULTI_MAX);
        return -1;
    }
    /* Every member of one kind: the first URL's. */
    mo = store_member_ops_for(urls[0]);
    for (int i = 1; i < n; i++)
        if (store_member_ops_for(urls[i]) != mo) {
            store_set_cause(cause, "URL %d is %s's and URL 1 %s's: %s",
                            i + 1, store_member_ops_for(urls[i])->kind,
                            mo->kind, CONFIG_MULTI_MIXED_REFUSAL);
            return -1;
        }
    if (block_size < cfg->max_step) {
        store_set_cause(cause, "block size %lld is below segment.max_step %lld",
                        (long long)block_size, (long long)cfg->max_step);
        return -1;
    }
    if (store_thread_init() == -1) {
        store_set_cause(cause, "database library init failed");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        sub[i] = mo->open_url(cfg, urls[i], "multi-db URL", cause);
        if (sub[i] == NULL)
            goto out;
        if (mo->prepare_tables(sub[i], &why) != STORE_OK)
            goto fail;
        memset(&mm[i], 0, sizeof mm[i]);
        if (mo->meta_get(sub[i], &mm[i], &why) == STORE_DB_ERROR ||
            mo->members(sub[i], new_member_id(), &mem[i], &nmem[i],
                                &why) != STORE_OK)
            goto fail;
        for (size_t k = 0; k < nmem[i]; k++) {
            if (mem[i][k].self)
                ids[i] = mem[i][k].db_id;
            recorded |= mem[i][k].pos >= 0;
        }
        if (ids[i] == 0) {
            store_set_cause(cause, "URL %d (%s): its leafd_multi_member "
                            "row with self = 1 has db_id 0: give it a random "
                            "positive db_id (UPDATE leafd_multi_member SET "
                            "db_id = ... WHERE self = 1) and run init again",
                            i + 1, where(sub[i]));
            goto out;
        }
        if (mm[i].db_count < 0 || mm[i].db_count > STORE_MULTI_MAX ||
            mm[i].db_index < 0 || (mm[i].db_count > 0 &&
                                   mm[i].db_index >= mm[i].db_count)) {
            store_set_cause(cause, "URL %d (%s): its leafd_multi_db row "
                            "says number %lld of %lld: a set has 2 to %d "
                            "databases; correct the row by hand",
                            i + 1, where(sub[i]),
                            (long long)mm[i].db_index,
                            (long long)mm[i].db_count, STORE_MULTI_MAX);
            goto out;
        }
        for (int j = 0; j < i; j++)
            if (ids[j] == ids[i]) {
                store_set_cause(cause, "URLs %d and %d are the same database "
                                "(%s)", j + 1, i + 1, where(sub[i]));
                goto out;
            }
        if (mm[i].db_index != i || mm[i].db_count != n || mm[i].frozen ||
            mm[i].block_size != mm[0].block_size ||
            mm[i].since_block != mm[0].since_block)
            same = 0;
    }
    /* Every member of every old set must be in the list, or a floor given. */
    for (int i = 0; i < n && miss == NULL; i++)
        miss = store_multi_missing(mem[i], nmem[i], ids, n);
    for (int i = 0; i < n && miss == NULL && !recorded; i++) {
        /* A set made before leafd_multi_member: by index. */
        for (int64_t j = 0; j < mm[i].db_count && miss == NULL; j++) {
            int found = 0;

            for (int k = 0; k < n && !found; k++)
                found = mm[k].db_count == mm[i].db_count && mm[k].db_index == j;
            if (!found) {
                memset(&legacy, 0, sizeof legacy);
                legacy.pos = (int)j;
                snprintf(legacy.where, sizeof legacy.where, "number %lld of "
                         "%lld", (long long)j, (long long)mm[i].db_count);
                miss = &legacy;
            }
        }
    }
    /* The first database of an old set: it held the serial rows. */
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < nmem[i]; k++) {
            int found = 0;

            if (mem[i][k].pos != 0)
                continue;
            for (int j = 0; j < n; j++)
                if (ids[j] == mem[i][k].db_id)
                    found = was_first[j] = 1;
            if (!found && !first_missing) {
                first_missing = 1;
                snprintf(first_where, sizeof first_where, "%s",
                         mem[i][k].where);
            }
        }
    for (int i = 0; i < n && !recorded; i++) {
        int found = 0;

        if (mm[i].db_count < 2)
            continue;
        for (int j = 0; j < n; j++)
            if (mm[j].db_count == mm[i].db_count && mm[j].db_index == 0)
                found = was_first[j] = 1;
        if (!found && !first_missing) {
            first_missing = 1;
            snprintf(first_where, sizeof first_where, "number 0 of %lld",
                     (long long)mm[i].db_count);
        }
    }
    if (miss != NULL && floor <= 0) {
        missing_cause(cause, miss, recorded_top(mem, nmem, n, miss->db_id));
        goto out;
    }
    if (miss != NULL) {
        fprintf(out, "leafd multi-db: database %d of the set (%s) is not in "
                "the list: no ID below the floor %lld is handed out again\n",
                miss->pos, miss->where, (long long)floor);
        same = 0;
    }
    if (floor > 0 && floor > mm[0].since_block * mm[0].block_size)
        same = 0;
    /* Each database's own rows against what the others recorded for it: a
     * database restored from an older copy is behind. */
    for (int i = 0; i < n; i++) {
        struct store_row *rows;
        size_t nr;
        int64_t rec;

        if (store_list(sub[i], &rows, &nr, &why) != STORE_OK)
            goto fail;
        for (size_t k = 0; k < nr; k++) {
            if (!store_row_is_serial(&rows[k])) {
                if (rows[k].max_id > own[i])
                    own[i] = rows[k].max_id;
                continue;
            }
            copies += !was_first[i];
            if (i == 0)
                merge_row(&ser0, &nser0, &rows[k]);
            else if (same && serial_behind(ser0, nser0, &rows[k])) {
                fprintf(out, "leafd multi-db: database 0 (%s)'s serial row %s "
                        "is behind its copy in database %d (%s): restored "
                        "from an older copy? setting the set again, each "
                        "serial row at the greatest value\n",
                        where(sub[0]), rows[k].biz_tag, i,
                        where(sub[i]));
                same = 0;
            }
        }
        free(rows);
        rec = recorded_top(mem, nmem, n, ids[i]);
        if (rec > own[i]) {
            fprintf(out, "leafd multi-db: database %d (%s) has handed out IDs "
                    "up to %lld (recorded in the set) but its rows reach only "
                    "%lld: restored from an older copy? setting the set again "
                    "above it\n", i, where(sub[i]), (long long)rec,
                    (long long)own[i]);
            same = 0;
            if (was_first[i] && first_behind < 0)
                first_behind = i;
        }
    }
    /* Serial rows live in the first database: one gone or behind needs
     * copies of them elsewhere, or the operator's word. */
    if ((first_missing || first_behind >= 0) && copies == 0) {
        const char *w = first_missing ? first_where :
                        where(sub[first_behind]);

        if (!serial_restart_ok) {
            serial_cause(cause, w, first_missing);
            goto out;
        }
        fprintf(out, "leafd multi-db: database 0 of the set (%s) %s and no "
                "listed database holds copies of its serial rows: serials "
                "start again (--accept-serial-restart)\n", w, first_missing ?
                "is not in the list" : "is behind its record");
    }
    for (int i = 0; i < n && !recorded; i++)
        if (mm[i].db_count >= 2)
            recorded = -1;              /* a set, without member records */
    if (recorded == -1) {
        fprintf(out, "leafd multi-db: no listed database records the set's "
                "members (leafd_multi_member, a set made by an older leafd): "
                "writing them\n");
        same = 0;
    }
    if (same) {
        /* ... and every database has every tag. */
        size_t n0 = 0;

        for (int i = 0; i < n && same; i++) {
            struct store_row *rows;
            size_t nr;

            if (store_list(sub[i], &rows, &nr, &why) != STORE_OK)
                goto fail;
            {
                size_t w = 0;

                for (size_t k = 0; k < nr; k++)
                    if (!store_row_is_serial(&rows[k]))
                        rows[w++] = rows[k];
                nr = w;
            }
            if (i == 0) {
                all = rows;
                n0 = nr;
                continue;
            }
            same = nr == n0;
            for (size_t k = 0; k < nr && same; k++)
                same = strcmp(rows[k].biz_tag, all[k].biz_tag) == 0;
            free(rows);
        }
        free(all);
        all = NULL;
        if (!same)
            fprintf(out, "leafd multi-db: the databases' tags differ: "
                    "setting them again\n");
    }
    if (same) {
        fprintf(out, "leafd multi-db: the %d databases are already a set "
                "(block size %lld from block %lld); nothing to do\n", n,
                (long long)mm[0].block_size, (long long)mm[0].since_block);
        rc = 0;
        goto out;
    }
    /* Freeze all: from here no database hands out a range or a serial. */
    for (int i = 0; i < n; i++) {
        if (mo->freeze(sub[i], 1, &why) != STORE_OK)
            goto fail;
        fprintf(out, "froze database %d (%s)\n", i, where(sub[i]));
    }
    /* The tops again: a load that ended before the freeze raised them. */
    for (int i = 0; i < n; i++) {
        free(mem[i]);
        mem[i] = NULL;
        nmem[i] = 0;
        if (mo->members(sub[i], 0, &mem[i], &nmem[i], &why) !=
            STORE_OK)
            goto fail;
    }
    /* Every tag anywhere, its highest max_id, the first database's step;
     * every serial row anywhere, its greatest value. */
    for (int i = 0; i < n; i++) {
        struct store_row *rows;
        size_t nr;

        if (store_list(sub[i], &rows, &nr, &why) != STORE_OK)
            goto fail;
        for (size_t k = 0; k < nr; k++) {
            if (store_row_is_serial(&rows[k])) {
                merge_row(&ser, &nser, &rows[k]);
                continue;
            }
            merge_row(&all, &nall, &rows[k]);
            if (rows[k].max_id > top)
                top = rows[k].max_id;
            if (rows[k].step > block_size) {
                store_set_cause(cause, "biz_tag '%s' has step %lld in database "
                                "%d, over the block size %lld", rows[k].biz_tag,
                                (long long)rows[k].step, i, (long long)block_size);
                free(rows);
                goto out;
            }
        }
        free(rows);
    }
    if (nall > 1)
        qsort(all, nall, sizeof *all, row_cmp);
    /* Above every ID any database ever handed out, under any scheme, and
     * every top the members recorded of each other (one now missing too),
     * and the operator's floor. */
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < nmem[i]; k++)
            if (mem[i][k].top > top)
                top = mem[i][k].top;
    if (floor > 0 && floor - 1 < top)
        fprintf(out, "leafd multi-db: the floor %lld is below what the "
                "databases hold or recorded (IDs up to %lld): the set starts "
                "above that instead\n", (long long)floor, (long long)top);
    if (floor - 1 > top)
        top = floor - 1;
    since = top / block_size + 1;
    if (since > INT64_MAX / block_size - 2) {
        store_set_cause(cause, "max_id %lld leaves no room for blocks of %lld",
                        (long long)top, (long long)block_size);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        set[i].db_id = ids[i];
        set[i].top = own[i];
        set[i].self = 0;
        set[i].pos = i;
        snprintf(set[i].where, sizeof set[i].where, "%s",
                 where(sub[i]));
    }
    /* Every database gets the serial rows too, each at the greatest value
     * any database has for it (they are copied by key, whatever the key
     * says): the first one's counters, the others' copies. */
    if (nser > 0) {
        all = xrealloc(all, (nall + nser) * sizeof *all);
        memcpy(all + nall, ser, nser * sizeof *ser);
    }
    for (int i = 0; i < n; i++) {
        struct multi_meta want = { i, n, block_size, since, 0 };
        if (mo->switch_set(sub[i], all, nall + nser, since * block_size, &want,
                               set, n, &why) != STORE_OK)
            goto fail;
        fprintf(out, "database %d (%s): %zu tag(s), number %d of %d, blocks "
                "of %lld IDs from block %lld (ID %lld)\n", i,
                where(sub[i]), nall, i, n, (long long)block_size,
                (long long)since, (long long)(since * block_size));
    }
    if (nser > 0)
        fprintf(out, "database 0 (%s): %zu serial row(s), each at the "
                "greatest value any database had (copies in the others)\n",
                where(sub[0]), nser);
    fprintf(out, "leafd multi-db: done; start (or restart) every node with "
            "%s = ", mo->key);
    for (int i = 0; i < n; i++) {
        char *shown = mo->redacted(urls[i]);      /* no password */
        fprintf(out, "%s%s", i > 0 ? "," : "", shown);
        free(shown);
    }
    fprintf(out, "\n");
    rc = 0;
    goto out;

fail:
    store_set_cause(cause, "%s (databases frozen by this run stay frozen: "
                    "run the command again)", why ? why : "?");
out:
    free(why);
    free(all);
    free(ser);
    free(ser0);
    for (int i = 0; i < n; i++) {
        free(mem[i]);
        store_close(sub[i]);
    }
    store_thread_end();
    return rc;
}

const struct store_member_ops *
store_member_ops_for(const char *url)
{
    return store_multi_is_pg(url) ? &store_pg_member_ops :
                                    &store_mysql_member_ops;
}

/* Single database: refuse one that is part of a set. */
int
store_single_check(struct store *s, char **cause)
{
    const struct store_member_ops *mo;
    struct multi_meta mm;
    char *why = NULL;

    if (strcmp(store_kind_name(s), "mysql") == 0)
        mo = &store_mysql_member_ops;
    else if (strcmp(store_kind_name(s), "postgresql") == 0)
        mo = &store_pg_member_ops;
    else
        return 0;
    if (mo->meta_get(s, &mm, &why) == STORE_OK && mm.db_count >= 2) {
        store_set_cause(cause, "%s %s is database %lld of a set of %lld "
                        "(leafd multi-db init): list them all in %s; one "
                        "alone would repeat IDs", mo->kind, where(s),
                        (long long)mm.db_index, (long long)mm.db_count,
                        mo->key);
        free(why);
        return -1;
    }
    free(why);
    return 0;
}
