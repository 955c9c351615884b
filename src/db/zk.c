/* zk.c: bounded-wait ZooKeeper calls and session upkeep (see zk.h).
 *
 * Each call allocates a struct zk_call shared by the waiting caller and the
 * library's completion thread, with two references. Whoever finishes last
 * (the caller after its wait, or the completion after a caller that gave up)
 * frees it, so a late reply never touches freed memory.
 *
 * A session not connected for twice its timeout is replaced by a new one
 * (zk_maintain): the server would have expired it by then if it could reach
 * it, and a server that can is refusing it for good ("Refusing session
 * request for client ... as it has seen zxid 0x... our last zxid is 0x...":
 * an ensemble restored from an older snapshot never catches up with the
 * zxid the old session saw). leafd keeps nothing tied to a session.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "util.h"
#include "zk.h"

enum { ZK_ST_CONNECTING, ZK_ST_CONNECTED, ZK_ST_EXPIRED };

struct zk {
    zhandle_t      *zh;
    char           *hosts;
    int             session_timeout_ms;
    _Atomic int     state;              /* ZK_ST_*, set by the watcher */
    _Atomic uint64_t connects;
    _Atomic uint64_t expirations;
    _Atomic int64_t down_since;         /* mono ms not connected since, 0
                                           while connected */
    pthread_mutex_t mu;                 /* guards nothing but the wait below */
    pthread_cond_t  cv;                 /* signalled on every state change */
};

struct zk_call {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             refs;               /* caller + completion, under mu */
    int             done;
    int             rc;
    char           *data;               /* zk_get's value / created path */
    int             len;
    struct Stat     stat;
    char          **names;
    int             n;
};

static pthread_once_t zk_log_once = PTHREAD_ONCE_INIT;

static void
zk_lib_log(const char *message)
{
    log_debug("libzookeeper: %s", message);
}

static void
zk_log_setup(void)
{
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
}

static void
zk_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

static struct timespec
zk_deadline(int timeout_ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static void
zk_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    struct zk *z = ctx;

    (void)zh;
    (void)path;
    if (type != ZOO_SESSION_EVENT)
        return;
    /* One log line per change of state, as for the database. */
    if (state == ZOO_CONNECTED_STATE) {
        int was = atomic_exchange(&z->state, ZK_ST_CONNECTED);
        atomic_store(&z->down_since, 0);
        if (atomic_fetch_add(&z->connects, 1) > 0 && was != ZK_ST_CONNECTED)
            log_info("ZooKeeper %s: connected again", z->hosts);
    } else if (state == ZOO_EXPIRED_SESSION_STATE) {
        if (atomic_exchange(&z->state, ZK_ST_EXPIRED) != ZK_ST_EXPIRED)
            atomic_fetch_add(&z->expirations, 1);
    } else if (state == ZOO_CONNECTING_STATE ||
               state == ZOO_ASSOCIATING_STATE) {
        if (atomic_exchange(&z->state, ZK_ST_CONNECTING) == ZK_ST_CONNECTED) {
            atomic_store(&z->down_since, util_mono_ms());
            log_warn("ZooKeeper %s: connection lost; serving on, reconnecting",
                     z->hosts);
        }
    }
    pthread_mutex_lock(&z->mu);
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
}

static int
zk_handle_new(struct zk *z, char **cause)
{
    atomic_store(&z->state, ZK_ST_CONNECTING);
    atomic_store(&z->down_since, util_mono_ms());
    z->zh = zookeeper_init2(z->hosts, zk_watcher, z->session_timeout_ms, NULL,
                            z, 0, zk_lib_log);
    if (z->zh == NULL) {
        if (cause != NULL)
            *cause = xasprintf("zookeeper_init(%s): %s", z->hosts,
                               strerror(errno));
        return -1;
    }
    return 0;
}

struct zk *
zk_open(const char *hosts, int session_timeout_ms, char **cause)
{
    struct zk *z;

    pthread_once(&zk_log_once, zk_log_setup);
    z = xcalloc(1, sizeof *z);
    z->hosts = xstrdup(hosts);
    z->session_timeout_ms = session_timeout_ms;
    pthread_mutex_init(&z->mu, NULL);
    zk_cond_init(&z->cv);
    if (zk_handle_new(z, cause) == -1) {
        zk_close(z);
        return NULL;
    }
    return z;
}

void
zk_close(struct zk *z)
{
    if (z == NULL)
        return;
    if (z->zh != NULL) {
        int rc = zookeeper_close(z->zh);
        if (rc != ZOK)
            log_warn("zookeeper_close(%s): %s", z->hosts, zerror(rc));
    }
    pthread_mutex_destroy(&z->mu);
    pthread_cond_destroy(&z->cv);
    free(z->hosts);
    free(z);
}

int
zk_wait_connected(struct zk *z, int timeout_ms)
{
    struct timespec dl = zk_deadline(timeout_ms);
    int ok;

    pthread_mutex_lock(&z->mu);
    while (atomic_load(&z->state) != ZK_ST_CONNECTED) {
        if (pthread_cond_timedwait(&z->cv, &z->mu, &dl) == ETIMEDOUT)
            break;
    }
    ok = atomic_load(&z->state) == ZK_ST_CONNECTED;
    pthread_mutex_unlock(&z->mu);
    return ok;
}

int
zk_connected(struct zk *z)
{
    return atomic_load(&z->state) == ZK_ST_CONNECTED;
}

const char *
zk_state_name(struct zk *z)
{
    switch (atomic_load(&z->state)) {
    case ZK_ST_CONNECTED:
        return "connected";
    case ZK_ST_EXPIRED:
        return "expired";
    default:
        return "connecting";
    }
}

uint64_t
zk_connects(struct zk *z)
{
    return atomic_load(&z->connects);
}

uint64_t
zk_expirations(struct zk *z)
{
    return atomic_load(&z->expirations);
}

int
zk_client_id(struct zk *z, clientid_t *out)
{
    const clientid_t *id;

    if (z->zh == NULL || (id = zoo_client_id(z->zh)) == NULL ||
        id->client_id == 0)
        return -1;
    *out = *id;
    return 0;
}

int
zk_maintain(struct zk *z)
{
    char *cause = NULL;
    int st = z->zh != NULL ? zoo_state(z->zh) : 0;
    int64_t down = atomic_load(&z->down_since);
    int stuck = down != 0 && atomic_load(&z->state) == ZK_ST_CONNECTING &&
                util_mono_ms() - down > 2 * (int64_t)z->session_timeout_ms;

    if (z->zh != NULL && atomic_load(&z->state) != ZK_ST_EXPIRED &&
        st != ZOO_EXPIRED_SESSION_STATE && st != ZOO_AUTH_FAILED_STATE &&
        !stuck)
        return 0;
    if (z->zh != NULL) {
        if (stuck)
            log_warn("ZooKeeper %s: not connected for %" PRId64 " ms, over "
                     "twice the session timeout; starting a new session (a "
                     "server refuses one that saw a later zxid than it has, "
                     "as after a restore from an older snapshot)", z->hosts,
                     util_mono_ms() - down);
        else
            log_warn("ZooKeeper session to %s expired; starting a new one",
                     z->hosts);
        zookeeper_close(z->zh);
        z->zh = NULL;
    }
    if (zk_handle_new(z, &cause) == -1) {
        log_error("%s", cause);
        free(cause);
        return -1;
    }
    return 1;
}

/* --- calls ------------------------------------------------------------- */

static struct zk_call *
zk_call_new(void)
{
    struct zk_call *c = xcalloc(1, sizeof *c);

    pthread_mutex_init(&c->mu, NULL);
    zk_cond_init(&c->cv);
    c->refs = 2;
    return c;
}

static void
zk_call_free(struct zk_call *c)
{
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->data);
    zk_strings_free(c->names, c->n);
    free(c);
}

/* Drop one reference; the last one frees. */
static void
zk_call_unref(struct zk_call *c)
{
    int last;

    pthread_mutex_lock(&c->mu);
    last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (last)
        zk_call_free(c);
}

/* Completion side: results are stored under mu by the callers below. */
static void
zk_call_finish(struct zk_call *c, int rc)
{
    int last;

    pthread_mutex_lock(&c->mu);
    c->rc = rc;
    c->done = 1;
    pthread_cond_signal(&c->cv);
    last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (last)
        zk_call_free(c);
}

static void
zk_data_cb(int rc, const char *value, int len, const struct Stat *st,
           const void *arg)
{
    struct zk_call *c = (struct zk_call *)arg;

    if (rc == ZOK) {
        c->data = xmalloc((size_t)(len > 0 ? len : 0) + 1);
        if (len > 0)
            memcpy(c->data, value, (size_t)len);
        c->data[len > 0 ? len : 0] = '\0';
        c->len = len > 0 ? len : 0;
        if (st != NULL)
            c->stat = *st;
    }
    zk_call_finish(c, rc);
}

static void
zk_stat_cb(int rc, const struct Stat *st, const void *arg)
{
    struct zk_call *c = (struct zk_call *)arg;

    if (rc == ZOK && st != NULL)
        c->stat = *st;
    zk_call_finish(c, rc);
}

static void
zk_string_cb(int rc, const char *value, const void *arg)
{
    struct zk_call *c = (struct zk_call *)arg;

    if (rc == ZOK && value != NULL)
        c->data = xstrdup(value);
    zk_call_finish(c, rc);
}

static void
zk_strings_cb(int rc, const struct String_vector *sv, const void *arg)
{
    struct zk_call *c = (struct zk_call *)arg;

    if (rc == ZOK && sv != NULL) {
        c->n = sv->count;
        c->names = xcalloc((size_t)(sv->count > 0 ? sv->count : 1),
                           sizeof *c->names);
        for (int i = 0; i < sv->count; i++)
            c->names[i] = xstrdup(sv->data[i]);
    }
    zk_call_finish(c, rc);
}

static void
zk_void_cb(int rc, const void *arg)
{
    zk_call_finish((struct zk_call *)arg, rc);
}

/* Wait for c after submitting it (submit_rc is the a-function's return).
 * Returns the call's rc; on ZOK, c is still owned by the caller and must be
 * released with zk_call_unref after taking its results. On failure c has
 * already been released. */
static int
zk_call_wait(struct zk *z, struct zk_call *c, int submit_rc, const char *op,
             const char *path, int timeout_ms, char **cause)
{
    struct timespec dl;
    int rc;

    if (submit_rc != ZOK) {
        /* never submitted: the completion will not run */
        c->refs = 1;
        zk_call_unref(c);
        if (cause != NULL)
            *cause = xasprintf("ZooKeeper %s %s (%s): %s", op, path, z->hosts,
                               zerror(submit_rc));
        return submit_rc;
    }
    dl = zk_deadline(timeout_ms);
    pthread_mutex_lock(&c->mu);
    while (!c->done) {
        if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT)
            break;
    }
    rc = c->done ? c->rc : ZOPERATIONTIMEOUT;
    pthread_mutex_unlock(&c->mu);
    if (rc != ZOK) {
        if (cause != NULL) {
            if (rc == ZOPERATIONTIMEOUT && !c->done)
                *cause = xasprintf("ZooKeeper %s %s (%s): no answer in %d ms",
                                   op, path, z->hosts, timeout_ms);
            else
                *cause = xasprintf("ZooKeeper %s %s (%s): %s", op, path,
                                   z->hosts, zerror(rc));
        }
        zk_call_unref(c);
    }
    return rc;
}

/* A call needs a live handle; an expired one fails fast. */
static int
zk_usable(struct zk *z, const char *op, const char *path, char **cause)
{
    if (z->zh == NULL || atomic_load(&z->state) == ZK_ST_EXPIRED) {
        if (cause != NULL)
            *cause = xasprintf("ZooKeeper %s %s (%s): session expired", op,
                               path, z->hosts);
        return ZINVALIDSTATE;
    }
    return ZOK;
}

int
zk_get(struct zk *z, const char *path, char **data, int *len,
       struct Stat *st, int timeout_ms, char **cause)
{
    struct zk_call *c;
    int rc;

    if ((rc = zk_usable(z, "get", path, cause)) != ZOK)
        return rc;
    c = zk_call_new();
    rc = zoo_aget(z->zh, path, 0, zk_data_cb, c);
    rc = zk_call_wait(z, c, rc, "get", path, timeout_ms, cause);
    if (rc != ZOK)
        return rc;
    if (data != NULL) {
        *data = c->data;
        c->data = NULL;
    }
    if (len != NULL)
        *len = c->len;
    if (st != NULL)
        *st = c->stat;
    zk_call_unref(c);
    return ZOK;
}

int
zk_set(struct zk *z, const char *path, const char *data, int len,
       int version, struct Stat *st, int timeout_ms, char **cause)
{
    struct zk_call *c;
    int rc;

    if ((rc = zk_usable(z, "set", path, cause)) != ZOK)
        return rc;
    c = zk_call_new();
    rc = zoo_aset(z->zh, path, data, len, version, zk_stat_cb, c);
    rc = zk_call_wait(z, c, rc, "set", path, timeout_ms, cause);
    if (rc != ZOK)
        return rc;
    if (st != NULL)
        *st = c->stat;
    zk_call_unref(c);
    return ZOK;
}

int
zk_create(struct zk *z, const char *path, const char *data, int len,
          int mode, char **created, int timeout_ms, char **cause)
{
    struct zk_call *c;
    int rc;

    if ((rc = zk_usable(z, "create", path, cause)) != ZOK)
        return rc;
    c = zk_call_new();
    rc = zoo_acreate(z->zh, path, data, len, &ZOO_OPEN_ACL_UNSAFE, mode,
                     zk_string_cb, c);
    rc = zk_call_wait(z, c, rc, "create", path, timeout_ms, cause);
    if (rc != ZOK)
        return rc;
    if (created != NULL) {
        *created = c->data != NULL ? c->data : xstrdup(path);
        c->data = NULL;
    }
    zk_call_unref(c);
    return ZOK;
}

int
zk_children(struct zk *z, const char *path, char ***names, int *n,
            int timeout_ms, char **cause)
{
    struct zk_call *c;
    int rc;

    if ((rc = zk_usable(z, "get_children", path, cause)) != ZOK)
        return rc;
    c = zk_call_new();
    rc = zoo_aget_children(z->zh, path, 0, zk_strings_cb, c);
    rc = zk_call_wait(z, c, rc, "get_children", path, timeout_ms, cause);
    if (rc != ZOK)
        return rc;
    *names = c->names;
    *n = c->n;
    c->names = NULL;
    c->n = 0;
    zk_call_unref(c);
    return ZOK;
}

int
zk_delete(struct zk *z, const char *path, int version, int timeout_ms,
          char **cause)
{
    struct zk_call *c;
    int rc;

    if ((rc = zk_usable(z, "delete", path, cause)) != ZOK)
        return rc;
    c = zk_call_new();
    rc = zoo_adelete(z->zh, path, version, zk_void_cb, c);
    rc = zk_call_wait(z, c, rc, "delete", path, timeout_ms, cause);
    if (rc != ZOK)
        return rc;
    zk_call_unref(c);
    return ZOK;
}

void
zk_strings_free(char **names, int n)
{
    if (names == NULL)
        return;
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}
