/* store_impl.h: what store.c (the dispatcher) and the backends share.
 *
 * Internal to the store_*.c files. A backend embeds struct store as the first
 * member of its own struct and fills ops. store.c checks the arguments (tag
 * length, step, description length) before calling a backend, so backends may
 * assume them valid.
 */
#ifndef LEAFD_STORE_IMPL_H
#define LEAFD_STORE_IMPL_H

#include "store.h"

#define STORE_DESC_MAX 256          /* bytes kept of description (row field) */
#define STORE_SQLITE_TIMEOUT_MS 5000 /* busy timeout when db_timeout_ms <= 0 */

struct store_ops {
    const char *name;                            /* "sqlite" or "mysql" */
    enum store_result (*alloc)(struct store *s, const char *tag, int64_t step,
                               int64_t *max_id, int64_t *db_step, char **cause);
    enum store_result (*get)(struct store *s, const char *tag,
                             struct store_row *row, char **cause);
    enum store_result (*list)(struct store *s, struct store_row **rows,
                              size_t *n, char **cause);
    enum store_result (*insert)(struct store *s, const char *tag, int64_t max_id,
                                int64_t step, const char *description,
                                char **cause);
    enum store_result (*serial_alloc)(struct store *s, int64_t offset_ms,
                                      store_serial_key_fn key, void *arg,
                                      int64_t step, int64_t *db_ms, char *tag,
                                      size_t cap, int64_t *max_id,
                                      char **cause);
    void (*close)(struct store *s);
};

struct store {
    const struct store_ops *ops;
};

/* Backend constructors: NULL with *cause on a configuration error. */
struct store *store_sqlite_open(const struct config *cfg, char **cause);
struct store *store_mysql_open(const struct config *cfg, char **cause);

/* Copy at most cap - 1 bytes of src[0, len) into dst and NUL-terminate,
 * cutting before a partial UTF-8 sequence. */
void store_copy_text(char *dst, size_t cap, const char *src, size_t len);

/* Set *cause (if cause is not NULL) to a malloc'd formatted message. */
void store_set_cause(char **cause, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
