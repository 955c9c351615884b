/* http_park.c: a request waiting for a key or a deadline: http_park, the
 * thread's parked lists (one per wake bucket) and the park timer (see
 * http.h). Waking is http_server.c's (http_wake, http_wake_all), calling
 * the handler again http_conn.c's (http_conn_retry). I/O thread only, like
 * the connection, except the wake generation and the bucket counts (below).
 *
 * DESIGN
 *
 * Parking. A request parks under a wake key; the key picks one of
 * HTTP_WAKE_BUCKETS buckets, and each thread keeps one parked list per
 * bucket (http_conn.c keeps reading a parked connection, parsing nothing).
 * http_wake(key) bumps s->wake_gen, then, for each thread whose count for
 * the key's bucket is non-zero, sets the bucket's bit in t->wake_bits and
 * signals the thread, which retries only the lists whose bits it finds set.
 * http_wake_all does the same for every bucket of every thread with a
 * parked request. A request that parks re-reads wake_gen after joining its
 * list (a seq_cst increment of the bucket's count); if it moved since before
 * the handler ran (http_conn.c's conn_call loads it before and after), the
 * thread retries that bucket itself. Both sides are seq_cst, so either the
 * waker sees the count or the parker sees the new generation: a wake that
 * races with a park is never lost. Keys that share a bucket only cost
 * spurious retries.
 */
#include <assert.h>
#include <stdatomic.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "http.h"
#include "http_internal.h"
#include "log.h"

/* Take c off its thread's parked list; the park timer keeps running. */
void
http_conn_unlist(struct http_conn *c)
{
    struct http_thread *t = c->t;

    if (!c->parked)
        return;
    assert(c->pprev != NULL || t->parked[c->bucket] == c);
    if (c->pprev != NULL)
        c->pprev->pnext = c->pnext;
    else
        t->parked[c->bucket] = c->pnext;
    if (c->pnext != NULL)
        c->pnext->pprev = c->pprev;
    c->pprev = c->pnext = NULL;
    c->parked = 0;
    assert(atomic_load_explicit(&t->nparked_b[c->bucket],
                                memory_order_relaxed) > 0);
    atomic_store_explicit(&t->nparked_b[c->bucket],
        atomic_load_explicit(&t->nparked_b[c->bucket], memory_order_relaxed) - 1,
        memory_order_relaxed);
    ctr_add(&t->nparked, -1);
}

void
http_conn_unpark(struct http_conn *c)
{
    http_conn_unlist(c);
    if (c->park_armed) {
        event_del(&c->pev);
        c->park_armed = 0;
    }
}

void
http_conn_park_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_conn *c = arg;

    (void)fd;
    (void)what;

    c->t->now_us = 0;
    http_conn_retry(c, 1);
}

void
http_park(struct http_conn *c, int timeout_ms, uint64_t key)
{
    struct http_thread *t = c->t;
    unsigned b = wake_bucket(key);
    int64_t now, at;
    struct timeval tv;

    if (!c->req_active || !c->in_handler) {
        log_error("http_park outside the handler of a live request");
        return;
    }
    if (c->parked && c->bucket != b)
        http_conn_unlist(c);        /* parked twice in one call, new key */
    if (!c->parked) {
        c->parked = 1;
        c->bucket = (unsigned char)b;
        c->pprev = NULL;
        c->pnext = t->parked[b];
        if (t->parked[b] != NULL)
            t->parked[b]->pprev = c;
        t->parked[b] = c;
        /* seq_cst: ordered before conn_call's second wake_gen load, and
         * against the loads in http_wake and http_wake_all. */
        atomic_fetch_add(&t->nparked, 1);
        atomic_fetch_add(&t->nparked_b[b], 1);
    }
    if (timeout_ms < 0)
        timeout_ms = 0;
    now = http_now_ms();
    at = now + timeout_ms;
    if (!c->park_armed || at < c->park_at_ms) {
        tv = http_ms_tv(timeout_ms);
        event_add(&c->pev, &tv);
        c->park_armed = 1;
        c->park_at_ms = at;
    }
}
