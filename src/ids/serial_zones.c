/* serial_zones.c: the zone each snowflake serial shape was last printed
 * in, and the start-up refusal of a zone that would print its local times
 * again (see serial_zones.h). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "serial.h"
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
