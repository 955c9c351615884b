/* multi_block.c: the pure parts of several databases (multi_block.h). */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "multi_block.h"
#include "util.h"

static void
set_cause(char **cause, const char *fmt, ...)
{
    va_list ap;

    if (cause == NULL)
        return;
    va_start(ap, fmt);
    if (vasprintf(cause, fmt, ap) < 0)
        abort();
    va_end(ap);
}

/* The first ID of a range of step IDs on database db of a multi-db set,
 * at or above from: inside a block this database owns (index k >= since,
 * k = db_index mod db_count), never across a block's end. -1 if none
 * fits below INT64_MAX. */
int64_t
store_block_start(const struct multi_meta *mm, int64_t from, int64_t step)
{
    int64_t b = mm->block_size, n = mm->db_count, r = mm->db_index, k, start;

    if (step > b || b < 1 || n < 1 || r < 0 || r >= n)
        return -1;
    if (from < 1)
        from = 1;
    if (mm->since_block > INT64_MAX / b)
        return -1;
    if (from < mm->since_block * b)
        from = mm->since_block * b;
    k = from / b;
    if (k > INT64_MAX / b - 1)
        return -1;                      /* block k would end past INT64_MAX */
    if (k % n == r && from % b <= b - step)
        return from;                    /* fits in the current block */
    /* The next block this database owns, after k. */
    if (k > INT64_MAX - 1 - n)
        return -1;
    k = k + 1 + ((r - (k + 1) % n) + n) % n;
    assert(k % n == r);
    if (k > INT64_MAX / b - 1)
        return -1;
    start = k * b;
    if (start < 1)
        start = 1;
    return start;
}

int
store_block_owns(const struct multi_meta *mm, int64_t start, int64_t step)
{
    int64_t b = mm->block_size, k;

    if (b < 1 || mm->db_count < 1 || step < 1 || step > b || start < 1 ||
        start > INT64_MAX - step)
        return 0;
    k = start / b;
    return k >= mm->since_block && k % mm->db_count == mm->db_index &&
           (start + step - 1) / b == k;
}

const struct multi_member *
store_multi_missing(const struct multi_member *rows, size_t n,
                    const int64_t *ids, int nids)
{
    for (size_t k = 0; k < n; k++) {
        int found = 0;

        if (rows[k].pos < 0)
            continue;
        for (int i = 0; i < nids && !found; i++)
            found = ids[i] == rows[k].db_id;
        if (!found)
            return &rows[k];
    }
    return NULL;
}

/* A PostgreSQL URI's scheme at p: its length, or 0. */
static size_t
pg_scheme(const char *p)
{
    return strncasecmp(p, "postgresql://", 13) == 0 ? 13 :
           strncasecmp(p, "postgres://", 11) == 0 ? 11 : 0;
}

int
store_multi_is_pg(const char *url)
{
    return pg_scheme(url) > 0 ||
           (strstr(url, "://") == NULL && strchr(url, '=') != NULL);
}

/* 1 when q starts another connection string: "scheme://" or libpq's
 * "keyword=" (neither is a host name of a URI's host list). */
static int
starts_url(const char *q)
{
    size_t n = 0;

    while ((q[n] >= 'a' && q[n] <= 'z') || (q[n] >= 'A' && q[n] <= 'Z') ||
           (q[n] >= '0' && q[n] <= '9') || q[n] == '_' || q[n] == '+' ||
           q[n] == '-' || q[n] == '.')
        n++;
    if (n == 0)
        return 0;
    while (q[n] == ' ' || q[n] == '\t')
        n++;
    return q[n] == '=' || strncmp(q + n, "://", 3) == 0;
}

/* The comma that ends the URL at p: any comma (MySQL), or one followed,
 * after blanks, by another connection string (starts_url: a URI's own
 * host list has commas too). NULL: the last. */
static const char *
next_comma(const char *p, int pg)
{
    for (const char *e = strchr(p, ','); e != NULL; e = strchr(e + 1, ',')) {
        const char *q = e + 1;

        if (!pg)
            return e;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q == '\0' || *q == ',' || starts_url(q))
            return e;
    }
    return NULL;
}

int
store_multi_split(const char *list, char **urls, int max, char **cause)
{
    return store_multi_split_kind(list, 0, urls, max, cause);
}

int
store_multi_split_kind(const char *list, int pg, char **urls, int max,
                       char **cause)
{
    const char *key = pg ? "segment.postgresql.urls" : "segment.mysql.urls";
    int n = 0;
    const char *p = list;

    while (*p != '\0') {
        const char *e;
        size_t len;

        while (*p == ' ' || *p == '\t')
            p++;
        e = next_comma(p, pg);
        len = e != NULL ? (size_t)(e - p) : strlen(p);
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len == 0) {
            set_cause(cause, "%s: an empty URL in the list", key);
            goto error;
        }
        if (n == max) {
            set_cause(cause, "%s: more than %d databases", key, max);
            goto error;
        }
        urls[n++] = xstrndup(p, len);
        if (!pg && store_multi_is_pg(urls[n - 1])) {
            set_cause(cause, "%s: URL %d is PostgreSQL's: %s", key, n,
                      CONFIG_MULTI_MIXED_REFUSAL);
            goto error;
        }
        if (pg && pg_scheme(urls[n - 1]) == 0) {
            set_cause(cause, "%s: URL %d is not a postgresql:// URI: give "
                      "each database as a URI (libpq's keyword form has "
                      "commas of its own)%s", key, n,
                      strstr(urls[n - 1], "://") != NULL ? "; " 
                      CONFIG_MULTI_MIXED_REFUSAL : "");
            goto error;
        }
        if (e == NULL)
            break;
        p = e + 1;
        if (*p == '\0') {
            set_cause(cause, "%s: a trailing comma", key);
            goto error;
        }
    }
    return n;

error:
    while (n > 0)
        free(urls[--n]);
    return -1;
}

