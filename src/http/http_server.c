/* http_server.c: leafd's HTTP/1.1 server: the I/O threads, their listeners,
 * accept, stop and wake (see http.h; a connection's life is in
 * http_conn.c).
 *
 * DESIGN
 *
 * Threads. Each I/O thread owns an event_base (created NOLOCK: no other
 * thread ever touches it), a SO_REUSEPORT listening socket and every
 * connection accepted on it. Other threads talk to an I/O thread only through
 * its eventfd: they set bits in t->cmd (wake, stop, force) and write the
 * eventfd when the word was 0. So there is no lock anywhere on the request
 * path; the only shared atomics are the global connection count (touched per
 * connection) and the wake generation and bucket counts (touched per park).
 *
 * Listeners. A thread has one listening socket per protocol it serves
 * (HTTP's, and RESP's, memcached's and gRPC's when enabled), and one more
 * per protocol it serves over TLS; a connection remembers which one it came
 * in on, and that is all that differs until http_conn.c handshakes (TLS)
 * and parses (a gRPC connection starts its HTTP/2 session at accept).
 *
 * Wake. http_wake and http_wake_all only set bits and signal threads; what
 * a retried request does, and why no wake is lost, is in http_park.c.
 */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/thread.h>

#include "http.h"
#include "http_internal.h"
#include "http_tls.h"
#include "log.h"
#include "util.h"

static _Thread_local int http_tl_index = -1;
static pthread_once_t http_evthread_once = PTHREAD_ONCE_INIT;

/* ---- thread-level callbacks ---- */

static void
thread_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
    struct http_listener *l = arg;
    struct http_thread *t = l->t;
    struct http_server *s = t->s;
    struct timeval tv;
    int i, fd;

    (void)what;

    for (i = 0; i < HTTP_ACCEPT_BATCH; i++) {
        fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (http_now_ms() - t->accept_warned_ms >= 10000) {
                t->accept_warned_ms = http_now_ms();
                log_warn("accept on thread %d: %s; pausing the listener "
                         "%d ms at a time", t->index, strerror(errno),
                         HTTP_ACCEPT_BACKOFF_MS);
            }
            event_del(&l->ev);
            tv = http_ms_tv(HTTP_ACCEPT_BACKOFF_MS);
            event_add(&l->backoff_ev, &tv);
            return;
        }
        if (atomic_fetch_add_explicit(&s->nconns, 1, memory_order_relaxed) >=
            s->cfg.max_connections) {
            atomic_fetch_sub_explicit(&s->nconns, 1, memory_order_relaxed);
            http_conn_reject(t, fd, l->proto, l->tls);
        } else {
            http_conn_new(t, fd, l->proto, l->tls);
        }
    }
}

static void
thread_backoff_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_listener *l = arg;

    (void)fd;
    (void)what;

    if (l->fd >= 0 && !l->t->stopping)
        event_add(&l->ev, NULL);
}

/* Retry the parked lists of the buckets in bits. */
static void
thread_retry_parked(struct http_thread *t, uint64_t bits)
{
    struct http_conn *c, *next;
    unsigned b;

    /* Re-parked requests go to the head, behind the cursor: each parked
     * request is retried once per wake. A handler touches only its own
     * connection, so next stays valid. */
    t->now_us = 0;
    while (bits != 0) {
        b = (unsigned)__builtin_ctzll(bits);
        bits &= bits - 1;
        for (c = t->parked[b]; c != NULL; c = next) {
            next = c->pnext;
            http_conn_retry(c, 0);
        }
    }
}

static void
thread_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_thread *t = arg;
    uint64_t bits = t->retry_bits;

    (void)fd;
    (void)what;
    t->retry_bits = 0;
    thread_retry_parked(t, bits);
}

/* After this iteration's reads: send every answer they produced. */
static void
thread_send_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    http_conn_send_queued(arg);
}

static void
thread_stop(struct http_thread *t)
{
    struct http_conn *c, *next;

    if (t->stopping)
        return;
    t->stopping = 1;
    for (int p = 0; p < HTTP_LS_COUNT; p++) {
        struct http_listener *l = &t->ls[p];

        if (l->fd < 0)
            continue;
        event_del(&l->ev);
        event_del(&l->backoff_ev);
        close(l->fd);
        l->fd = -1;
    }
    for (c = t->conns; c != NULL; c = next) {
        next = c->next;
        if (c->h2 != NULL && !c->closing && !c->tls_hs)
            http_h2_stop(c);        /* GOAWAY; may free c */
        else if (http_conn_idle(c))
            http_conn_free(c);
    }
    if (t->nconns == 0)
        event_base_loopbreak(t->base);
}

static void
thread_cmd_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_thread *t = arg;
    uint64_t v;
    unsigned cmd;

    (void)what;

    if (read(fd, &v, sizeof v) < 0 && errno != EAGAIN)
        log_warn("read eventfd: %s", strerror(errno));
    cmd = atomic_exchange(&t->cmd, 0);
    if (cmd & HTTP_CMD_FORCE) {
        thread_stop(t);
        while (t->conns != NULL)
            http_conn_free(t->conns);
        event_base_loopbreak(t->base);
        return;
    }
    if (cmd & HTTP_CMD_STOP)
        thread_stop(t);
    if (cmd & HTTP_CMD_WAKE_ALL) {
        (void)atomic_exchange(&t->wake_bits, 0);
        thread_retry_parked(t, UINT64_MAX);
    } else if (cmd & HTTP_CMD_WAKE) {
        thread_retry_parked(t, atomic_exchange(&t->wake_bits, 0));
    }
}

static void
thread_send(struct http_thread *t, unsigned cmd)
{
    uint64_t one = 1;

    if (atomic_fetch_or(&t->cmd, cmd) == 0 &&
        write(t->efd, &one, sizeof one) < 0 && errno != EAGAIN)
        log_warn("write eventfd: %s", strerror(errno));
}

/* The event loop. With busy_poll_us, a thread that has just read keeps
 * polling (epoll_wait without a timeout) that long before it blocks: a
 * client that sends again within it finds the thread awake, so neither side
 * pays for a wakeup. An idle thread blocks as usual. Every loopbreak is
 * called from this thread's callbacks, inside event_base_loop, so
 * event_base_got_break sees it when the call returns. */
static void
thread_loop(struct http_thread *t)
{
    int64_t spin = t->s->cfg.busy_poll_us, last_read;
    uint64_t reads;
    int flags;

    if (spin <= 0) {
        event_base_loop(t->base, EVLOOP_NO_EXIT_ON_EMPTY);
        return;
    }
    last_read = util_mono_us();
    for (;;) {
        reads = t->reads;
        flags = util_mono_us() - last_read < spin ? EVLOOP_NONBLOCK
                                                  : EVLOOP_ONCE;
        event_base_loop(t->base, flags | EVLOOP_NO_EXIT_ON_EMPTY);
        if (event_base_got_break(t->base))
            return;
        if (t->reads != reads)
            last_read = util_mono_us();
    }
}

static void *
thread_main(void *arg)
{
    struct http_thread *t = arg;
    struct http_server *s = t->s;

    http_tl_index = t->index;
    if (s->thread_cb != NULL)
        s->thread_cb(t->index, 1, s->arg);
    thread_loop(t);
    while (t->conns != NULL)
        http_conn_free(t->conns);
    if (s->thread_cb != NULL)
        s->thread_cb(t->index, 0, s->arg);
    http_tl_index = -1;
    pthread_mutex_lock(&s->exit_lock);
    t->exited = 1;
    pthread_cond_broadcast(&s->exit_cond);
    pthread_mutex_unlock(&s->exit_lock);
    return NULL;
}

/* ---- setup ---- */

static void
http_evthread_init(void)
{
    evthread_use_pthreads();
}

static int
http_listen_fd(const struct addrinfo *ai, int port, int reuseport,
               char **cause)
{
    struct sockaddr_storage ss;
    int fd, one = 1;

    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    if (ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *cause = xasprintf("socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport &&
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) {
        *cause = xasprintf("SO_REUSEPORT: %s", strerror(errno));
        goto error;
    }
    if (bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen) < 0) {
        *cause = xasprintf("bind port %d: %s", port, strerror(errno));
        goto error;
    }
    return fd;

error:
    close(fd);
    return -1;
}

static int
http_sock_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;

    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* Bind one SO_REUSEPORT socket per thread for listener li (proto, or
 * proto + HTTP_PROTO_COUNT over TLS) on address:want. A
 * plain probe bind first makes a taken port fail even when its owner also
 * uses SO_REUSEPORT, and picks the port when want is 0. Returns the port or
 * -1. */
static int
http_bind_all(struct http_server *s, int li, const char *address, int want,
              char **cause)
{
    struct addrinfo hints, *ai = NULL;
    const char *node = address[0] != '\0' ? address : NULL;
    int i, rc, probe = -1, port, ret = -1;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    rc = getaddrinfo(node, NULL, &hints, &ai);
    if (rc != 0) {
        *cause = xasprintf("address %s: %s", address, gai_strerror(rc));
        goto cleanup;
    }
    probe = http_listen_fd(ai, want, 0, cause);
    if (probe < 0)
        goto cleanup;
    port = http_sock_port(probe);
    close(probe);
    probe = -1;
    for (i = 0; i < s->nthreads; i++) {
        struct http_listener *l = &s->threads[i].ls[li];

        l->fd = http_listen_fd(ai, port, 1, cause);
        if (l->fd < 0)
            goto cleanup;
        if (listen(l->fd, HTTP_BACKLOG) < 0) {
            *cause = xasprintf("listen port %d: %s", port, strerror(errno));
            goto cleanup;
        }
    }
    ret = port;

cleanup:
    if (ai != NULL)
        freeaddrinfo(ai);
    return ret;
}

/* The TLS listeners (http.h: tls_enable, resp_tls_enable, mc_tls_enable,
 * grpc_tls_enable), each on its protocol's address. 0 or -1. */
static int
http_server_bind_tls(struct http_server *s, char **cause)
{
    const struct http_config *cfg = &s->cfg;
    const struct { int on, port; const char *address; } want[HTTP_PROTO_COUNT] = {
        [HTTP_PROTO_HTTP] = { cfg->tls_enable, cfg->tls_port, s->address },
        [HTTP_PROTO_RESP] = { cfg->resp_tls_enable, cfg->resp_tls_port,
                              s->resp_address },
        [HTTP_PROTO_MC]   = { cfg->mc_tls_enable, cfg->mc_tls_port,
                              s->mc_address },
        [HTTP_PROTO_GRPC] = { cfg->grpc_tls_enable, cfg->grpc_tls_port,
                              s->grpc_address },
    };

    for (int p = 0; p < HTTP_PROTO_COUNT; p++) {
        s->tls_ports[p] = -1;
        if (!want[p].on)
            continue;
        if (cfg->tls == NULL) {
            *cause = xasprintf("a TLS listener needs a TLS context");
            return -1;
        }
        if (want[p].port < 0 || want[p].port > 65535) {
            *cause = xasprintf("bad TLS port %d", want[p].port);
            return -1;
        }
        s->tls = cfg->tls;
        s->tls_ports[p] = http_bind_all(s, HTTP_PROTO_COUNT + p, want[p].address,
                                        want[p].port, cause);
        if (s->tls_ports[p] < 0)
            return -1;
    }
    return 0;
}

static int
http_thread_init(struct http_server *s, struct http_thread *t, char **cause)
{
    struct event_config *ec;
    struct timeval tv;

    ec = event_config_new();
    event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
    t->base = event_base_new_with_config(ec);
    event_config_free(ec);
    if (t->base == NULL) {
        *cause = xasprintf("event_base_new failed");
        return -1;
    }
    t->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (t->efd < 0) {
        *cause = xasprintf("eventfd: %s", strerror(errno));
        return -1;
    }
    tv = http_ms_tv(s->cfg.idle_timeout_ms);
    t->idle_tv = event_base_init_common_timeout(t->base, &tv);
    if (t->idle_tv == NULL) {
        *cause = xasprintf("event_base_init_common_timeout failed");
        return -1;
    }
    for (int p = 0; p < HTTP_LS_COUNT; p++) {
        struct http_listener *l = &t->ls[p];

        event_assign(&l->ev, t->base, l->fd, EV_READ | EV_PERSIST,
                     thread_accept_cb, l);
        event_assign(&l->backoff_ev, t->base, -1, 0, thread_backoff_cb, l);
    }
    event_assign(&t->cmd_ev, t->base, t->efd, EV_READ | EV_PERSIST,
                 thread_cmd_cb, t);
    event_assign(&t->retry_ev, t->base, -1, 0, thread_retry_cb, t);
    event_assign(&t->send_ev, t->base, -1, 0, thread_send_cb, t);
    t->events_ready = 1;
    for (int p = 0; p < HTTP_LS_COUNT; p++)
        if (t->ls[p].fd >= 0)
            event_add(&t->ls[p].ev, NULL);
    event_add(&t->cmd_ev, NULL);
    return 0;
}

struct http_server *
http_server_new(const struct http_config *cfg, http_handler_cb handler,
                http_thread_cb thread_cb, void *arg, char **cause)
{
    struct http_server *s;
    int i;

    if (cfg->threads < 1 || cfg->port < -1 || cfg->port > 65535 ||
        handler == NULL) {
        *cause = xasprintf("bad http config (threads %d, port %d)",
                           cfg->threads, cfg->port);
        return NULL;
    }
    pthread_once(&http_evthread_once, http_evthread_init);

    s = xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    {
        pthread_condattr_t ca;

        pthread_mutex_init(&s->exit_lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->exit_cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (s->cfg.max_connections <= 0)
        s->cfg.max_connections = HTTP_DEF_MAX_CONNECTIONS;
    if (s->cfg.idle_timeout_ms <= 0)
        s->cfg.idle_timeout_ms = HTTP_DEF_IDLE_TIMEOUT_MS;
    if (s->cfg.max_header_bytes <= 0)
        s->cfg.max_header_bytes = HTTP_DEF_MAX_HEADER_BYTES;
    if (s->cfg.max_url_bytes <= 0)
        s->cfg.max_url_bytes = HTTP_DEF_MAX_URL_BYTES;
    if (s->cfg.max_body_bytes <= 0)
        s->cfg.max_body_bytes = HTTP_DEF_MAX_BODY_BYTES;
    if (s->cfg.tls_handshake_timeout_ms <= 0)
        s->cfg.tls_handshake_timeout_ms = HTTP_DEF_TLS_HANDSHAKE_MS;
    if (s->cfg.grpc_max_message_bytes <= 0)
        s->cfg.grpc_max_message_bytes = HTTP_DEF_GRPC_MAX_MESSAGE;
    if (s->cfg.h2_max_concurrent_streams <= 0)
        s->cfg.h2_max_concurrent_streams = HTTP_DEF_H2_STREAMS;
    s->address = xstrdup(cfg->address != NULL ? cfg->address : "");
    s->cfg.address = s->address;
    s->resp_address = xstrdup(cfg->resp_address != NULL ? cfg->resp_address
                                                        : "");
    s->cfg.resp_address = s->resp_address;
    s->resp_port = -1;
    s->mc_address = xstrdup(cfg->mc_address != NULL ? cfg->mc_address : "");
    s->cfg.mc_address = s->mc_address;
    s->mc_port = -1;
    s->grpc_address = xstrdup(cfg->grpc_address != NULL ? cfg->grpc_address
                                                        : "");
    s->cfg.grpc_address = s->grpc_address;
    s->grpc_port = -1;
    s->handler = handler;
    s->thread_cb = thread_cb;
    s->arg = arg;
    s->in_cap = (size_t)s->cfg.max_header_bytes + HTTP_IN_SLACK;
    s->resp_lim.max_args = RESP_ARGS_MAX;
    s->resp_lim.max_bulk = HTTP_RESP_MAX_BULK;
    s->resp_lim.max_inline = HTTP_RESP_MAX_INLINE;
    s->mc_lim.max_line = s->in_cap < HTTP_MC_MAX_LINE ? s->in_cap
                                                      : HTTP_MC_MAX_LINE;
    s->mc_lim.max_keys = HTTP_MC_MAX_KEYS;
    s->mc_lim.max_data = HTTP_MC_MAX_DATA;
    s->nthreads = cfg->threads;
    s->threads = xcalloc((size_t)s->nthreads, sizeof *s->threads);
    for (i = 0; i < s->nthreads; i++) {
        s->threads[i].s = s;
        s->threads[i].index = i;
        for (int p = 0; p < HTTP_LS_COUNT; p++) {
            s->threads[i].ls[p].t = &s->threads[i];
            s->threads[i].ls[p].fd = -1;
            s->threads[i].ls[p].proto = (unsigned char)(p % HTTP_PROTO_COUNT);
            s->threads[i].ls[p].tls = p >= HTTP_PROTO_COUNT;
        }
        s->threads[i].efd = -1;
        s->threads[i].accept_warned_ms = INT64_MIN / 2;
    }
    if (cfg->resp_enable &&
        (cfg->resp_port < 0 || cfg->resp_port > 65535)) {
        *cause = xasprintf("bad RESP port %d", cfg->resp_port);
        goto error;
    }
    if (cfg->mc_enable && (cfg->mc_port < 0 || cfg->mc_port > 65535)) {
        *cause = xasprintf("bad memcached port %d", cfg->mc_port);
        goto error;
    }
    if (cfg->grpc_enable &&
        (cfg->grpc_port < 0 || cfg->grpc_port > 65535)) {
        *cause = xasprintf("bad gRPC port %d", cfg->grpc_port);
        goto error;
    }
    s->port = -1;
    if (cfg->port >= 0) {
        s->port = http_bind_all(s, HTTP_PROTO_HTTP, s->address, s->cfg.port,
                                cause);
        if (s->port < 0)
            goto error;
    }
    if (cfg->resp_enable) {
        s->resp_port = http_bind_all(s, HTTP_PROTO_RESP, s->resp_address,
                                     cfg->resp_port, cause);
        if (s->resp_port < 0)
            goto error;
    }
    if (cfg->mc_enable) {
        s->mc_port = http_bind_all(s, HTTP_PROTO_MC, s->mc_address,
                                   cfg->mc_port, cause);
        if (s->mc_port < 0)
            goto error;
    }
    if (cfg->grpc_enable) {
        s->grpc_port = http_bind_all(s, HTTP_PROTO_GRPC, s->grpc_address,
                                     cfg->grpc_port, cause);
        if (s->grpc_port < 0)
            goto error;
    }
    if (http_server_bind_tls(s, cause) == -1)
        goto error;
    for (i = 0; i < s->nthreads; i++)
        if (http_thread_init(s, &s->threads[i], cause) < 0)
            goto error;
    return s;

error:
    http_server_free(s);
    return NULL;
}

int
http_server_port(const struct http_server *s)
{
    return s->port;
}

int
http_server_resp_port(const struct http_server *s)
{
    return s->resp_port;
}

int
http_server_mc_port(const struct http_server *s)
{
    return s->mc_port;
}

int
http_server_tls_port(const struct http_server *s, int which)
{
    _Static_assert((int)HTTP_PROTO_HTTP == (int)HTTP_TLS_HTTP &&
                   (int)HTTP_PROTO_RESP == (int)HTTP_TLS_RESP &&
                   (int)HTTP_PROTO_MC == (int)HTTP_TLS_MC &&
                   (int)HTTP_PROTO_GRPC == (int)HTTP_TLS_GRPC,
                   "http.h: http_server_tls_port");
    return which >= 0 && which < HTTP_PROTO_COUNT ? s->tls_ports[which] : -1;
}

int
http_server_grpc_port(const struct http_server *s)
{
    return s->grpc_port;
}

int
http_server_start(struct http_server *s, char **cause)
{
    int i, rc;

    if (s->started) {
        *cause = xasprintf("http server already started");
        return -1;
    }
    s->started = 1;
    for (i = 0; i < s->nthreads; i++) {
        rc = pthread_create(&s->threads[i].tid, NULL, thread_main,
                            &s->threads[i]);
        if (rc != 0) {
            *cause = xasprintf("pthread_create: %s", strerror(rc));
            http_server_stop(s, 0);
            return -1;
        }
        s->threads[i].running = 1;
    }
    return 0;
}

void
http_server_stop(struct http_server *s, int timeout_ms)
{
    struct timespec dl;
    int i;

    if (s == NULL || !s->started || s->stopped)
        return;
    s->stopped = 1;
    for (i = 0; i < s->nthreads; i++)
        if (s->threads[i].running)
            thread_send(&s->threads[i], HTTP_CMD_STOP);
    /* Monotonic: a wall-clock step must not stretch or cut the drain. */
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    for (i = 0; i < s->nthreads; i++) {
        struct http_thread *t = &s->threads[i];

        int done;

        if (!t->running)
            continue;
        pthread_mutex_lock(&s->exit_lock);
        while (!t->exited &&
               pthread_cond_timedwait(&s->exit_cond, &s->exit_lock, &dl) == 0)
            ;
        done = t->exited;
        pthread_mutex_unlock(&s->exit_lock);
        if (!done)
            thread_send(t, HTTP_CMD_FORCE);
        pthread_join(t->tid, NULL);
        t->running = 0;
    }
}

void
http_server_free(struct http_server *s)
{
    int i;

    if (s == NULL)
        return;
    http_server_stop(s, 0);
    for (i = 0; i < s->nthreads; i++) {
        struct http_thread *t = &s->threads[i];

        while (t->conns != NULL)
            http_conn_free(t->conns);
        if (t->events_ready) {
            for (int p = 0; p < HTTP_LS_COUNT; p++) {
                event_del(&t->ls[p].ev);
                event_del(&t->ls[p].backoff_ev);
            }
            event_del(&t->cmd_ev);
            event_del(&t->retry_ev);
            event_del(&t->send_ev);
        }
        if (t->base != NULL)
            event_base_free(t->base);
        for (int p = 0; p < HTTP_LS_COUNT; p++)
            if (t->ls[p].fd >= 0)
                close(t->ls[p].fd);
        if (t->efd >= 0)
            close(t->efd);
        http_pool_drain(&t->inpool);
        http_pool_drain(&t->outpool);
    }
    free(s->threads);
    free(s->address);
    free(s->resp_address);
    free(s->mc_address);
    free(s->grpc_address);
    pthread_cond_destroy(&s->exit_cond);
    pthread_mutex_destroy(&s->exit_lock);
    free(s);
}

void
http_wake_all(struct http_server *s)
{
    int i;

    atomic_fetch_add(&s->wake_gen, 1);
    for (i = 0; i < s->nthreads; i++)
        if (atomic_load(&s->threads[i].nparked) != 0)
            thread_send(&s->threads[i], HTTP_CMD_WAKE_ALL);
}

void
http_wake(struct http_server *s, uint64_t key)
{
    unsigned b = wake_bucket(key);
    uint64_t bit = UINT64_C(1) << b;
    int i;

    atomic_fetch_add(&s->wake_gen, 1);
    for (i = 0; i < s->nthreads; i++) {
        struct http_thread *t = &s->threads[i];

        if (atomic_load(&t->nparked_b[b]) == 0)
            continue;
        /* Skip the signal when the bit was set already: that wake is still
         * pending and the thread has not taken the bits yet. */
        if ((atomic_fetch_or(&t->wake_bits, bit) & bit) == 0)
            thread_send(t, HTTP_CMD_WAKE);
    }
}

int
http_thread_index(void)
{
    return http_tl_index;
}

void
http_server_stats(const struct http_server *s, struct http_stats *out)
{
    int i;

    memset(out, 0, sizeof *out);
    for (i = 0; i < s->nthreads; i++) {
        const struct http_thread *t = &s->threads[i];

        out->connections_open +=
            atomic_load_explicit(&t->open, memory_order_relaxed);
        out->connections_total +=
            atomic_load_explicit(&t->total, memory_order_relaxed);
        out->connections_rejected +=
            atomic_load_explicit(&t->rejected, memory_order_relaxed);
        out->requests_parked +=
            atomic_load_explicit(&t->nparked, memory_order_relaxed);
        out->timeouts +=
            atomic_load_explicit(&t->timeouts, memory_order_relaxed);
        out->resp_open +=
            atomic_load_explicit(&t->resp_open, memory_order_relaxed);
        out->resp_commands +=
            atomic_load_explicit(&t->resp_commands, memory_order_relaxed);
        out->mc_open += atomic_load_explicit(&t->mc_open, memory_order_relaxed);
        out->mc_total += atomic_load_explicit(&t->mc_total, memory_order_relaxed);
        out->mc_commands +=
            atomic_load_explicit(&t->mc_commands, memory_order_relaxed);
        out->tls_handshakes +=
            atomic_load_explicit(&t->tls_done, memory_order_relaxed);
        out->tls_failures +=
            atomic_load_explicit(&t->tls_failed, memory_order_relaxed);
        out->h2_open +=
            atomic_load_explicit(&t->h2_open, memory_order_relaxed);
        out->h2_streams +=
            atomic_load_explicit(&t->h2_streams, memory_order_relaxed);
    }
    if (s->tls != NULL)
        out->tls_not_after = http_tls_not_after(s->tls);
}
