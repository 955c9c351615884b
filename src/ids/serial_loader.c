/* serial_loader.c: the database thread of serial numbers (segment source):
 * takes sequence ranges with store_serial_alloc and installs them.
 *
 * One thread with its own store connection (serial loads are rare: one per
 * `step` serials of a code). Locking: l->lock guards the wanted flags and
 * the status; it is never held during a database call, and never while a
 * code's lock is taken (serial_take calls serial_loader_want with its code
 * lock released).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "log.h"
#include "serial.h"
#include "serial_loader.h"
#include "store.h"
#include "util.h"

#define BACKOFF_MIN_MS 50

struct serial_loader {
    const struct config *cfg;
    struct serials      *serials;
    struct store        *store;
    int64_t              offset_ms;        /* test-only DB clock offset */
    void               (*wake)(void *arg, const char *code);
    void                *wake_arg;

    pthread_t            thread;
    int                  started;
    pthread_mutex_t      lock;
    pthread_cond_t       cond;
    int                  stop;
    unsigned char       *wanted;           /* per code */
    int64_t              backoff_ms;
    atomic_int           db_up;
    uint64_t             errors;
    char                 last_error[256];
};

struct serial_loader *
serial_loader_new(const struct config *cfg, char **cause)
{
    struct serial_loader *l = xcalloc(1, sizeof *l);
    const char *off = getenv("LEAFD_TEST_SERIAL_DB_OFFSET_MS");

    l->cfg = cfg;
    if (off != NULL && util_parse_i64(off, strlen(off), 1, &l->offset_ms) == -1) {
        *cause = xasprintf("LEAFD_TEST_SERIAL_DB_OFFSET_MS: \"%s\" is not an "
                           "integer", off);
        free(l);
        return NULL;
    }
    if (l->offset_ms != 0)
        log_warn("serial: TEST ONLY: the database's clock is read %lld ms off "
                 "(LEAFD_TEST_SERIAL_DB_OFFSET_MS)", (long long)l->offset_ms);
    if (store_thread_init() == -1) {
        *cause = xasprintf("serial: the MySQL client library cannot start");
        free(l);
        return NULL;
    }
    l->store = store_open(cfg, cause);
    if (l->store == NULL) {
        free(l);
        return NULL;
    }
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->cond, NULL);
    atomic_store(&l->db_up, 1);
    return l;
}

void
serial_loader_attach(struct serial_loader *l, struct serials *serials,
                     void (*wake)(void *arg, const char *code), void *arg)
{
    l->serials = serials;
    l->wanted = xcalloc(serials_count(serials) + 1, 1);
    l->wake = wake;
    l->wake_arg = arg;
}

void
serial_loader_want(void *arg, size_t i)
{
    struct serial_loader *l = arg;

    pthread_mutex_lock(&l->lock);
    l->wanted[i] = 1;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

/* One load of code i. Returns 0, or -1 to back off. */
static int
load_one(struct serial_loader *l, size_t i)
{
    const struct serial_def *d = serials_def(l->serials, i);
    struct serial_key_arg ka = { l->serials, i };
    char tag[TAG_MAX + 1], *cause = NULL;
    int64_t sent = util_mono_us(), db_ms = 0, max_id = 0;
    enum store_result r;

    r = store_serial_alloc(l->store, l->offset_ms, serial_row_name, &ka, d->step,
                           &db_ms, tag, sizeof tag, &max_id, &cause);
    if (r == STORE_OK) {
        serial_install(l->serials, i, db_ms, sent, max_id, d->step);
        pthread_mutex_lock(&l->lock);
        if (!atomic_load(&l->db_up))
            log_info("serial: the database answers again");
        atomic_store(&l->db_up, 1);
        l->backoff_ms = 0;
        pthread_mutex_unlock(&l->lock);
        log_debug("serial %s: row %s gave [%lld, %lld)", d->code, tag,
                  (long long)(max_id - d->step), (long long)max_id);
        return 0;
    }
    pthread_mutex_lock(&l->lock);
    l->errors++;
    if (atomic_load(&l->db_up) || strcmp(l->last_error, cause ? cause : "") != 0)
        log_error("serial %s: cannot take a range: %s", d->code,
                  cause ? cause : "?");
    snprintf(l->last_error, sizeof l->last_error, "%s", cause ? cause : "?");
    atomic_store(&l->db_up, 0);
    l->wanted[i] = 1;                   /* again after the backoff */
    l->backoff_ms = l->backoff_ms ? l->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (l->backoff_ms > l->cfg->db_backoff_max_ms)
        l->backoff_ms = l->cfg->db_backoff_max_ms;
    pthread_mutex_unlock(&l->lock);
    free(cause);
    return -1;
}

static void *
loader_main(void *arg)
{
    struct serial_loader *l = arg;
    size_t n = serials_count(l->serials);

    store_thread_init();
    pthread_mutex_lock(&l->lock);
    while (!l->stop) {
        size_t i;

        for (i = 0; i < n && !l->wanted[i]; i++)
            ;
        if (i == n) {
            pthread_cond_wait(&l->cond, &l->lock);
            continue;
        }
        l->wanted[i] = 0;
        pthread_mutex_unlock(&l->lock);
        if (load_one(l, i) == -1) {
            struct timespec ts;

            /* Wake whoever waits: the answer is "database down" now. */
            if (l->wake != NULL)
                l->wake(l->wake_arg, serials_def(l->serials, i)->code);
            pthread_mutex_lock(&l->lock);
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (time_t)(l->backoff_ms / 1000);
            ts.tv_nsec += (long)(l->backoff_ms % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            if (!l->stop)
                pthread_cond_timedwait(&l->cond, &l->lock, &ts);
            continue;
        }
        if (l->wake != NULL)
            l->wake(l->wake_arg, serials_def(l->serials, i)->code);
        pthread_mutex_lock(&l->lock);
    }
    pthread_mutex_unlock(&l->lock);
    store_thread_end();
    return NULL;
}

int
serial_loader_start(struct serial_loader *l, char **cause)
{
    if (pthread_create(&l->thread, NULL, loader_main, l) != 0) {
        *cause = xasprintf("serial: cannot start the loader thread");
        return -1;
    }
    l->started = 1;
    return 0;
}

void
serial_loader_stop(struct serial_loader *l)
{
    if (l == NULL || !l->started)
        return;
    pthread_mutex_lock(&l->lock);
    l->stop = 1;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->thread, NULL);
    l->started = 0;
}

void
serial_loader_free(struct serial_loader *l)
{
    if (l == NULL)
        return;
    serial_loader_stop(l);
    store_close(l->store);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->cond);
    free(l->wanted);
    free(l);
}

int
serial_loader_db_up(struct serial_loader *l)
{
    return atomic_load_explicit(&l->db_up, memory_order_relaxed);
}

void
serial_loader_last_error(struct serial_loader *l, char *out, size_t cap)
{
    pthread_mutex_lock(&l->lock);
    snprintf(out, cap, "%s", l->last_error);
    pthread_mutex_unlock(&l->lock);
}

const char *
serial_loader_store(const struct serial_loader *l)
{
    return store_kind_name(l->store);
}
