/* leafd_client.h: libleafd-client, IDs made in process from ranges leased
 * from leafd servers (GET /segment/<biz_tag>/lease?size=N).
 *
 * A client leases a range of a biz_tag's IDs and hands them out itself: one
 * atomic fetch-add per ID on the current range, no lock, no syscall. A
 * background thread leases the next range once prefetch_percent of the
 * current one is used, so callers normally never wait for the network.
 * The lease size adapts to the local rate as leafd's step does: doubled
 * while a range lasts under target_ms, halved while it lasts over twice
 * that, within [lease_min, lease_max].
 *
 * Servers: several URLs, tried in order from the last one that answered.
 * A server that fails (connect error, timeout, 5xx) is skipped for dead_ms;
 * one lease tries each server at most once, so a dead server is never
 * retried in a loop. When every server is down the client goes on handing
 * out what it holds, then fails with LEAFD_EUNAVAILABLE (leafd_last_error
 * says why); no call blocks longer than about timeout_ms per server.
 *
 * IDs are unique across every client and server of one leaf_alloc table:
 * a lease is a range leafd never hands out again. IDs of one thread
 * increase; across threads they interleave. IDs left in a range when the
 * client is freed are lost (a gap, never a repeat).
 *
 * Thread-safety: every function may be called from any number of threads
 * at once, except leafd_client_free (no call may be running). Memory: a
 * used-up range (about 48 bytes) is kept until leafd_client_free, so that
 * no thread can ever read a freed one.
 *
 * Fork: a child never hands out what its parent holds. After fork() the
 * child drops the ranges (and thread blocks) it inherited and leases fresh
 * ones at its first call; the parent keeps its own. A client's background
 * thread starts again in the child on that first lease.
 *
 * Out of memory: the library never aborts the process. A failed
 * allocation, thread or libcurl handle is LEAFD_ENOMEM (leafd_next,
 * leafd_next_n) or NULL with *err (leafd_client_new); when the background
 * thread cannot hold a lease it is a failed lease (its IDs are a gap),
 * leased again when a caller next needs one. Decoding allocates nothing.
 *
 * Symbols: the library defines only leafd_-prefixed global symbols (the
 * functions below); its internals, leafd's snowflake decoder among them,
 * are local to it, so they never clash with the program's own.
 *
 * HTTP is libcurl's. Link: -lleafd-client -lcurl -lpthread.
 */
#ifndef LEAFD_CLIENT_H
#define LEAFD_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct leafd_client;

/* Results: 0 or a negative LEAFD_E* code. */
enum {
    LEAFD_OK           = 0,
    LEAFD_EINVAL       = -1,    /* a bad argument (tag, n, URL list) */
    LEAFD_EUNAVAILABLE = -2,    /* no ID left and no server gave a lease */
    LEAFD_EUNKNOWN_TAG = -3,    /* the server says the biz_tag does not exist */
    LEAFD_EREFUSED     = -4,    /* the server refused (token, bad row): 4xx */
    LEAFD_ENOMEM       = -5,    /* out of memory (or threads): try again later */
};

struct leafd_client_options {
    int64_t     lease_min;          /* smallest lease (default 1000) */
    int64_t     lease_max;          /* largest lease (default 1000000, leafd's
                                       segment.lease_max) */
    int         prefetch_percent;   /* lease the next range once this share
                                       of the current one is used (default 20) */
    int64_t     target_ms;          /* how long a lease should last (1000) */
    int         timeout_ms;         /* one HTTP request, connect included (2000) */
    int         dead_ms;            /* skip a failed server this long (1000) */
    const char *token;              /* sent as Authorization: Bearer, or NULL */
};

/* urls: comma-separated base URLs, e.g. "http://10.0.0.1:8080,http://10.0.0.2:8080"
 * (at most 16). opt NULL or fields 0: defaults. Starts the background
 * thread; contacts no server yet. NULL on a bad argument or out of memory,
 * with *err (may be NULL) set to a static message. */
struct leafd_client *leafd_client_new(const char *urls,
                                      const struct leafd_client_options *opt,
                                      const char **err);
/* Stops the background thread and frees everything. NULL: no-op. */
void leafd_client_free(struct leafd_client *c);

/* One ID of tag into *id. LEAFD_OK, or an error (nothing written):
 * LEAFD_EINVAL, LEAFD_EUNAVAILABLE, LEAFD_EUNKNOWN_TAG, LEAFD_EREFUSED,
 * LEAFD_ENOMEM. */
int leafd_next(struct leafd_client *c, const char *tag, int64_t *id);
/* n IDs of tag into ids[0..n): all or nothing is reported, but on an error
 * after some IDs were taken *got says how many are valid in ids (they are
 * unique and yours). got may be NULL. */
int leafd_next_n(struct leafd_client *c, const char *tag, int64_t n,
                 int64_t *ids, int64_t *got);

/* The reason of the calling thread's last error (static or thread-local
 * text; never NULL). */
const char *leafd_last_error(void);
const char *leafd_strerror(int code);

/* Statistics of c (relaxed reads). */
struct leafd_client_stats {
    uint64_t leases;          /* leases received */
    uint64_t http_requests;   /* HTTP requests made (failed ones too) */
    uint64_t failovers;       /* requests that failed and moved on */
    int64_t  lease_size;      /* the last lease size asked for */
};
void leafd_client_stats(struct leafd_client *c, struct leafd_client_stats *st);

/* Snowflake IDs (leafd's snowflake mode): the fields of id under leafd's
 * default layout (Leaf's: epoch 2010-11-04T01:42:54.657Z, 41 bits of time,
 * 10 of worker, 12 of sequence), with leafd's own decoder (src/snowflake/sfcodec.c).
 * Returns 0, or -1 if id is not a valid ID of that layout. */
struct leafd_snowflake {
    int64_t  timestamp_ms;    /* Unix ms */
    char     time[32];        /* ISO-8601 UTC */
    uint64_t worker_id;
    uint64_t sequence;
};
int leafd_snowflake_decode(uint64_t id, struct leafd_snowflake *out);
/* The same for any layout: epoch_ms and the widths of the time, worker and
 * sequence fields (they sum to 63, or to 53: snowflake.layout = js53 is
 * 41, 5, 7). */
int leafd_snowflake_decode_layout(uint64_t id, int64_t epoch_ms, int timestamp_bits,
                                  int worker_bits, int sequence_bits,
                                  struct leafd_snowflake *out);

#ifdef __cplusplus
}
#endif

#endif
