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
#include "store_marks.h"
#include "util.h"

#define BACKOFF_MIN_MS 50
#define REFUSED_RETRY_MS 1000       /* a refused code's next look */
#define REFUSAL_MAX 512

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
    int64_t             *retry_at;         /* per code: not before (mono ms) */
    char               (*checked)[TAG_MAX + 1]; /* per code: its row checked */
    char               (*refusal)[REFUSAL_MAX]; /* per code: why refused */
    int64_t              backoff_ms;
    atomic_int           db_up;
    uint64_t             errors;
    char                 last_error[512];
    char                 store_refusal[32]; /* the last load was refused by
                                               the failover rule: its code */
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
    l->retry_at = xcalloc(serials_count(serials) + 1, sizeof *l->retry_at);
    l->checked = xcalloc(serials_count(serials) + 1, sizeof *l->checked);
    l->refusal = xcalloc(serials_count(serials) + 1, sizeof *l->refusal);
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

enum rows_check { ROWS_CLEAR, ROWS_REFUSED, ROWS_DB_ERROR };

/* Do the database's serial rows stand in the way of code i (all codes
 * when i is the count) at now_ms? *cause on anything but ROWS_CLEAR. */
static enum rows_check
rows_check(struct serial_loader *l, size_t i, int64_t now_ms, char **cause)
{
    struct store_row *rows = NULL;
    size_t n = 0, nc = serials_count(l->serials);
    enum rows_check res = ROWS_CLEAR;

    if (store_serial_rows(l->store, &rows, &n, cause) != STORE_OK)
        return ROWS_DB_ERROR;
    for (size_t k = i < nc ? i : 0; k < nc && res == ROWS_CLEAR; k++) {
        if (serial_rows_check(l->serials, k, rows, n, now_ms, cause) == -1)
            res = ROWS_REFUSED;
        if (i < nc)
            break;
    }
    free(rows);
    return res;
}

static void refuse(struct serial_loader *l, size_t i, char *cause);

int
serial_loader_check(struct serial_loader *l, char **cause)
{
    char *why = NULL;
    int db_error = 0;

    /* Code by code: a key changed within a period (serial_rows_check's
     * serial_key_changed) refuses that code's requests until its next
     * period, not the start. */
    for (size_t i = 0; i < serials_count(l->serials); i++) {
        switch (rows_check(l, i, util_wall_ms() + l->offset_ms, &why)) {
        case ROWS_CLEAR:
            continue;
        case ROWS_REFUSED:
            if (strncmp(why, SERIAL_KEY_CHANGED, strlen(SERIAL_KEY_CHANGED)) == 0) {
                refuse(l, i, why);
                why = NULL;
                continue;
            }
            *cause = why;
            return -1;
        case ROWS_DB_ERROR:
            db_error = 1;
            break;
        }
        break;
    }
    if (!db_error)
        return 0;
    log_warn("serial: cannot read the serial rows now (%s); each code's row "
             "is checked against them when it is first used", why ? why : "?");
    free(why);
    return 0;
}

/* Code i is refused (cause, taken): its requests are answered with it, and
 * it is looked at again in REFUSED_RETRY_MS, alone. */
static void
refuse(struct serial_loader *l, size_t i, char *cause)
{
    pthread_mutex_lock(&l->lock);
    if (strcmp(l->refusal[i], cause) != 0)
        log_error("%s", cause);
    snprintf(l->refusal[i], sizeof l->refusal[i], "%s", cause);
    l->wanted[i] = 1;
    l->retry_at[i] = util_mono_ms() + REFUSED_RETRY_MS;
    pthread_mutex_unlock(&l->lock);
    free(cause);
}

/* One load of code i. Returns 0, or -1 to back off. A code refused by
 * another shape's row is looked at again (without a load) before its
 * next load; a load of a row not yet checked is checked before its range
 * is used (a row another node made since the start). */
static int
load_one(struct serial_loader *l, size_t i)
{
    const struct serial_def *d = serials_def(l->serials, i);
    struct serial_key_arg ka = { l->serials, i };
    char tag[TAG_MAX + 1], *cause = NULL;
    int64_t sent = util_mono_us(), db_ms = 0, max_id = 0;
    enum store_result r = STORE_OK;
    enum rows_check rc = ROWS_CLEAR;

    if (l->refusal[i][0] != '\0')
        rc = rows_check(l, i, util_wall_ms() + l->offset_ms, &cause);
    if (rc == ROWS_CLEAR)
        r = store_serial_alloc(l->store, l->offset_ms, serial_row_name, &ka,
                               d->step, &db_ms, tag, sizeof tag, &max_id, &cause);
    if (rc == ROWS_CLEAR && r == STORE_OK && strcmp(tag, l->checked[i]) != 0) {
        rc = rows_check(l, i, db_ms, &cause);
        if (rc == ROWS_CLEAR)
            snprintf(l->checked[i], sizeof l->checked[i], "%s", tag);
    }
    if (rc == ROWS_REFUSED) {
        refuse(l, i, cause);
        return 0;
    }
    if (rc == ROWS_DB_ERROR)
        r = STORE_DB_ERROR;
    if (r == STORE_OK) {
        pthread_mutex_lock(&l->lock);
        if (l->refusal[i][0] != '\0')
            log_info("serial %s: no row of another shape is in its way now",
                     d->code);
        l->refusal[i][0] = '\0';
        pthread_mutex_unlock(&l->lock);
        serial_install(l->serials, i, db_ms, sent, max_id, d->step);
        pthread_mutex_lock(&l->lock);
        l->store_refusal[0] = '\0';
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
    if (r == STORE_REFUSED || r == STORE_DEGRADED) {
        char code[32] = "store_behind";

        if (r == STORE_DEGRADED)
            snprintf(code, sizeof code, "durability_degraded");
        else
            store_marks_refused(code, sizeof code, NULL, 0);
        snprintf(l->store_refusal, sizeof l->store_refusal, "%s", code);
    }
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

/* l->lock held: wait up to ms for a signal (unless stopping). */
static void
wait_ms(struct serial_loader *l, int64_t ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    if (!l->stop)
        pthread_cond_timedwait(&l->cond, &l->lock, &ts);
}

static void *
loader_main(void *arg)
{
    struct serial_loader *l = arg;
    size_t n = serials_count(l->serials);

    store_thread_init();
    pthread_mutex_lock(&l->lock);
    while (!l->stop) {
        int64_t now = util_mono_ms(), wait_until = INT64_MAX;
        size_t i;

        for (i = 0; i < n; i++) {
            if (l->wanted[i] && l->retry_at[i] <= now)
                break;
            if (l->wanted[i] && l->retry_at[i] < wait_until)
                wait_until = l->retry_at[i];
        }
        if (i == n) {
            if (wait_until == INT64_MAX)
                pthread_cond_wait(&l->cond, &l->lock);
            else
                wait_ms(l, wait_until - now);
            continue;
        }
        l->wanted[i] = 0;
        pthread_mutex_unlock(&l->lock);
        if (load_one(l, i) == -1) {
            /* Wake whoever waits: the answer is "database down" now. */
            if (l->wake != NULL)
                l->wake(l->wake_arg, serials_def(l->serials, i)->code);
            pthread_mutex_lock(&l->lock);
            wait_ms(l, l->backoff_ms);
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
    free(l->retry_at);
    free(l->checked);
    free(l->refusal);
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

int
serial_loader_store_refusal(struct serial_loader *l, char *code, size_t ccap,
                            char *why, size_t wcap)
{
    int r;

    pthread_mutex_lock(&l->lock);
    r = l->store_refusal[0] != '\0';
    if (r) {
        snprintf(code, ccap, "%s", l->store_refusal);
        snprintf(why, wcap, "%s", l->last_error);
    }
    pthread_mutex_unlock(&l->lock);
    return r;
}

int
serial_loader_refusal(struct serial_loader *l, const char *code, char *out,
                      size_t cap)
{
    long i = serials_find(l->serials, code, strlen(code));
    int refused = 0;

    pthread_mutex_lock(&l->lock);
    if (i >= 0 && l->refusal[i][0] != '\0') {
        snprintf(out, cap, "%s", l->refusal[i]);
        refused = 1;
    }
    pthread_mutex_unlock(&l->lock);
    return refused;
}

const char *
serial_loader_store(const struct serial_loader *l)
{
    return store_kind_name(l->store);
}
