/* store_marks.c: the highest max_id this process received per tag, and
 * the refusal that follows a database found behind it (store_marks.h).
 *
 * The file is a log of lines, each one a fact that replaces an older one:
 *   leafd-marks 1          first line
 *   m <tag> <max_id>       the tag's mark (the highest wins)
 *   n <row> <max_id>       a serial row's mark
 *   s <server>             the server of the last load
 *   r <code> <why>         refused from here on
 *   f <id>                 refused: only a fence after this one lifts it
 *   c                      the refusal lifted (fenced)
 * Open reads it, then writes it back compacted (temporary file, fsync,
 * rename), and so do appends once they outgrow the state (do_append).
 * Appends are write(2)s under the mutex, so a reader of the file
 * after a crash sees whole lines but perhaps not the last few: the marks it
 * keeps are lower than the process had, which makes the check weaker,
 * never wrong. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "store_marks.h"
#include "util.h"

#define MARKS_BUCKETS 1024
#define MARKS_LINE_MAX (TAG_MAX + MARKS_WHY_MAX + 64)
#define MARKS_COMPACT_BYTES (1L << 20)

struct mark {
    struct mark    *next;
    pthread_mutex_t load;          /* held across one load of the tag */
    int             serial;        /* a serial row's */
    int64_t         max_id;
    char            tag[TAG_MAX + 1];
};

static struct {
    pthread_mutex_t lock;          /* guards everything below */
    struct mark    *bucket[MARKS_BUCKETS];
    size_t          n;
    int64_t         max;           /* over the segment tags' marks */
    int64_t         serial_max;    /* over the serial rows' */
    int             refused;
    int64_t         refused_fence; /* refused: the fence to beat; -1 */
    int64_t         low_fence;     /* a fence seen too low (logged) */
    char            code[32];
    char            why[MARKS_WHY_MAX];
    char            server[MARKS_SERVER_MAX];
    int             fd;            /* the file, appended to; -1: none */
    char           *path;
    long            compacted;     /* its size when last written whole */
    long            appended;      /* bytes appended since */
} marks = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .refused_fence = -1 };

static struct mark **
mark_slot(const char *tag)
{
    uint64_t h = UINT64_C(14695981039346656037);

    for (const char *p = tag; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
    return &marks.bucket[h % MARKS_BUCKETS];
}

/* The tag's mark, made when missing (make) or NULL. Lock held. */
static struct mark *
do_mark(const char *tag, int make)
{
    struct mark **slot = mark_slot(tag), *e;

    for (e = *slot; e != NULL; e = e->next)
        if (strcmp(e->tag, tag) == 0)
            return e;
    if (!make)
        return NULL;
    e = xcalloc(1, sizeof *e);
    pthread_mutex_init(&e->load, NULL);
    snprintf(e->tag, sizeof e->tag, "%s", tag);
    e->next = *slot;
    *slot = e;
    marks.n++;
    return e;
}

static void
do_raise(const char *tag, int serial, int64_t max_id)
{
    struct mark *e = do_mark(tag, 1);

    e->serial = serial;
    if (max_id > e->max_id)
        e->max_id = max_id;
    if (serial && max_id > marks.serial_max)
        marks.serial_max = max_id;
    if (!serial && max_id > marks.max)
        marks.max = max_id;
}

static int do_rewrite(const char *path, char **cause);

/* Append one line to the file, if any. A failed write is logged and the
 * file dropped: the marks go on in memory. Once the appends are over
 * MARKS_COMPACT_BYTES and four times what the whole state took, the file
 * is written whole again, so it stays in proportion to the tags, not to
 * the loads. Lock held. */
static void
do_append(const char *fmt, ...)
{
    char line[MARKS_LINE_MAX];
    va_list ap;
    int len;

    if (marks.fd == -1)
        return;
    va_start(ap, fmt);
    len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    assert(len > 0 && (size_t)len < sizeof line);
    if (write(marks.fd, line, (size_t)len) != len) {
        log_error("segment.marks_file %s: write: %s; marks are kept in memory "
                  "only from now on", marks.path, strerror(errno));
        close(marks.fd);
        marks.fd = -1;
        return;
    }
    marks.appended += len;
    if (marks.appended > MARKS_COMPACT_BYTES &&
        marks.appended > 4 * marks.compacted) {
        char *why = NULL;

        close(marks.fd);
        marks.fd = -1;
        if (do_rewrite(marks.path, &why) == -1) {
            log_error("%s; marks are kept in memory only from now on", why);
            free(why);
        }
    }
}

/* Newlines and tabs out of a reason that goes on one line. */
static void
one_line(char *s)
{
    for (; *s != '\0'; s++)
        if (*s == '\n' || *s == '\r' || *s == '\t')
            *s = ' ';
}

/* Printable ASCII without spaces, as identities are. */
static int
printable(const char *s)
{
    for (; *s != '\0'; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

/* One line of the file; 0, or -1. Lock held. */
static int
do_replay(char *line)
{
    char *sp, *end;
    long long v;

    if ((line[0] == 'm' || line[0] == 'n') && line[1] == ' ') {
        sp = strrchr(line + 2, ' ');
        if (sp == NULL || !util_tag_valid(line + 2, (size_t)(sp - line - 2)))
            return -1;
        *sp = '\0';
        errno = 0;
        v = strtoll(sp + 1, &end, 10);
        if (errno != 0 || *end != '\0' || v < 1)
            return -1;
        do_raise(line + 2, line[0] == 'n', v);
    } else if (line[0] == 's' && line[1] == ' ') {
        size_t len = strlen(line + 2);

        if (len == 0 || len >= sizeof marks.server || !printable(line + 2))
            return -1;
        memcpy(marks.server, line + 2, len + 1);
    } else if (line[0] == 'r' && line[1] == ' ') {
        sp = strchr(line + 2, ' ');
        if (sp == NULL || sp == line + 2 ||
            (size_t)(sp - line - 2) >= sizeof marks.code)
            return -1;
        *sp = '\0';
        if (strspn(line + 2, "abcdefghijklmnopqrstuvwxyz_") != strlen(line + 2))
            return -1;
        *sp = ' ';
        marks.refused = 1;
        marks.refused_fence = -1;
        snprintf(marks.code, sizeof marks.code, "%.*s", (int)(sp - line - 2),
                 line + 2);
        snprintf(marks.why, sizeof marks.why, "%s", sp + 1);
    } else if (line[0] == 'f' && line[1] == ' ') {
        errno = 0;
        v = strtoll(line + 2, &end, 10);
        if (errno != 0 || *end != '\0' || end == line + 2 || v < 0)
            return -1;
        marks.refused_fence = v;
    } else if (strcmp(line, "c") == 0) {
        marks.refused = 0;
        marks.refused_fence = -1;
    } else {
        return -1;
    }
    return 0;
}

/* The lines of f into the state. Lock held. */
static int
do_parse(FILE *f, const char *path, char **cause)
{
    char line[MARKS_LINE_MAX + 2];
    int lineno = 0;

    while (fgets(line, sizeof line, f) != NULL) {
        size_t len = strlen(line);

        lineno++;
        if (len == 0 || line[len - 1] != '\n') {
            if (feof(f))
                break;      /* a last line cut by a crash: drop it */
            *cause = xasprintf("segment.marks_file %s:%d: line too long",
                               path, lineno);
            return -1;
        }
        line[len - 1] = '\0';
        if (lineno == 1 ? strcmp(line, "leafd-marks 1") != 0
                        : do_replay(line) == -1) {
            *cause = xasprintf("segment.marks_file %s:%d: not a leafd marks "
                               "line; move the file away only if this node "
                               "never loaded from the database it names",
                               path, lineno);
            return -1;
        }
    }
    return 0;
}

static int
do_load(const char *path, char **cause)
{
    FILE *f = fopen(path, "r");
    int rc;

    if (f == NULL) {
        if (errno == ENOENT)
            return 0;
        *cause = xasprintf("segment.marks_file %s: %s", path, strerror(errno));
        return -1;
    }
    rc = do_parse(f, path, cause);
    fclose(f);
    return rc;
}

int
store_marks_parse(FILE *f, const char *name, char **cause)
{
    int rc;

    pthread_mutex_lock(&marks.lock);
    rc = do_parse(f, name, cause);
    pthread_mutex_unlock(&marks.lock);
    return rc;
}

/* The whole state into path (temporary file, fsync, rename), opened for
 * appends into marks.fd. Lock held. */
static int
do_rewrite(const char *path, char **cause)
{
    char *tmp = xasprintf("%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int fd;

    if (f == NULL)
        goto fail;
    fprintf(f, "leafd-marks 1\n");
    if (marks.server[0] != '\0')
        fprintf(f, "s %s\n", marks.server);
    for (size_t i = 0; i < MARKS_BUCKETS; i++)
        for (struct mark *e = marks.bucket[i]; e != NULL; e = e->next)
            fprintf(f, "%c %s %" PRId64 "\n", e->serial ? 'n' : 'm', e->tag,
                    e->max_id);
    if (marks.refused)
        fprintf(f, "r %s %s\n", marks.code, marks.why);
    if (marks.refused && marks.refused_fence >= 0)
        fprintf(f, "f %" PRId64 "\n", marks.refused_fence);
    if (fflush(f) != 0 || fsync(fileno(f)) == -1) {
        fclose(f);
        goto fail;
    }
    marks.compacted = ftell(f);
    marks.appended = 0;
    if (fclose(f) != 0 || rename(tmp, path) == -1)
        goto fail;
    fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd == -1)
        goto fail;
    free(tmp);
    marks.fd = fd;
    return 0;
fail:
    *cause = xasprintf("segment.marks_file %s: %s", path, strerror(errno));
    unlink(tmp);
    free(tmp);
    return -1;
}

int
store_marks_open(const char *path, char **cause)
{
    int rc = 0;

    if (path == NULL || *path == '\0')
        return 0;
    pthread_mutex_lock(&marks.lock);
    assert(marks.fd == -1);
    if (do_load(path, cause) == -1 || do_rewrite(path, cause) == -1) {
        rc = -1;
    } else {
        free(marks.path);
        marks.path = xstrdup(path);
        if (marks.refused)
            log_error("segment.marks_file %s: loads are refused (%s): %s",
                      path, marks.code, marks.why);
    }
    pthread_mutex_unlock(&marks.lock);
    return rc;
}

void
store_marks_sync(void)
{
    pthread_mutex_lock(&marks.lock);
    if (marks.fd != -1 && fsync(marks.fd) == -1)
        log_warn("segment.marks_file %s: fsync: %s", marks.path,
                 strerror(errno));
    pthread_mutex_unlock(&marks.lock);
}

void
store_marks_close(void)
{
    store_marks_sync();
    pthread_mutex_lock(&marks.lock);
    if (marks.fd != -1)
        close(marks.fd);
    marks.fd = -1;
    pthread_mutex_unlock(&marks.lock);
}

void
store_marks_reset(void)
{
    store_marks_close();
    pthread_mutex_lock(&marks.lock);
    for (size_t i = 0; i < MARKS_BUCKETS; i++) {
        struct mark *e = marks.bucket[i], *next;

        for (; e != NULL; e = next) {
            next = e->next;
            pthread_mutex_destroy(&e->load);
            free(e);
        }
        marks.bucket[i] = NULL;
    }
    marks.n = 0;
    marks.max = 0;
    marks.serial_max = 0;
    marks.refused = 0;
    marks.refused_fence = -1;
    marks.low_fence = 0;
    marks.code[0] = marks.why[0] = marks.server[0] = '\0';
    free(marks.path);
    marks.path = NULL;
    pthread_mutex_unlock(&marks.lock);
}

int64_t
store_marks_get(const char *tag)
{
    struct mark *e;
    int64_t v;

    pthread_mutex_lock(&marks.lock);
    e = do_mark(tag, 0);
    v = e != NULL ? e->max_id : 0;
    pthread_mutex_unlock(&marks.lock);
    return v;
}

int64_t
store_marks_max(void)
{
    int64_t v;

    pthread_mutex_lock(&marks.lock);
    v = marks.max;
    pthread_mutex_unlock(&marks.lock);
    return v;
}

int64_t
store_marks_serial_max(void)
{
    int64_t v;

    pthread_mutex_lock(&marks.lock);
    v = marks.serial_max;
    pthread_mutex_unlock(&marks.lock);
    return v;
}

int64_t
store_marks_refused_fence(void)
{
    int64_t v;

    pthread_mutex_lock(&marks.lock);
    v = marks.refused ? marks.refused_fence : -1;
    pthread_mutex_unlock(&marks.lock);
    return v;
}

size_t
store_marks_count(void)
{
    size_t n;

    pthread_mutex_lock(&marks.lock);
    n = marks.n;
    pthread_mutex_unlock(&marks.lock);
    return n;
}

static void
do_refuse(const char *code, const char *why)
{
    marks.refused = 1;
    marks.refused_fence = -1;
    snprintf(marks.code, sizeof marks.code, "%s", code);
    snprintf(marks.why, sizeof marks.why, "%s", why);
    one_line(marks.why);
    do_append("r %s %s\n", marks.code, marks.why);
}

struct mark *
store_marks_hold(const char *tag)
{
    struct mark *e;

    pthread_mutex_lock(&marks.lock);
    e = do_mark(tag, 1);
    pthread_mutex_unlock(&marks.lock);
    pthread_mutex_lock(&e->load);
    return e;
}

void
store_marks_release(struct mark *e)
{
    pthread_mutex_unlock(&e->load);
}

int
store_marks_take(const char *tag, int serial, int64_t max_id, int64_t step,
                 const char *where, char **cause)
{
    struct mark *e;
    int64_t mark;
    char why[MARKS_WHY_MAX];

    assert(step >= 1 && max_id - step >= 0);
    pthread_mutex_lock(&marks.lock);
    e = do_mark(tag, 0);
    mark = e != NULL ? e->max_id : 0;
    if (max_id - step < mark) {
        snprintf(why, sizeof why, "the database %s gave %s %s the range "
                 "[%" PRId64 ", %" PRId64 "), below the %" PRId64 " this node "
                 "already received: it went back in time (a restored dump, or "
                 "a failover to a replica that lacks the last commits); every "
                 "load is refused until an operator runs leafd db-fence with "
                 "a floor above every ID any node issued", where,
                 serial ? "serial row" : "tag", tag, max_id - step,
                 max_id, mark);
        do_refuse("store_behind", why);
        pthread_mutex_unlock(&marks.lock);
        log_error("%s", why);
        if (cause != NULL)
            *cause = xstrdup(why);
        return -1;
    }
    do_raise(tag, serial, max_id);
    do_append("%c %s %" PRId64 "\n", serial ? 'n' : 'm', tag, max_id);
    pthread_mutex_unlock(&marks.lock);
    return 0;
}

void
store_marks_refuse(const char *code, const char *fmt, ...)
{
    char why[MARKS_WHY_MAX];
    va_list ap;
    int was;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&marks.lock);
    was = marks.refused && strcmp(marks.code, code) == 0;
    if (!was)
        do_refuse(code, why);
    pthread_mutex_unlock(&marks.lock);
    if (!was)
        log_error("%s", why);
}

int
store_marks_refused(char *code, size_t code_cap, char *why, size_t why_cap)
{
    int r;

    pthread_mutex_lock(&marks.lock);
    r = marks.refused;
    if (r && code != NULL)
        snprintf(code, code_cap, "%s", marks.code);
    if (r && why != NULL)
        snprintf(why, why_cap, "%s", marks.why);
    pthread_mutex_unlock(&marks.lock);
    return r;
}

int
store_marks_same_server(const char *a, const char *b)
{
    size_t la = strcspn(a, ";"), lb = strcspn(b, ";");

    return la == lb && memcmp(a, b, la) == 0;
}

int
store_marks_fenced(const struct marks_fence *last, const char *cur)
{
    int ok = 0, say = 0;

    pthread_mutex_lock(&marks.lock);
    if (!marks.refused) {
        ok = 1;
    } else if (marks.refused_fence < 0) {
        /* The fences there are now came before the refusal. */
        marks.refused_fence = last->id;
        do_append("f %" PRId64 "\n", last->id);
    } else if (last->id > marks.refused_fence &&
               store_marks_same_server(last->server, cur) &&
               last->floor >= marks.max &&
               last->serial_floor >= marks.serial_max) {
        ok = 1;
        log_info("database %s fenced (#%" PRId64 ", floor %" PRId64 ", serial "
                 "floor %" PRId64 ") at or above this node's marks (%" PRId64
                 ", serial %" PRId64 "): loads resume", cur, last->id,
                 last->floor, last->serial_floor, marks.max, marks.serial_max);
        marks.refused = 0;
        marks.refused_fence = -1;
        do_append("c\n");
        snprintf(marks.server, sizeof marks.server, "%s", cur);
        do_append("s %s\n", marks.server);
    } else if (last->id > marks.refused_fence && last->id != marks.low_fence) {
        marks.low_fence = last->id;
        say = 1;
    }
    pthread_mutex_unlock(&marks.lock);
    if (say)
        log_error("fence #%" PRId64 " of %s (floor %" PRId64 ", serial floor %"
                  PRId64 ") does not lift this node's refusal: it needs a fence "
                  "of %s with a floor of at least %" PRId64 " and a serial "
                  "floor of at least %" PRId64 "; run leafd db-fence again",
                  last->id, last->server, last->floor, last->serial_floor, cur,
                  store_marks_max(), store_marks_serial_max());
    return ok;
}

void
store_marks_server(char *out, size_t cap)
{
    pthread_mutex_lock(&marks.lock);
    snprintf(out, cap, "%s", marks.server);
    pthread_mutex_unlock(&marks.lock);
}

void
store_marks_set_server(const char *server)
{
    pthread_mutex_lock(&marks.lock);
    if (strcmp(marks.server, server) != 0) {
        snprintf(marks.server, sizeof marks.server, "%s", server);
        do_append("s %s\n", marks.server);
    }
    pthread_mutex_unlock(&marks.lock);
}
