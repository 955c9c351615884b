/* workerid_zk.h: snowflake worker IDs held in ZooKeeper the way Meituan's
 * Leaf keeps them, behind the lease rule of workerid_lease.h.
 *
 * Layout (Leaf's): a PERSISTENT_SEQUENTIAL node
 * /snowflake/<leaf.name>/forever/<ip>:<port>-<10-digit seq> per identity;
 * the sequence number is the worker ID. Its data is Leaf's Endpoint plus
 * the writer's instance nonce: {"ip":"..","port":"..","timestamp":ms,
 * "leafd":"<nonce>"}, and "released":true once a clean stop gave it up
 * (snowflake.release_on_stop). With a nonce the timestamp is a fence that
 * the node holds; without one (Java Leaf, or a leafd before the nonce) it
 * is a heartbeat of its writer's clock.
 *
 * The claim, in order: this identity's own node (the data names our
 * ip:port; of several, one inside the range, the cache file's worker ID;
 * outside the range the start is refused, naming the node); a released
 * leafd node inside the range whose fence is below our clock; with
 * snowflake.takeover, such a node whose fence is older than the lease; else
 * a new node. Every claim is a versioned write of our nonce, so of two
 * racing claimers one wins, and whoever wrote the node before loses it at
 * its next write.
 *
 * The range (snowflake.worker_id_min.._max; the sequence is the worker ID,
 * and ZooKeeper's counter under forever only goes up): a new node whose
 * range starts past the counter first advances it with ephemeral probe
 * nodes "leafd.advance:0-<seq>" (Leaf's name form, deleted at once), one
 * node at a time under the ephemeral lock /snowflake/<leaf.name>/advance;
 * a counter past the range refuses without a node, and a sequence that
 * still lands outside the range is removed again (refused past it, retried
 * below it). Java Leaf on the same path takes whatever sequence it gets:
 * after leafd advanced the counter that is inside the range until the
 * counter passes the range's top; a claim logs the foreign nodes it sees
 * outside its range.
 *
 * Ownership: workerid_zk_store fills a struct wlease_store whose close
 * frees it (and closes the ZooKeeper session).
 * Failure values: workerid_zk_store -1 with *cause (malloc'd).
 * Thread-safety: the store's claim, fence and release run on one thread at
 * a time (the lease's keeper); workerid_zk_node, the source, state and
 * metrics hooks on any thread.
 */
#ifndef LEAFD_WORKERID_ZK_H
#define LEAFD_WORKERID_ZK_H

#include <stdint.h>

#include "workerid_lease.h"

struct wzk;
struct zk;

/* The help line of leafd_snowflake_zk_session_state, which the sources
 * without ZooKeeper print too (workerid.c: always 0). */
#define WORKERID_ZK_STATE_HELP \
    "ZooKeeper session: 0 not used, 1 connecting, 2 connected, 3 expired."

struct workerid_zk_params {
    const char *address;            /* "host:port,..." */
    const char *leaf_name;          /* no '/' */
    const char *ip;
    int         port;
    int64_t     session_timeout_ms; /* also bounds the first claim's wait */
    int64_t     heartbeat_ms;       /* the twin check watches two */
    int64_t     fence_step_ms;      /* a quarter bounds one fence write */
    int         takeover;           /* take stale leafd nodes (needs a
                                       lease: wlease_params.lease_ms > 0) */
};

/* A store on p->address. Starts the session but does not wait for it (the
 * first claim waits up to session_timeout_ms). -1 with *cause on an empty
 * address or a leaf.name that cannot name a node. */
int  workerid_zk_store(const struct workerid_zk_params *p,
                       struct wlease_store *out, char **cause);

/* The node that holds the worker ID (malloc'd), or NULL before a claim. */
char *workerid_zk_node(struct wzk *z);

/* --- for tests only: nothing in src/ calls these --------------------- */

/* The ZooKeeper client (to cut and expire the session). */
struct zk *workerid_zk_client(struct wzk *z);

#endif
