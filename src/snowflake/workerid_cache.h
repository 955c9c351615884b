/* workerid_cache.h: the snowflake cache file: the worker ID, the fence no
 * issued ID passes, and the writing process's instance nonce, kept on local
 * disk. JSON: {"format":1,"leaf_name","source","ip","port","worker_id",
 * "datacenter_id","fence","zk_node","nonce","layout"}.
 *
 * Ownership: workerid_cache_read fills a struct the caller ends with
 * workerid_cache_free (its strings are malloc'd; a zeroed struct is fine).
 * Failure values: see each function; *cause is malloc'd.
 * Thread-safety: none needed: one writer (the snowflake keeper, or the
 * opener before it starts); distinct paths are independent.
 */
#ifndef LEAFD_WORKERID_CACHE_H
#define LEAFD_WORKERID_CACHE_H

#include <stddef.h>
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
    char    *layout;          /* the writer's ID layout (workerid_cache_
                                 layout_check), "" not recorded */
};

/* 0 read, 1 no such file (c zeroed, worker_id -1), -1 unreadable or corrupt
 * (*cause says which and what to do). */
int  workerid_cache_read(const char *path, struct workerid_cache *c,
                         char **cause);
/* Atomic: temp file, fsync, rename, fsync of the directory. */
int  workerid_cache_write(const char *path, const struct workerid_cache *c,
                     char **cause);
void workerid_cache_free(struct workerid_cache *c);

/* A layout as the cache file records it, "<epoch_ms>:<timestamp>/
 * <datacenter>/<worker>/<sequence>" (bits), into buf. */
void workerid_cache_layout(int64_t epoch_ms, int timestamp_bits,
                           int datacenter_bits, int worker_bits,
                           int sequence_bits, char *buf, size_t size);
/* May a node whose cache file (path, c) was written under c->layout issue
 * under layout now? 0: the same, not recorded, or every ID of layout is
 * above every ID the old one issued (the same epoch, a wider timestamp
 * shift: bits moved out of timestamp_bits); else -1 with *cause saying
 * why IDs could repeat and what to do. */
int  workerid_cache_layout_check(const char *path,
                                 const struct workerid_cache *c,
                                 const char *layout, char **cause);

#endif
