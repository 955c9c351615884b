/* serial_zones.c: the zone each snowflake serial shape was last printed
 * in, and the start-up refusal of a zone that would print its local times
 * again; the gate of a worker ID's record in its store (see
 * serial_zones.h). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "serial.h"
#include "log.h"
#include "serial_zonerec.h"
#include "serial_zones.h"
#include "util.h"

#define ZONES_MAX 256                 /* lines kept */

struct zone_line {
    char shape[SERIAL_ROW_SHAPE_MAX];
    char zone[TZONE_NAME_MAX + 1];
};

char *
serial_zones_path(const struct config *cfg)
{
    if (cfg->cache_file != NULL && cfg->cache_file[0] != '\0')
        return xasprintf("%s.serial-zones", cfg->cache_file);
    return xasprintf("leafd-serial-zones-%s.txt", cfg->leaf_name);
}

/* The file's lines into z (at most ZONES_MAX); a missing file has none.
 * The count, or -1 with *cause. */
static int
zones_read(const char *path, struct zone_line *z, char **cause)
{
    char buf[SERIAL_ROW_SHAPE_MAX + TZONE_NAME_MAX + 8];
    FILE *f = fopen(path, "r");
    int n = 0, line = 0;

    if (f == NULL && errno == ENOENT)
        return 0;
    if (f == NULL) {
        *cause = xasprintf("serial zones file %s: %s", path, strerror(errno));
        return -1;
    }
    while (fgets(buf, sizeof buf, f) != NULL) {
        char *sp = strchr(buf, ' '), *nl = strchr(buf, '\n');

        line++;
        if (sp == NULL || nl == NULL || n == ZONES_MAX ||
            (size_t)(sp - buf) >= sizeof z[n].shape ||
            (size_t)(nl - sp - 1) >= sizeof z[n].zone || nl == sp + 1) {
            *cause = xasprintf("serial zones file %s:%d: not \"<shape> <zone>\" "
                               "(or more than %d lines): fix or remove the line "
                               "(see docs/id-kinds.md)", path, line, ZONES_MAX);
            fclose(f);
            return -1;
        }
        memcpy(z[n].shape, buf, (size_t)(sp - buf));
        z[n].shape[sp - buf] = '\0';
        memcpy(z[n].zone, sp + 1, (size_t)(nl - sp - 1));
        z[n].zone[nl - sp - 1] = '\0';
        n++;
    }
    fclose(f);
    return n;
}

/* Replace the file by z's n lines: temp file, fsync, rename, fsync of the
 * directory (a zone recorded survives a crash). 0, or -1 with *cause. */
static int
zones_write(const char *path, const struct zone_line *z, int n, char **cause)
{
    char *tmp = xasprintf("%s.tmp", path), *dcopy = xstrdup(path);
    FILE *f = fopen(tmp, "w");
    int rc = -1, dfd;

    if (f == NULL)
        goto error;
    for (int k = 0; k < n; k++)
        fprintf(f, "%s %s\n", z[k].shape, z[k].zone);
    if (fflush(f) != 0 || fsync(fileno(f)) == -1) {
        fclose(f);
        goto error;
    }
    if (fclose(f) != 0 || rename(tmp, path) == -1)
        goto error;
    dfd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd == -1 || fsync(dfd) == -1) {
        if (dfd != -1)
            close(dfd);
        goto error;
    }
    close(dfd);
    rc = 0;
    goto out;
error:
    *cause = xasprintf("serial zones file %s: %s", path, strerror(errno));
    unlink(tmp);
out:
    free(tmp);
    free(dcopy);
    return rc;
}

static char *
utc_offset_text(int off)
{
    int a = off < 0 ? -off : off;

    return xasprintf("UTC%c%02d:%02d", off < 0 ? '-' : '+', a / 3600,
                     a / 60 % 60);
}

int
serial_zones_check(const struct serials *s, const char *path, int64_t now_ms,
                   char **cause)
{
    struct zone_line *z = xcalloc(ZONES_MAX, sizeof *z);
    int n = zones_read(path, z, cause), rc = -1, changed = 0;

    if (n == -1)
        goto out;
    for (size_t i = 0; i < serials_count(s); i++) {
        const struct serial_def *d = serials_def(s, i);
        const char *zone = tzone_name(d->zone);
        char shape[SERIAL_ROW_SHAPE_MAX];
        int k;

        if (d->source != SERIAL_SRC_SNOWFLAKE)
            continue;
        serial_row_shape(d, shape);
        for (k = 0; k < n && strcmp(z[k].shape, shape) != 0; k++)
            ;
        if (k < n && strcmp(z[k].zone, zone) != 0) {
            char *why = NULL;
            struct tzone *old = tzone_load(z[k].zone, &why);
            int off_old, off_new = tzone_utoff(d->zone, now_ms / 1000);

            if (old == NULL) {
                *cause = xasprintf("serial.%s.zone: serials of this shape were "
                                   "last printed in %s, which cannot be loaded "
                                   "(%s), so leafd cannot tell whether %s "
                                   "prints their local times again: change the "
                                   "prefix with the zone", d->code, z[k].zone,
                                   why, zone);
                free(why);
                goto out;
            }
            off_old = tzone_utoff(old, now_ms / 1000);
            tzone_free(old);
            if (off_new < off_old) {
                char *a = utc_offset_text(off_old), *b = utc_offset_text(off_new);

                *cause = xasprintf("serial.%s.zone: %s (%s now) is behind %s "
                                   "(%s now), where this node last printed "
                                   "serials of this shape (%s): its local "
                                   "times of the last %d min would be printed "
                                   "again, with the same worker and sequence "
                                   "fields. Change the prefix with the zone; or, "
                                   "once this node has been stopped for %d min "
                                   "or more, remove the line \"%s\" from %s",
                                   d->code, zone, b, z[k].zone, a, shape,
                                   (off_old - off_new) / 60,
                                   (off_old - off_new) / 60, shape, path);
                free(a);
                free(b);
                goto out;
            }
        }
        if (k == n) {
            if (n == ZONES_MAX) {
                *cause = xasprintf("serial zones file %s: more than %d shapes: "
                                   "remove the lines of shapes no longer printed",
                                   path, ZONES_MAX);
                goto out;
            }
            snprintf(z[n++].shape, sizeof z[0].shape, "%s", shape);
        }
        if (strcmp(z[k].zone, zone) != 0) {
            snprintf(z[k].zone, sizeof z[k].zone, "%s", zone);
            changed = 1;
        }
    }
    rc = changed ? zones_write(path, z, n, cause) : 0;
out:
    free(z);
    return rc;
}

/* --- the gate of a worker ID's record (DESIGN in serial_zones.h) ------- */

#define ZG_NONE INT64_MIN               /* bound: nothing refused */
#define ZG_ALL  INT64_MAX               /* bound: everything (bad record) */

struct serial_zgate {
    const struct serials *s;
    size_t               n;            /* codes */
    _Atomic int64_t     *bound;        /* per code: local ms at or below
                                          which its serials are refused */
    pthread_mutex_t      mu;           /* guards the fields below */
    struct szrec_entry  *claimed;      /* SZREC_MAX */
    int                  nclaimed;
    int64_t              claimed_fence;
    int                  bad;          /* the claimed record unreadable */
    char                 why[96];
};

struct serial_zgate *
serial_zgate_new(const struct serials *s)
{
    struct serial_zgate *g = xcalloc(1, sizeof *g);

    g->s = s;
    g->n = serials_count(s);
    g->bound = xcalloc(g->n > 0 ? g->n : 1, sizeof *g->bound);
    for (size_t i = 0; i < g->n; i++)
        atomic_init(&g->bound[i], ZG_NONE);
    g->claimed = xcalloc(SZREC_MAX, sizeof *g->claimed);
    pthread_mutex_init(&g->mu, NULL);
    return g;
}

void
serial_zgate_free(struct serial_zgate *g)
{
    if (g == NULL)
        return;
    pthread_mutex_destroy(&g->mu);
    free(g->claimed);
    free(g->bound);
    free(g);
}

/* Local ms of unix ms t in z. */
static int64_t
zg_local(const struct tzone *z, int64_t t)
{
    return t + (int64_t)tzone_utoff(z, t / 1000) * 1000;
}

/* The first unix ms whose local time in z is past bound (zones that never
 * turn their clocks back: one step from an estimate is exact but at a
 * transition, where it errs late). */
static int64_t
zg_until(const struct tzone *z, int64_t bound)
{
    int64_t t = bound + 1 - (int64_t)tzone_utoff(z, bound / 1000) * 1000;

    while (zg_local(z, t) <= bound)
        t += 1000;
    return t;
}

/* ms as a wall time, "2026-11-28 18:03:00.068" (local ms) or with utc
 * "2026-11-28T09:03:00.069Z" (unix ms); out: 32 bytes. */
static void
zg_fmt(int64_t ms, int utc, char *out)
{
    int64_t days = ms >= 0 ? ms / 86400000 : (ms - 86399999) / 86400000;
    int64_t in = ms - days * 86400000, y;
    int m, d;

    tzone_civil_from_days(days, &y, &m, &d);
    snprintf(out, 32, "%04lld-%02d-%02d%c%02d:%02d:%02d.%03d%s", (long long)y,
             m, d, utc ? 'T' : ' ', (int)(in / 3600000), (int)(in / 60000 % 60),
             (int)(in / 1000 % 60), (int)(in % 1000), utc ? "Z" : "");
}

static int
zg_find(const struct szrec_entry *e, int n, const char *shape)
{
    for (int k = 0; k < n; k++)
        if (strcmp(e[k].shape, shape) == 0)
            return k;
    return -1;
}

void
serial_zgate_claimed(void *arg, const char *rec, size_t len, int64_t fence_ms)
{
    struct serial_zgate *g = arg;
    const char *why = NULL;
    int n;

    pthread_mutex_lock(&g->mu);
    n = szrec_parse(rec, len, g->claimed, &why);
    g->bad = n == -1;
    g->nclaimed = n == -1 ? 0 : n;
    g->claimed_fence = fence_ms;
    snprintf(g->why, sizeof g->why, "%s", why != NULL ? why : "");
    for (size_t i = 0; i < g->n; i++) {
        const struct serial_def *d = serials_def(g->s, i);
        char shape[SERIAL_ROW_SHAPE_MAX];
        int64_t b = ZG_NONE;
        int k;

        if (d->source != SERIAL_SRC_SNOWFLAKE)
            continue;
        serial_row_shape(d, shape);
        k = zg_find(g->claimed, g->nclaimed, shape);
        if (g->bad)
            b = ZG_ALL;
        else if (k >= 0)
            b = fence_ms + g->claimed[k].ahead_ms;
        atomic_store(&g->bound[i], b);
        if (g->bad)
            log_error("serial.%s: the worker ID store's serial zones record "
                      "for this worker ID cannot be read (%s): every serial "
                      "of this code is refused (503 serial_zone_gate); fix "
                      "or remove the record (docs/operations.md)", d->code,
                      g->why);
        else if (k >= 0 && zg_local(d->zone, fence_ms + 1) <= b) {
            char lb[32], ut[32];

            zg_fmt(b, 0, lb);
            zg_fmt(zg_until(d->zone, b), 1, ut);
            log_warn("serial.%s: this worker ID's earlier holders printed "
                     "serials of shape %s up to local time %s (the store's "
                     "record), which %s prints again until %s: those "
                     "serials are refused until then (503 serial_zone_gate)",
                     d->code, shape, lb, tzone_name(d->zone), ut);
        }
    }
    pthread_mutex_unlock(&g->mu);
}

char *
serial_zgate_record(void *arg, int64_t fence_ms)
{
    struct serial_zgate *g = arg;
    struct szrec_entry *e = xcalloc(SZREC_MAX + g->n, sizeof *e);
    char *text = NULL;
    int n = 0, own;

    pthread_mutex_lock(&g->mu);
    if (g->bad)
        goto out;
    /* own shapes: the bound of what this node prints below fence_ms */
    for (size_t i = 0; i < g->n; i++) {
        const struct serial_def *d = serials_def(g->s, i);
        char shape[SERIAL_ROW_SHAPE_MAX];
        int64_t a = (int64_t)tzone_utoff(d->zone, fence_ms / 1000) * 1000;
        int k, c;

        if (d->source != SERIAL_SRC_SNOWFLAKE)
            continue;
        serial_row_shape(d, shape);
        c = zg_find(g->claimed, g->nclaimed, shape);
        if (c >= 0 && g->claimed_fence + g->claimed[c].ahead_ms - fence_ms > a)
            a = g->claimed_fence + g->claimed[c].ahead_ms - fence_ms;
        k = zg_find(e, n, shape);
        if (k < 0) {
            k = n++;
            snprintf(e[k].shape, sizeof e[k].shape, "%s", shape);
            e[k].ahead_ms = a;
        } else if (a > e[k].ahead_ms) {
            e[k].ahead_ms = a;
        }
    }
    own = n;
    /* the claimed shapes this node does not print, while they can gate */
    for (int c = 0; c < g->nclaimed; c++) {
        int64_t a = g->claimed_fence + g->claimed[c].ahead_ms - fence_ms;

        if (zg_find(e, own, g->claimed[c].shape) >= 0 || a <= SZREC_AHEAD_DEAD)
            continue;
        e[n] = g->claimed[c];
        e[n++].ahead_ms = a;
    }
    for (int k = 0; k < n; k++)
        if (e[k].ahead_ms > SZREC_AHEAD_MAX) {
            /* a fence below the claim's (not written by the lease) */
            log_error("serial zones record: fence %" PRId64 " is below the "
                      "claim's %" PRId64 ": the store's record is kept",
                      fence_ms, g->claimed_fence);
            goto out;
        }
    if (n > SZREC_MAX) {
        /* more shapes than the record holds: the carried ones nearest to
         * their end go (logged: their serials are no longer gated) */
        for (int a = own; a < n; a++)
            for (int b = a + 1; b < n; b++)
                if (e[b].ahead_ms > e[a].ahead_ms) {
                    struct szrec_entry t = e[a];
                    e[a] = e[b];
                    e[b] = t;
                }
        log_warn("serial zones record: %d shapes, over %d: dropping %d "
                 "carried ones (the first: %s)", n, SZREC_MAX, n - SZREC_MAX,
                 e[SZREC_MAX].shape);
        n = SZREC_MAX;
    }
    text = szrec_format(e, n);
out:
    pthread_mutex_unlock(&g->mu);
    free(e);
    return text;
}

int
serial_zgate_allows(struct serial_zgate *g, size_t i, int64_t t, char *buf,
                    size_t size, int *retry_s)
{
    const struct serial_def *d;
    int64_t b = atomic_load(&g->bound[i]), until;
    char shape[SERIAL_ROW_SHAPE_MAX];

    assert(i < g->n);
    if (b == ZG_NONE)
        return 1;
    d = serials_def(g->s, i);
    if (b != ZG_ALL && zg_local(d->zone, t) > b)
        return 1;
    serial_row_shape(d, shape);
    if (b == ZG_ALL) {
        pthread_mutex_lock(&g->mu);
        snprintf(buf, size, "no serial for code '%s': the worker ID store's "
                 "serial zones record for this worker ID cannot be read "
                 "(%s), so leafd cannot tell which local times were printed "
                 "under it. Fix or remove the record (docs/operations.md) "
                 "and restart this node (the record is read when the worker "
                 "ID is claimed), or change the prefix", d->code, g->why);
        pthread_mutex_unlock(&g->mu);
        *retry_s = 300;             /* not by itself: a restart clears it */
        return 0;
    }
    until = zg_until(d->zone, b);
    {
        char lb[32], ut[32];

        zg_fmt(b, 0, lb);
        zg_fmt(until, 1, ut);
        snprintf(buf, size, "no serial for code '%s' until %s (in %" PRId64
                 " ms): this snowflake worker ID was held before by a node "
                 "that printed serials of this shape (%s) up to local time "
                 "%s, in a zone ahead of %s; printing that time again would "
                 "repeat its serials. Wait, or change the prefix with the "
                 "zone (docs/id-kinds.md)", d->code, ut, until - t, shape, lb,
                 tzone_name(d->zone));
    }
    *retry_s = (int)((until - t) / 1000 + 1);
    if (*retry_s > 3600)
        *retry_s = 3600;
    return 0;
}

int
serial_zgate_json(struct serial_zgate *g, int64_t now_ms, struct sbuf *out)
{
    int n = 0;

    for (size_t i = 0; i < g->n; i++) {
        const struct serial_def *d = serials_def(g->s, i);
        int64_t b = atomic_load(&g->bound[i]);

        if (b == ZG_NONE || (b != ZG_ALL && zg_local(d->zone, now_ms) > b))
            continue;
        sbuf_puts(out, n++ ? ",{\"code\":" : ",\"zone_gates\":[{\"code\":");
        sbuf_json_str(out, d->code);
        if (b == ZG_ALL)
            sbuf_puts(out, ",\"until_ms\":null,\"why\":\"record unreadable\"}");
        else
            sbuf_printf(out, ",\"until_ms\":%" PRId64 "}", zg_until(d->zone, b));
    }
    if (n > 0)
        sbuf_puts(out, "]");
    return n;
}
