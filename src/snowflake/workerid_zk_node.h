/* workerid_zk_node.h: the data of a Leaf worker-ID node in ZooKeeper, as
 * text: Leaf's Endpoint {"ip":"..","port":"..","timestamp":ms} plus leafd's
 * "leafd":"<instance nonce>", once released "released":true, and
 * "serial_zones":"<record>" (workerid_lease.h's record). Pure (no
 * ZooKeeper), so it is fuzzed alone (fuzz/fuzz_zk_node.c).
 *
 * Ownership: wzk_node_parse fills a struct the caller ends with
 * wzk_node_free (a zeroed struct is fine); wzk_node_format returns a
 * malloc'd string.
 * Failure values: wzk_node_parse -1 (not Leaf's Endpoint; n zeroed).
 * Thread-safety: no shared state.
 */
#ifndef LEAFD_WORKERID_ZK_NODE_H
#define LEAFD_WORKERID_ZK_NODE_H

#include <stddef.h>
#include <stdint.h>

struct wzk_node {
    char    *ip;
    int64_t  port;          /* a string (Leaf) or a number in the data */
    int64_t  ts;
    char    *nonce;         /* "leafd", NULL when absent or empty */
    int      released;      /* "released" is true */
    char    *zones;         /* "serial_zones", NULL when absent; "?" when
                               not a string (read as a bad record) */
};

/* At most this many bytes of node data are parsed: ZooKeeper's own limit
 * (jute.maxbuffer's default, 1 MB); a Leaf node is under 200 bytes. */
#define WZK_NODE_MAX (1024 * 1024)

int   wzk_node_parse(const char *data, size_t len, struct wzk_node *n);
void  wzk_node_free(struct wzk_node *n);
/* The data for (ip, port, ts, nonce, released); the port as a string, as
 * Leaf writes it. *len gets its length. */
char *wzk_node_format(const char *ip, int64_t port, int64_t ts,
                      const char *nonce, int released, int *len);
/* The same with "serial_zones" (NULL: none). */
char *wzk_node_format_zones(const char *ip, int64_t port, int64_t ts,
                            const char *nonce, int released,
                            const char *zones, int *len);

#endif
