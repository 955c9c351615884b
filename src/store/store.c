/* store.c: the segment store's calls (see store.h): arguments checked
 * before any SQL runs, then the backend's op; and the helpers the backends
 * share. store_open.c picks the backend: store_sqlite.c, store_mysql.c or
 * store_multi.c. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "store.h"
#include "store_impl.h"
#include "store_marks.h"
#include "util.h"


void
store_set_cause(char **cause, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    util_vset_cause(cause, fmt, ap);
    va_end(ap);
}

void
store_copy_text(char *dst, size_t cap, const char *src, size_t len)
{
    size_t n = len;

    if (n > cap - 1) {
        n = cap - 1;
        /* src[n] is the first byte dropped: back up to its character's start. */
        while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void
store_close(struct store *s)
{
    if (s != NULL)
        s->ops->close(s);
}

const char *
store_kind_name(const struct store *s)
{
    return s->ops->name;
}

/* A tag the table can hold: 1..TAG_MAX bytes. Checked before any SQL. */
static int
store_check_tag(const char *tag, char **cause)
{
    size_t len;

    if (tag == NULL || *tag == '\0') {
        store_set_cause(cause, "empty biz_tag");
        return -1;
    }
    len = strnlen(tag, TAG_MAX + 1);
    if (len > TAG_MAX) {
        store_set_cause(cause, "biz_tag longer than %d bytes", TAG_MAX);
        return -1;
    }
    return 0;
}

static const char *
store_where(const struct store *s)
{
    return s->ops->where != NULL ? s->ops->where(s) : s->ops->name;
}

/* While the process is refused (store_marks.h), a fence at or above its
 * marks lifts the refusal: 0 not refused (any more), or -1 with *cause. */
static int
marks_lift(struct store *s, char **cause)
{
    char code[32], why[MARKS_WHY_MAX], server[MARKS_SERVER_MAX];
    struct marks_fence last;

    if (!store_marks_refused(code, sizeof code, why, sizeof why))
        return 0;
    if (s->ops->fence_get != NULL &&
        s->ops->fence_get(s, &last, server, sizeof server, NULL) == STORE_OK &&
        store_marks_fenced(&last, server))
        return 0;
    store_set_cause(cause, "%s", why);
    return -1;
}

enum store_result
store_alloc(struct store *s, const char *tag, int64_t step, int64_t *max_id,
            int64_t *db_step, char **cause)
{
    struct mark *held;
    enum store_result rc;

    if (store_check_tag(tag, cause) == -1)
        return STORE_BAD_ARG;
    if (step < 1 || step > STORE_STEP_MAX) {
        store_set_cause(cause, "step %lld of %s is not in [1, %d]", (long long)step,
                        tag, STORE_STEP_MAX);
        return STORE_BAD_ROW;
    }
    if (marks_lift(s, cause) == -1)
        return STORE_REFUSED;
    /* Loads and leases of one tag run on several loader threads. */
    held = store_marks_hold(tag);
    rc = s->ops->alloc(s, tag, step, max_id, db_step, cause);
    if (rc == STORE_OK && store_marks_take(tag, 0, *max_id, step,
                                           store_where(s), cause) == -1)
        rc = STORE_REFUSED;
    store_marks_release(held);
    return rc;
}

/* The backends call key through this: a row name is checked as any tag. */
struct serial_key_check {
    store_serial_key_fn key;
    void               *arg;
};

static int
serial_key_checked(void *arg, int64_t db_ms, char *tag, size_t cap,
                   struct store_serial_floor *floor)
{
    struct serial_key_check *k = arg;

    memset(floor, 0, sizeof *floor);
    if (k->key(k->arg, db_ms, tag, cap, floor) == -1)
        return -1;
    assert(floor->n >= 0 && floor->n <= STORE_SERIAL_FLOOR_MAX);
    for (int i = 0; i < floor->n; i++)
        if (store_check_tag(floor->row[i].tag, NULL) == -1)
            return -1;
    return store_check_tag(tag, NULL);
}

void
store_like_pattern(const char *tag, int prefix, char *out)
{
    size_t n = strnlen(tag, TAG_MAX);

    assert(tag[n] == '\0');
    for (size_t i = 0; i < n; i++) {
        if (tag[i] == '%' || tag[i] == '_' || tag[i] == '!')
            *out++ = '!';
        *out++ = tag[i];
    }
    if (prefix)
        *out++ = '%';
    *out = '\0';
}

enum store_result
store_serial_alloc(struct store *s, int64_t offset_ms, store_serial_key_fn key,
                   void *arg, int64_t step, int64_t *db_ms, char *tag,
                   size_t cap, int64_t *max_id, char **cause)
{
    struct serial_key_check k = { key, arg };
    enum store_result rc;

    if (step < 1 || step > STORE_STEP_MAX || cap < TAG_MAX + 1) {
        store_set_cause(cause, "serial step %lld is not in [1, %d]",
                        (long long)step, STORE_STEP_MAX);
        return STORE_BAD_ARG;
    }
    if (marks_lift(s, cause) == -1)
        return STORE_REFUSED;
    /* One serial loader thread: no hold (store_marks_take). */
    rc = s->ops->serial_alloc(s, offset_ms, serial_key_checked, &k, step,
                              db_ms, tag, cap, max_id, cause);
    if (rc == STORE_OK && store_marks_take(tag, 1, *max_id, step,
                                           store_where(s), cause) == -1)
        return STORE_REFUSED;
    /* Behind the row's mark, found in the transaction: refused as a range
     * below the marks is, where a fence can lift it (multi-db init merges
     * a set's serial rows instead). */
    if (rc == STORE_REFUSED && s->ops->fence_get != NULL &&
        !store_marks_refused(NULL, 0, NULL, 0))
        store_marks_refuse("store_behind", "%s", cause != NULL && *cause != NULL ?
                           *cause : "a serial row went back in time");
    return rc;
}

enum store_result
store_get(struct store *s, const char *tag, struct store_row *row,
          char **cause)
{
    if (store_check_tag(tag, cause) == -1)
        return STORE_BAD_ARG;
    return s->ops->get(s, tag, row, cause);
}

static int
store_row_cmp(const void *a, const void *b)
{
    return strcmp(((const struct store_row *)a)->biz_tag,
                  ((const struct store_row *)b)->biz_tag);
}

enum store_result
store_list(struct store *s, struct store_row **rows, size_t *n, char **cause)
{
    return store_list_keep(s, NULL, rows, n, cause);
}

enum store_result
store_list_keep(struct store *s, store_keep_fn keep, struct store_row **rows,
                size_t *n, char **cause)
{
    *rows = NULL;
    *n = 0;
    if (s->ops->list(s, keep, rows, n, cause) == -1)
        return STORE_DB_ERROR;
    /* Byte order, whatever the database's collation says. */
    if (*n > 1)
        qsort(*rows, *n, sizeof **rows, store_row_cmp);
    return STORE_OK;
}

enum store_result
store_insert(struct store *s, const char *tag, int64_t max_id, int64_t step,
             const char *description, char **cause)
{
    if (store_check_tag(tag, cause) == -1)
        return STORE_BAD_ARG;
    if (step < 1 || step > INT32_MAX) {
        store_set_cause(cause, "step %lld for %s is outside 1..%d",
                        (long long)step, tag, INT32_MAX);
        return STORE_BAD_ARG;
    }
    if (max_id < 0) {
        store_set_cause(cause, "max_id %lld for %s is negative",
                        (long long)max_id, tag);
        return STORE_BAD_ARG;
    }
    if (description != NULL &&
        strnlen(description, STORE_DESC_MAX + 1) > STORE_DESC_MAX) {
        store_set_cause(cause, "description for %s longer than %d bytes", tag,
                        STORE_DESC_MAX);
        return STORE_BAD_ARG;
    }
    if (description != NULL && strcmp(description, STORE_SERIAL_DESCRIPTION) == 0) {
        store_set_cause(cause, "description '%s' for %s is reserved for serial "
                        "numbers' rows", description, tag);
        return STORE_BAD_ARG;
    }
    return s->ops->insert(s, tag, max_id, step, description, cause);
}

enum store_result
store_serial_rows(struct store *s, struct store_row **rows, size_t *n,
                  char **cause)
{
    struct store *home = s->ops->serial_home != NULL ? s->ops->serial_home(s) : s;

    /* Filtered as the rows come: a table of 10,000 segment tags and a few
     * serial rows costs a few rows' memory, not 10,000 (4.4 MB). */
    return store_list_keep(home, store_row_is_serial, rows, n, cause);
}

int
store_row_is_serial(const struct store_row *row)
{
    return strcmp(row->description, STORE_SERIAL_DESCRIPTION) == 0;
}

void
store_probe(struct store *s)
{
    if (s->ops->probe != NULL)
        s->ops->probe(s);
}
