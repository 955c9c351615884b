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

int
store_multi_is_pg(const char *url)
{
    return strncasecmp(url, "postgresql://", 13) == 0 ||
           strncasecmp(url, "postgres://", 11) == 0 ||
           (strstr(url, "://") == NULL && strchr(url, '=') != NULL);
}

/* Split segment.mysql.urls at commas (blanks around them ignored). Returns
 * the count, or -1 with *cause. */
int
store_multi_split(const char *list, char **urls, int max, char **cause)
{
    int n = 0;
    const char *p = list;

    while (*p != '\0') {
        const char *e;
        size_t len;

        while (*p == ' ' || *p == '\t')
            p++;
        e = strchr(p, ',');
        len = e != NULL ? (size_t)(e - p) : strlen(p);
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len == 0) {
            set_cause(cause, "segment.mysql.urls: an empty URL in the "
                            "list");
            goto error;
        }
        if (n == max) {
            set_cause(cause, "segment.mysql.urls: more than %d "
                            "databases", max);
            goto error;
        }
        urls[n++] = xstrndup(p, len);
        if (store_multi_is_pg(urls[n - 1])) {
            set_cause(cause, "segment.mysql.urls: URL %d is PostgreSQL's: "
                      "%s", n, CONFIG_MULTI_PG_REFUSAL);
            goto error;
        }
        if (e == NULL)
            break;
        p = e + 1;
        if (*p == '\0') {
            set_cause(cause, "segment.mysql.urls: a trailing comma");
            goto error;
        }
    }
    return n;

error:
    while (n > 0)
        free(urls[--n]);
    return -1;
}

