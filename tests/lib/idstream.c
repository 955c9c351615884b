/* idstream.c: libleafd-client (clients/c/) as a client of the fault
 * harness (tests/lib/idcheck.py). Takes IDs of a biz_tag in batches, for
 * ever, and writes one line per batch to stdout:
 *
 *   <microseconds the call took> ok <id> <id> ...
 *   <microseconds the call took> c_<error> <leafd_last_error()>
 *
 * (the IDs of a batch that failed part way are written on an "ok" line
 * before its error line). Stops when stdout is closed or on SIGTERM.
 *
 *   idstream URLS TAG N PAUSE_US
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "leafd_client.h"

static const char *
rc_name(int rc)
{
    switch (rc) {
    case LEAFD_EINVAL: return "c_einval";
    case LEAFD_EUNAVAILABLE: return "c_unavailable";
    case LEAFD_EUNKNOWN_TAG: return "c_unknown_tag";
    case LEAFD_EREFUSED: return "c_refused";
    case LEAFD_ENOMEM: return "c_enomem";
    default: return "c_other";
    }
}

static long long
now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int
main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: idstream URLS TAG N PAUSE_US\n");
        return 2;
    }
    const char *err = NULL;
    int64_t n = atoll(argv[3]), got, ids[1000];
    long pause_us = atol(argv[4]);
    struct leafd_client_options opt = { .lease_min = 10, .timeout_ms = 2000 };
    struct leafd_client *c = leafd_client_new(argv[1], &opt, &err);

    if (c == NULL || n < 1 || n > 1000) {
        fprintf(stderr, "idstream: %s\n", c == NULL ? err : "N must be 1 to 1000");
        return 2;
    }
    for (;;) {
        long long t = now_us();
        int rc = leafd_next_n(c, argv[2], n, ids, &got);

        t = now_us() - t;
        if (rc == LEAFD_OK)
            got = n;
        if (got > 0) {
            printf("%lld ok", t);
            for (int64_t i = 0; i < got; i++)
                printf(" %lld", (long long)ids[i]);
            putchar('\n');
        }
        if (rc != LEAFD_OK)
            printf("%lld %s %s\n", t, rc_name(rc), leafd_last_error());
        if (fflush(stdout) != 0 || ferror(stdout))
            break;
        usleep(rc == LEAFD_OK ? pause_us : 50000);
    }
    leafd_client_free(c);
    return 0;
}
