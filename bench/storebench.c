/* storebench.c: segment allocations per second through leafd's own store
 * layer (store_alloc, what the loader threads call), against the database
 * a config names: one store (one connection) per thread, each on a tag of
 * its own (loads of one tag take turns: store_marks_hold), for a set time.
 *
 *   storebench -s mysql|postgresql -u URL [-t THREADS] [-d SECONDS] [-n STEP]
 *
 * The tags bench-<pid>-<i> are made (store_insert) before the clock starts.
 * Prints one line:
 *   RESULT <store> threads=N allocs=A seconds=S allocs_per_sec=R p50_ms=X
 *          p99_ms=Y errors=E
 * bench/stores.py runs it for MariaDB and PostgreSQL in one run.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "store.h"
#include "util.h"

#define MAX_THREADS 64
#define LAT_MAX     (1 << 20)

static struct config cfg;
static double seconds = 5;
static int64_t step = 1000;
static volatile int stop;

struct worker {
    pthread_t th;
    int       i;
    long      allocs, errors;
    double   *lat;               /* ms of each alloc */
    long      nlat;
};

static void *
run(void *arg)
{
    struct worker *w = arg;
    char tag[64], *cause = NULL;
    struct store *s;

    store_thread_init();
    snprintf(tag, sizeof tag, "bench-%d-%d", (int)getpid(), w->i);
    s = store_open(&cfg, &cause);
    if (s == NULL) {
        fprintf(stderr, "storebench: %s\n", cause);
        exit(1);
    }
    if (store_insert(s, tag, 1, step, "storebench", &cause) != STORE_OK) {
        fprintf(stderr, "storebench: insert %s: %s\n", tag, cause ? cause : "?");
        exit(1);
    }
    while (!stop) {
        int64_t t0 = util_mono_us(), max_id, db_step;

        if (store_alloc(s, tag, step, &max_id, &db_step, &cause) == STORE_OK) {
            w->allocs++;
            if (w->nlat < LAT_MAX)
                w->lat[w->nlat++] = (double)(util_mono_us() - t0) / 1000.0;
        } else {
            w->errors++;
            free(cause);
            cause = NULL;
        }
    }
    store_close(s);
    store_thread_end();
    return NULL;
}

static int
cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
    static struct worker w[MAX_THREADS];
    const char *kind = "mysql", *url = NULL;
    int threads = 1, c;
    long allocs = 0, errors = 0, n = 0;
    double *all;
    int64_t t0;

    while ((c = getopt(argc, argv, "s:u:t:d:n:")) != -1) {
        switch (c) {
        case 's': kind = optarg; break;
        case 'u': url = optarg; break;
        case 't': threads = atoi(optarg); break;
        case 'd': seconds = atof(optarg); break;
        case 'n': step = atoll(optarg); break;
        default:
            fprintf(stderr, "usage: storebench -s mysql|postgresql -u URL "
                    "[-t THREADS] [-d SECONDS] [-n STEP]\n");
            return 2;
        }
    }
    if (url == NULL || threads < 1 || threads > MAX_THREADS || seconds <= 0) {
        fprintf(stderr, "storebench: -u URL, 1..%d threads, -d > 0\n",
                MAX_THREADS);
        return 2;
    }
    log_init(LOGL_ERROR, NULL);
    memset(&cfg, 0, sizeof cfg);
    cfg.db_timeout_ms = 5000;
    if (strcmp(kind, "postgresql") == 0) {
        cfg.store = STORE_POSTGRESQL;
        cfg.pg_url = (char *)url;
    } else {
        cfg.store = STORE_MYSQL;
        cfg.mysql_url = (char *)url;
    }
    store_thread_init();
    t0 = util_mono_us();
    for (int i = 0; i < threads; i++) {
        w[i].i = i;
        w[i].lat = xmalloc(LAT_MAX * sizeof (double));
        pthread_create(&w[i].th, NULL, run, &w[i]);
    }
    usleep((useconds_t)(seconds * 1e6));
    stop = 1;
    for (int i = 0; i < threads; i++) {
        pthread_join(w[i].th, NULL);
        allocs += w[i].allocs;
        errors += w[i].errors;
        n += w[i].nlat;
    }
    all = xmalloc((size_t)(n > 0 ? n : 1) * sizeof (double));
    n = 0;
    for (int i = 0; i < threads; i++) {
        memcpy(all + n, w[i].lat, (size_t)w[i].nlat * sizeof (double));
        n += w[i].nlat;
        free(w[i].lat);
    }
    qsort(all, (size_t)n, sizeof (double), cmp_d);
    {
        double secs = (double)(util_mono_us() - t0) / 1e6;

        printf("RESULT %s threads=%d allocs=%ld seconds=%.2f allocs_per_sec=%.1f "
               "p50_ms=%.3f p99_ms=%.3f errors=%ld\n", kind, threads, allocs,
               secs, allocs / secs, n ? all[n / 2] : 0.0,
               n ? all[(long)(n * 0.99)] : 0.0, errors);
    }
    free(all);
    store_thread_end();
    store_library_end();
    return 0;
}
