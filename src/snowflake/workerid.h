/* workerid.h: snowflake worker IDs that need no shared store, and the
 * helpers the stores share.
 *
 * Sources here:
 *   static     snowflake.worker_id from the config.
 *   k8s        the same, with the worker ID from the pod's StatefulSet
 *              ordinal (workerid_k8s_ordinal); the fence is the cache file
 *              on the pod's volume. With snowflake.k8s.fence_store the
 *              fence is also held in Redis or MySQL, and the source is a
 *              lease with a fixed worker ID instead (workerid_lease.h).
 * The shared stores (zookeeper, redis, mysql) hold their worker IDs under
 * the lease rule of workerid_lease.h (workerid_zk.h, workerid_redis.h,
 * workerid_mysql.h).
 *
 * The fence: every persist writes the cache file (temp file, fsync, rename,
 * fsync of the directory); a start gates on the file's fence. The cache
 * file is JSON: {"format":1,"leaf_name","source","ip","port","worker_id",
 * "datacenter_id","fence","zk_node","nonce","layout"} (workerid_cache.h); its
 * default path is ./leafd-snowflake-<leaf.name>-worker-<dc>-<id>.json.
 *
 * Ownership: workerid_open_params returns a struct workerid; once handed to
 * snowflake_create through workerid_backend, the snowflake owns it and
 * closes it; else the caller does with workerid_close (NULL is a no-op).
 * Failure values: workerid_open_params NULL with *cause (malloc'd);
 * actions 0 / -1 with *cause.
 * Thread-safety: persist and tick run on one thread (the snowflake keeper,
 * or the opener before it starts); the state/metrics/source readers may run
 * on any thread at the same time (nothing they read changes after open).
 */
#ifndef LEAFD_WORKERID_H
#define LEAFD_WORKERID_H

#include <stdint.h>

#include "snowflake.h"
#include "workerid_cache.h"

struct workerid;

/* --- opening ------------------------------------------------------------ */

struct workerid_params {
    const char *leaf_name;
    const char *cache_path;
    const char *ip;
    int         port;
    int64_t     worker_id;
    int         k8s;              /* the worker ID is a pod ordinal
                                     (workerid_k8s_ordinal): named "k8s" */
    int64_t     datacenter_id;
    uint64_t    min_worker;       /* worker_id must be in min..max (the
                                     range, snowflake.worker_id_min..) */
    uint64_t    max_worker;
    char        layout[64];       /* workerid_cache_layout's, recorded in
                                     and checked against the cache file;
                                     "": none */
};

/* From explicit parameters (sfconfig.c fills them from the config). Fails
 * on a corrupt cache file or a worker ID outside min_worker..max_worker. */
struct workerid *workerid_open_params(const struct workerid_params *p,
                                      char **cause);
void workerid_close(struct workerid *w);

/* The worker ID and the fence it must pass before issuing. 0. */
int  workerid_get(struct workerid *w, int64_t *worker, int64_t *fence_ms);
/* "static" or "k8s". */
const char *workerid_source(struct workerid *w);

/* Fill b with this source's persist/tick/... for snowflake_create. */
void workerid_backend(struct workerid *w, struct snowflake_backend *b);
/* SNOWFLAKE_PERSIST_OK, or SNOWFLAKE_PERSIST_FAILED (file error). */
int  workerid_persist(struct workerid *w, int64_t fence_ms, char **cause);
/* SNOWFLAKE_TICK_NONE: nothing to keep. */
int  workerid_tick(struct workerid *w, int64_t now_ms);

/* workerid_k8s.c: the worker ID of a StatefulSet pod: the trailing
 * "-<ordinal>" of name (the hostname, or the variable snowflake.k8s.
 * ordinal_env names; a bare number is taken too) plus offset. 0, or -1 with
 * *cause when there is no ordinal or the sum is past max_worker. */
int  workerid_k8s_ordinal(const char *name, int64_t offset,
                          uint64_t max_worker, int64_t *worker, char **cause);

/* The identity a pod holds its worker ID under in a fence store:
 * "<namespace>/<name>", or name alone when ns is NULL or "" (no namespace
 * known), into buf. ns must be a DNS label (1..63 of a-z, 0-9, '-', not
 * starting or ending with '-'), as Kubernetes names namespaces. 0, or -1
 * with *cause when it is not or the identity does not fit in size. */
int  workerid_k8s_identity(const char *name, const char *ns, char *buf,
                           size_t size, char **cause);

/* First non-loopback IPv4 address of an interface that is up, as text in
 * buf (>= 16 bytes). 0, or -1 when there is none. */
int  workerid_local_ipv4(char *buf, size_t size);

#endif
