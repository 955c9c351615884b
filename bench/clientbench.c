/* clientbench.c: libleafd-client's in-process speed against a running
 * leafd: leafd_next in a loop on one tag, in T threads for S seconds.
 *
 *   build/clientbench URL TAG THREADS SECONDS
 *
 * Prints "RESULT client threads=T per_thread=IDS/s total=IDS/s
 * http_per_million=N leases=N" (bench/bench.py reads it). A thread checks
 * the clock every 64K IDs only, so the loop is leafd_next and nothing else.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "leafd_client.h"

static struct leafd_client *cl;
static const char *tag;
static double seconds;
static _Atomic int64_t total;
static _Atomic int failed;

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *
run(void *arg)
{
    double end = now_s() + seconds;
    int64_t n = 0, id, sink = 0;

    (void)arg;
    for (;;) {
        for (int i = 0; i < 65536; i++) {
            if (leafd_next(cl, tag, &id) != LEAFD_OK) {
                fprintf(stderr, "clientbench: %s\n", leafd_last_error());
                failed = 1;
                goto out;
            }
            sink ^= id;
        }
        n += 65536;
        if (now_s() >= end)
            break;
    }
out:
    total += n;
    return (void *)(intptr_t)(sink & 1);
}

int
main(int argc, char **argv)
{
    struct leafd_client_stats st;
    pthread_t th[64];
    int threads;
    double t0, el;
    const char *err = NULL;

    if (argc != 5) {
        fprintf(stderr, "usage: clientbench URL TAG THREADS SECONDS\n");
        return 2;
    }
    tag = argv[2];
    threads = atoi(argv[3]);
    seconds = atof(argv[4]);
    if (threads < 1 || threads > 64 || seconds <= 0)
        return 2;
    cl = leafd_client_new(argv[1], NULL, &err);
    if (cl == NULL) {
        fprintf(stderr, "clientbench: %s\n", err);
        return 1;
    }
    {
        int64_t id;                     /* the first lease, outside the timing */
        if (leafd_next(cl, tag, &id) != LEAFD_OK) {
            fprintf(stderr, "clientbench: %s\n", leafd_last_error());
            return 1;
        }
    }
    t0 = now_s();
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, run, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    el = now_s() - t0;
    leafd_client_stats(cl, &st);
    printf("RESULT client threads=%d per_thread=%.0f total=%.0f http_per_million=%.3f "
           "leases=%llu\n", threads, (double)total / el / threads, (double)total / el,
           (double)st.http_requests * 1e6 / (double)(total > 0 ? total : 1),
           (unsigned long long)st.leases);
    leafd_client_free(cl);
    return failed;
}
