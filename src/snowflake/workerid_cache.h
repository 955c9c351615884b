/* workerid_cache.h: the snowflake cache file: the worker ID, the fence no
 * issued ID passes, and the writing process's instance nonce, kept on local
 * disk. JSON: {"format":1,"leaf_name","source","ip","port","worker_id",
 * "datacenter_id","fence","zk_node","nonce"}.
 *
 * Ownership: workerid_cache_read fills a struct the caller ends with
 * workerid_cache_free (its strings are malloc'd; a zeroed struct is fine).
 * Failure values: see each function; *cause is malloc'd.
 * Thread-safety: none needed: one writer (the snowflake keeper, or the
 * opener before it starts); distinct paths are independent.
 */
#ifndef LEAFD_WORKERID_CACHE_H
#define LEAFD_WORKERID_CACHE_H

#include <stdint.h>

struct workerid_cache {
    char    *leaf_name;
    char    *source;          /* "static", "zookeeper", "takeover" */
    char    *ip;
    int64_t  port;
    int64_t  worker_id;       /* -1: none */
    int64_t  datacenter_id;
    int64_t  fence_ms;        /* no ID issued has a later timestamp */
    char    *zk_node;         /* "" for static */
    char    *nonce;           /* the writing process's instance nonce */
};

/* 0 read, 1 no such file (c zeroed, worker_id -1), -1 unreadable or corrupt
 * (*cause says which and what to do). */
int  workerid_cache_read(const char *path, struct workerid_cache *c,
                         char **cause);
/* Atomic: temp file, fsync, rename, fsync of the directory. */
int  workerid_cache_write(const char *path, const struct workerid_cache *c,
                     char **cause);
void workerid_cache_free(struct workerid_cache *c);

#endif
