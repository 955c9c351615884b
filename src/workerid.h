/* workerid.h: where a snowflake worker ID comes from, and where its fence is
 * kept.
 *
 * Sources:
 *   static     snowflake.worker_id from the config.
 *   k8s        the same, with the worker ID from the pod's StatefulSet
 *              ordinal (workerid_k8s_ordinal); the fence is the cache file
 *              on the pod's volume.
 *   zookeeper  Leaf's scheme: a PERSISTENT_SEQUENTIAL node
 *              /snowflake/<leaf.name>/forever/<ip>:<port>-<10-digit seq>
 *              whose data is {"ip":"..","port":"..","timestamp":ms,
 *              "leafd":"<instance nonce>"}; the sequence number is the
 *              worker ID. A node whose data names this ip:port is reused
 *              (also one Java Leaf made). ZooKeeper down at start: no
 *              worker ID until it is reachable (registered in the
 *              background).
 *   takeover   (snowflake.takeover) no node of our own: a stale node that
 *              leafd wrote last (it carries a nonce) is claimed with a
 *              versioned write, so of two racing nodes exactly one wins.
 *
 * The fence: every persist writes the cache file (temp file, fsync, rename,
 * fsync of the directory) and then, with ZooKeeper, the node's timestamp (a
 * versioned write: a node that was taken over is noticed and the worker ID
 * is dropped). Only a fence the node holds counts (SNOWFLAKE_PERSIST_OK);
 * see the DESIGN comment in workerid.c. The cache file is JSON: {"format":1,
 * "leaf_name","source","ip","port","worker_id","datacenter_id","fence",
 * "zk_node","nonce"}; its default path is
 * ./leafd-snowflake-<leaf.name>-<port>.json (port: the snowflake port).
 *
 * Ownership: workerid_open_params returns a struct workerid; once handed to
 * snowflake_create through workerid_backend, the snowflake owns it and
 * closes it; else the caller does with workerid_close (NULL is a no-op).
 * Failure values: workerid_open_params NULL with *cause (malloc'd);
 * actions 0 / -1
 * with *cause.
 * Thread-safety: persist and tick run on one thread (the snowflake keeper,
 * or the opener before it starts); the state/metrics/source readers may run
 * on any thread at the same time.
 */
#ifndef LEAFD_WORKERID_H
#define LEAFD_WORKERID_H

#include <stdint.h>

#include "snowflake.h"
#include "workerid_cache.h"

struct workerid;

/* --- opening ------------------------------------------------------------ */

struct workerid_params {
    int         use_zk;
    const char *leaf_name;
    const char *zk_address;
    const char *cache_path;
    const char *ip;
    int         port;
    int64_t     worker_id;        /* static, k8s */
    int         k8s;              /* the static worker ID is a pod ordinal
                                     (workerid_k8s_ordinal): named "k8s" */
    int64_t     datacenter_id;
    uint64_t    max_worker;
    int64_t     heartbeat_ms;
    int64_t     zk_timeout_ms;    /* session timeout; also bounds start */
    int64_t     fence_step_ms;
    int         takeover;
    int64_t     takeover_age_ms;
    int64_t     max_clock_offset_ms; /* vs a written node's mtime; 0 off */
    snowflake_clock_fn clock;     /* for the offset; NULL: wall clock */
    void       *clock_arg;
};

/* From explicit parameters (sfconfig.c fills them from the config).
 * May block up to about
 * zk_timeout_ms plus a few ZooKeeper round trips. Fails on a corrupt cache
 * file, an invalid static worker ID, a worker ID beyond max_worker, or a
 * ZooKeeper registration that is refused for good; ZooKeeper being down is
 * not a failure (the worker ID is unknown until it is reachable). A node of
 * this ip:port that another live leafd keeps writing is a failure. */
struct workerid *workerid_open_params(const struct workerid_params *p,
                                      char **cause);
void workerid_close(struct workerid *w);

/* The worker ID (-1 unknown) and the fence it must pass before issuing. */
int  workerid_get(struct workerid *w, int64_t *worker, int64_t *fence_ms);
/* "static", "k8s", "zookeeper", "takeover" or "none". */
const char *workerid_source(struct workerid *w);
/* The ZooKeeper node path, or NULL. malloc'd copy. */
char *workerid_node(struct workerid *w);

/* The ZooKeeper client, or NULL for the static source (tests). */
struct zk *workerid_zk(struct workerid *w);

/* Fill b with this source's persist/tick/... for snowflake_create. */
void workerid_backend(struct workerid *w, struct snowflake_backend *b);
/* SNOWFLAKE_PERSIST_OK, SNOWFLAKE_PERSIST_FAILED (file error, worker ID
 * lost) or, with
 * ZooKeeper, SNOWFLAKE_PERSIST_UNCONFIRMED (the node does not hold it). */
int  workerid_persist(struct workerid *w, int64_t fence_ms, char **cause);
/* SNOWFLAKE_TICK_* */
int  workerid_tick(struct workerid *w, int64_t now_ms);

/* workerid_k8s.c: the worker ID of a StatefulSet pod: the trailing
 * "-<ordinal>" of name (the hostname, or the variable snowflake.k8s.
 * ordinal_env names; a bare number is taken too) plus offset. 0, or -1 with
 * *cause when there is no ordinal or the sum is past max_worker. */
int  workerid_k8s_ordinal(const char *name, int64_t offset,
                          uint64_t max_worker, int64_t *worker, char **cause);

/* First non-loopback IPv4 address of an interface that is up, as text in
 * buf (>= 16 bytes). 0, or -1 when there is none. */
int  workerid_local_ipv4(char *buf, size_t size);

#endif
